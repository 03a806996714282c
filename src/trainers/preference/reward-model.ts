// The joint reward model of MARLHF (COMLRL-SPEC §6.3): a causal-LM backbone with its own tokenizer and a scalar head
// (Linear(H, 1)) on the last real token of a joint text — every agent's prompt and response in one document. Trained
// with the Bradley–Terry loss on preference pairs, then frozen and used as the RL reward. Saves as a Hugging Face
// directory plus value_head.pt, and loads back from one, so it can score texts on its own.
import { existsSync } from "node:fs";
import path from "node:path";
import { CausalLM, type Dtype, type TokenBatch } from "../../models/causal-lm.js";
import { resolveModelSource } from "../../models/hub.js";
import { ComlrlTokenizer } from "../../models/tokenizer.js";
import { ValueHead } from "../../models/value-head.js";
import type { StateTensor } from "../../io/torch-pickle.js";
import { SeededRandom } from "../../util/random.js";

const HEAD_FILE = "value_head.pt";

/** How JointRewardModel.load() places and initialises the model. */
export interface JointRewardModelOptions {
  /** Default "cpu". */
  device?: string;
  /** In-memory weight dtype (default float32). */
  dtype?: Dtype;
  /** Seeds the head's initial weights (and the backbone's sampling stream, which scoring never uses). */
  seed?: number;
  /** Token limit of a joint text: longer texts keep their last maxLength tokens, the one the head reads among them. */
  maxLength?: number | null;
  /** Train only the head. */
  freezeBackbone?: boolean;
}

/** The joint text of §6.3: a header, then each agent's prompt and response (agents numbered from 1), blank-line separated. */
export function jointText(prompts: readonly string[], completions: readonly string[]): string {
  const blocks = ["Joint multi-agent response"];
  prompts.forEach((prompt, k) => blocks.push(`Agent ${k + 1} prompt:\n${prompt}`, `Agent ${k + 1} response:\n${completions[k]}`));
  return blocks.join("\n\n");
}

/**
 * A fresh reward head as CoMLRL 1.4.3 makes it: its JointRewardModel's head is a plain nn.Linear(H, 1), whose default
 * initialisation draws the weight and the bias from U(−1/√H, 1/√H) (kaiming-uniform with a = √5, the bias bound from
 * fan-in) — not the value heads' N(0, 0.02) with a zero bias. The values come from our seeded generator: torch's
 * stream is not reproducible across runtimes, the distribution is.
 */
export function comlrlRewardHeadInit(hiddenSize: number, seed: number): Record<string, StateTensor> {
  const bound = 1 / Math.sqrt(hiddenSize);
  const random = new SeededRandom(seed);
  const draw = (shape: number[]): StateTensor => {
    const values = Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => (2 * random.next() - 1) * bound);
    return { dtype: "float32", shape, data: new Uint8Array(values.buffer) };
  };
  return { "value_projection.weight": draw([1, hiddenSize]), "value_projection.bias": draw([1]) };
}

/** The joint reward model of MARLHF: a causal-LM backbone with a Linear(H, 1) head on the last real token of the joint text. */
export class JointRewardModel {
  private frozen = false;

  private constructor(
    /** The causal-LM backbone whose last-token hidden state the head reads. */
    readonly model: CausalLM,
    /** The scalar Linear(H, 1) reward head. */
    readonly head: ValueHead,
    /** Tokenizes joint texts for the backbone. */
    readonly tokenizer: ComlrlTokenizer,
    /** Token limit of a joint text (its last maxLength tokens are kept); null: no limit. */
    readonly maxLength: number | null,
  ) {}

  /**
   * The backbone and tokenizer from a hub id or local directory, with a fresh head — or, when the directory holds
   * value_head.pt (a saved reward model), that head.
   */
  static async load(source: string, options: JointRewardModelOptions = {}): Promise<JointRewardModel> {
    const dir = await resolveModelSource(source);
    const tokenizer = await ComlrlTokenizer.fromDirectory(dir);
    const model = await CausalLM.fromDirectory(dir, { device: options.device ?? "cpu", dtype: options.dtype, seed: options.seed ?? 0 });
    try {
      if (options.freezeBackbone) model.freeze();
      const head = ValueHead.create(model, { hiddenDim: null, seed: options.seed ?? 0 });
      const saved = path.join(dir, HEAD_FILE);
      try {
        head.loadStateDict(existsSync(saved) ? saved : comlrlRewardHeadInit(model.config.hiddenSize, options.seed ?? 0));
      } catch (error) {
        head.dispose();
        throw error;
      }
      return new JointRewardModel(model, head, tokenizer, options.maxLength ?? null);
    } catch (error) {
      model.dispose();
      throw error;
    }
  }

  /** Right-padded rows of the texts' ids, each cut to its last maxLength tokens. */
  private batch(texts: readonly string[]): TokenBatch {
    const rows = texts.map((text, i) => {
      const ids = this.tokenizer.encode(text);
      if (ids.length === 0) throw new RangeError(`reward model: text ${i} encodes to no tokens`);
      return this.maxLength === null ? ids : ids.slice(-this.maxLength);
    });
    const length = Math.max(...rows.map((r) => r.length));
    const ids = new Int32Array(rows.length * length).fill(this.tokenizer.padTokenId);
    const attentionMask = new Int32Array(rows.length * length);
    rows.forEach((row, b) => {
      ids.set(row, b * length);
      attentionMask.fill(1, b * length, b * length + row.length);
    });
    return { ids, attentionMask, batch: rows.length, length };
  }

  /** One score per text, in one batched pass without gradients. */
  async score(texts: readonly string[]): Promise<Float32Array> {
    if (texts.length === 0) return new Float32Array(0);
    return this.head.rewardScores(this.batch(texts));
  }

  /** Scores of a node's joint actions: prompts[agent], completions[agent][j] → one score per j. */
  async scoreJoint(prompts: readonly string[], completions: readonly string[][]): Promise<Float32Array> {
    return this.score(completions[0].map((_, j) => jointText(prompts, completions.map((c) => c[j]))));
  }

  /**
   * Accumulates ∇ of mean −log σ(s_w − s_l) over the pairs into the head (and the backbone unless frozen); returns
   * the loss and the pairs' scores (before any step).
   */
  async bradleyTerryBackward(
    winners: readonly string[],
    losers: readonly string[],
  ): Promise<{
    /** mean −log σ(s_w − s_l) over the pairs. */
    loss: number;
    /** Each winner's score, before the step. */
    winnerScores: Float32Array;
    /** Each loser's score, before the step. */
    loserScores: Float32Array;
  }> {
    if (winners.length !== losers.length) throw new RangeError(`${winners.length} winners but ${losers.length} losers`);
    if (this.frozen) throw new Error("the reward model is frozen: it was trained already");
    const n = winners.length;
    const out = await this.head.bradleyTerryBackward({
      ...this.batch([...winners, ...losers]),
      chosen: Int32Array.from({ length: n }, (_, i) => i),
      rejected: Int32Array.from({ length: n }, (_, i) => n + i),
    });
    return { loss: out.loss, winnerScores: out.scores.slice(0, n), loserScores: out.scores.slice(n) };
  }

  /** Share of pairs whose winner scores strictly higher (NaN for no pairs), scored in batches of batchSize pairs. */
  async pairwiseAccuracy(winners: readonly string[], losers: readonly string[], batchSize = 16): Promise<number> {
    let correct = 0;
    for (let start = 0; start < winners.length; start += batchSize) {
      const w = await this.score(winners.slice(start, start + batchSize));
      const l = await this.score(losers.slice(start, start + batchSize));
      w.forEach((s, i) => (correct += s > l[i] ? 1 : 0));
    }
    return correct / winners.length;
  }

  /** Drops the accumulated gradients of the backbone and the head. */
  async zeroGrad(): Promise<void> {
    await Promise.all([this.model.zeroGrad(), this.head.zeroGrad()]);
  }

  /** Ends training: no more gradients (idempotent). */
  freeze(): void {
    if (this.frozen) return;
    this.model.freeze();
    this.head.freeze();
    this.frozen = true;
  }

  /** Whether freeze() was called: the model scores but no longer trains. */
  get isFrozen(): boolean {
    return this.frozen;
  }

  /** dir: the backbone in Hugging Face layout with the tokenizer, and the head as value_head.pt. */
  async save(dir: string): Promise<void> {
    await this.model.save(dir, { tokenizer: this.tokenizer });
    await this.head.save(path.join(dir, HEAD_FILE));
  }

  /** Frees the backbone's and the head's native memory. */
  dispose(): void {
    this.head.dispose();
    this.model.dispose();
  }

  /** Same as dispose(), for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}
