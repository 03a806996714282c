// ValueHead: a critic's value head (or a reward model's score head) on a CausalLM's last hidden state, with what is
// computed over the two together — readouts, reward scores, the value, actor-critic and Bradley–Terry losses — and
// PyTorch state_dict I/O (value_head.pt files as torch.save writes them).
import type { NativeValueHead, NativeValueHeadInfo, Readout } from "../native/binding.js";
import { addon } from "../native/loader.js";
import { loadTorchStateDict, saveTorchStateDict, type StateTensor } from "../io/torch-pickle.js";
import { completionBatch, type CausalLM, type Scores, type TokenBatch, type TokenRows } from "./causal-lm.js";

export type { Readout };

export interface ValueHeadOptions {
  /** null (default): Linear(H, 1); d: Linear(H, d) → Tanh → Linear(d, 1). */
  hiddenDim?: number | null;
  /** Seed of the initial weights, N(0, 0.02) with zero biases (default 0). */
  seed?: number;
}

export interface ValueLossOptions {
  readout: Readout;
  /** One target per readout value. */
  targets: ArrayLike<number>;
  /** With clipRange: PPO's clipped value loss around these values. */
  oldValues?: ArrayLike<number>;
  clipRange?: number;
  /** Weights the accumulated gradient (not the returned loss). */
  scale?: number;
}

export interface ActorCriticOptions extends ValueLossOptions {
  /** One per row: the policy-gradient weights, as in CausalLM.policyGradientBackward. */
  advantages: ArrayLike<number>;
  valueLossCoef: number;
}

export interface PreferencePairs {
  /** Row indices into the batch: pair i prefers row chosen[i] to row rejected[i]. */
  chosen: ArrayLike<number>;
  rejected: ArrayLike<number>;
  /** false: the loss and scores only, no gradients (default true). */
  backward?: boolean;
}

function valueLossInput(options: ValueLossOptions) {
  return {
    readout: options.readout,
    targets: Float32Array.from(options.targets),
    oldValues: options.oldValues === undefined ? undefined : Float32Array.from(options.oldValues),
    clipRange: options.clipRange,
    scale: options.scale,
  };
}

export class ValueHead {
  private constructor(
    readonly native: NativeValueHead,
    /** The model whose hidden states the head reads. */
    readonly model: CausalLM,
  ) {}

  /** A new head for model, in the model's dtype and on its device. */
  static create(model: CausalLM, options: ValueHeadOptions = {}): ValueHead {
    const { dtype, device } = model.info();
    const native = new (addon().NativeValueHead)({
      hiddenSize: model.config.hiddenSize,
      hiddenDim: options.hiddenDim ?? null,
      dtype,
      device,
      seed: options.seed ?? 0,
    });
    return new ValueHead(native, model);
  }

  info(): NativeValueHeadInfo {
    return this.native.info();
  }

  /**
   * Values without gradients: "v" one per row (the last prompt position, prompt alone), "q" one per row (the last
   * completion token), "positions" one per prompt + completion token, rows concatenated.
   */
  async readout(prompts: TokenRows, completions: TokenRows, readout: Readout): Promise<Float32Array> {
    return addon().values(this.model.native, this.native, { ...completionBatch(prompts, completions), readout });
  }

  /** The head on each row's last real token (left or right padding), without gradients: a reward model's scores. */
  async rewardScores(batch: TokenBatch): Promise<Float32Array> {
    return addon().rewardScores(this.model.native, this.native, batch);
  }

  /** Accumulates the value loss's gradient into the head and (unless frozen) the model; returns the unscaled loss. */
  async valueLossBackward(prompts: TokenRows, completions: TokenRows, options: ValueLossOptions): Promise<{ loss: number; values: Float32Array }> {
    return addon().valueLossBackward(this.model.native, this.native, { ...completionBatch(prompts, completions), ...valueLossInput(options) });
  }

  /**
   * The actor-critic loss of a model with its own head: policy-gradient loss + valueLossCoef · value loss from one
   * forward of prompt ⧺ completion, back-propagated once (scale weights the gradient; the losses returned are unscaled).
   */
  async actorCriticBackward(
    prompts: TokenRows,
    completions: TokenRows,
    options: ActorCriticOptions,
  ): Promise<Scores & { policyLoss: number; valueLoss: number; loss: number; values: Float32Array }> {
    return addon().actorCriticBackward(this.model.native, this.native, {
      ...completionBatch(prompts, completions),
      ...valueLossInput(options),
      advantages: Float32Array.from(options.advantages),
      valueLossCoef: options.valueLossCoef,
    });
  }

  /** Accumulates ∇ of mean −log σ(s_chosen − s_rejected) over the pairs into the head and (unless frozen) the model. */
  async bradleyTerryBackward(batch: TokenBatch & PreferencePairs): Promise<{ loss: number; scores: Float32Array }> {
    return addon().bradleyTerryBackward(this.model.native, this.native, {
      ...batch,
      chosen: Int32Array.from(batch.chosen),
      rejected: Int32Array.from(batch.rejected),
      backward: batch.backward ?? true,
    });
  }

  zeroGrad(): void {
    this.native.zeroGrad();
  }

  /** No more gradients: optimizers skip the head from now on. */
  freeze(): void {
    this.native.freeze();
  }

  stateDict(): Record<string, StateTensor> {
    return this.native.stateDict();
  }

  /**
   * From a state dict or a value_head.pt file (torch.save of the head's state_dict). Names and shapes must match this
   * head's (set by valueHeadHiddenDim / criticValueHeadHiddenDim); otherwise the error names the file and both shapes.
   */
  loadStateDict(dictOrPath: Record<string, StateTensor> | string): void {
    const dict = typeof dictOrPath === "string" ? loadTorchStateDict(dictOrPath) : dictOrPath;
    const where = typeof dictOrPath === "string" ? `${dictOrPath}: ` : "";
    const entries = (list: Array<[string, number[]]>) => list.map(([name, shape]) => `${name} [${shape.join(", ")}]`);
    const theirs = entries(Object.entries(dict).map(([name, t]) => [name, t.shape]));
    const ours = entries(this.native.parameterNames().map(({ name, shape }) => [name, shape]));
    // The same names and shapes in any order: a state dict's key order is not part of the head.
    if ([...theirs].sort().join() !== [...ours].sort().join()) {
      throw new Error(`${where}the saved head has ${theirs.join(", ")}; this value head has ${ours.join(", ")} (its hidden size and hidden dim must match the saved head's)`);
    }
    try {
      this.native.loadStateDict(dict);
    } catch (error) {
      (error as Error).message = `${where}${(error as Error).message}`;
      throw error;
    }
  }

  /** Writes the head as torch.save(head.state_dict()) would (readable by torch.load(weights_only=True)), atomically. */
  async save(file: string): Promise<void> {
    await saveTorchStateDict(file, this.stateDict());
  }

  dispose(): void {
    this.native.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
