// CausalLM: a Hugging Face causal LM held by the native core. Loads HF directories, generates, scores completions,
// accumulates policy-gradient and cross-entropy gradients, keeps named sampling streams, saves HF directories that
// transformers loads unchanged. Algorithm code drives the model through these methods only, never through `native`.
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import path from "node:path";
import type { NativeModel, NativeModelInfo, ObjectiveMetrics, ObjectiveTokenInput, TokenBatchInput } from "../native/binding.js";
import { canonicalDevice } from "../config/devices.js";
import { ConfigError } from "../config/fields.js";
import { addon } from "../native/loader.js";
import { writeDirAtomic, writeFileAtomic } from "../util/atomic.js";
import { makeDirs } from "../util/make-dirs.js";
import { decoderConfigOf, parseModelConfig, type ModelConfig } from "./config.js";
import { ggufModelConfig, ggufWeightPlan, isGgufPath, readGguf } from "./gguf/read.js";
import { exportGguf, type GgufExportOptions, type GgufExportSummary } from "./gguf/export.js";
import { resolveModelSource } from "./hub.js";
import { readJson, requireRegularFile, weightFiles } from "./model-files.js";
import { checkModelFits, checkWeightsAgainstConfig, ModelLoadError } from "./weights-check.js";

/** An agent's (or critic's) model: a hub id, a directory or a .gguf file to load, or a loaded model. */
export type ModelSource = string | CausalLM;

/** In-memory or saved parameter dtype. */
export type Dtype = "float32" | "bfloat16" | "float16";

/** How CausalLM.load / fromDirectory / create build a model. */
export interface LoadOptions {
  /** In-memory dtype (default float32; bf16 is fast only on CPUs with AVX512-BF16/AMX, and on GPUs). */
  dtype?: Dtype;
  /** "cpu", "cuda" (device 0) or "cuda:N" (default "cpu"). */
  device?: string;
  /** Seed of the model's sampling generator (default 0). */
  seed?: number;
  /** transformers' `attn_implementation`, in place of config.json's: "sdpa" (or a flash / flex name) runs libtorch's
   * scaled_dot_product_attention wherever it can (libtorch ≥ 2.5, no soft-capping), "eager" ours; unset: libtorch's
   * on CUDA, ours on a CPU. `info().attention` says which runs. */
  attnImplementation?: string;
  /**
   * A mixture-of-experts model only: add this × the router's auxiliary load-balancing loss (transformers'
   * load_balancing_loss_func) to every training loss of the model — the policy losses (policyGradientBackward, the
   * actor's part of actor-critic) as well as causalLMLossBackward, in place of config.json's router_aux_loss_coef.
   * Without it the policy losses have no router term, as in CoMLRL, which computes its losses from logits; the
   * causal-LM loss has it when config.json says output_router_logits, as transformers adds it to a labelled forward.
   */
  routerAuxLossCoef?: number;
}

/** Options of clone(): the router coefficients and the attention kernel stay the original's. */
export type CloneOptions = Omit<LoadOptions, "routerAuxLossCoef" | "attnImplementation">;

/** What the training losses return besides their own values: the router's auxiliary loss where one was added. */
export interface RouterAuxLoss {
  /** The load-balancing loss itself (unscaled, before its coefficient); absent when none was added. */
  routerAuxLoss?: number;
}

/** What CausalLM.generate samples; unset fields follow Hugging Face generate()'s defaults. */
export interface GenerationOptions {
  /** Most new tokens per row (EOS ends a row sooner). */
  maxNewTokens: number;
  /** Samples per prompt (default 1); rows come prompt-major. */
  numReturnSequences?: number;
  /** Sample (true) or take the most likely token (false, the default). */
  doSample?: boolean;
  /** Logits are divided by it before filtering (default 1). */
  temperature?: number;
  /** Nucleus filter: keep the smallest set of tokens whose probability reaches topP (default 1: all). */
  topP?: number;
  /**
   * As Hugging Face generate() reads top_k: a number wins (0: no top-k filter); null or unset leaves it to
   * generation_config.json's top_k, and to 50 when the file has none.
   */
  topK?: number | null;
  /**
   * Hugging Face's repetition_penalty (> 0; 1: off): a number wins; null or unset leaves it to generation_config.json's
   * repetition_penalty, and to 1 when the file has none (Qwen2.5-Instruct ships 1.05).
   */
  repetitionPenalty?: number | null;
  /** Stop ids (default: the config's and generation_config.json's EOS ids). */
  eosTokenIds?: number[];
  /** Filler after a sequence ends (default: the config's pad id, else the first EOS id). */
  padTokenId?: number;
  /**
   * Also return each chosen token's log-prob under the model (temperature 1, no filtering), and under the distribution
   * it was sampled from (processedLogprobs: after repetition penalty, temperature, top-k and top-p; 0 when greedy).
   */
  returnLogprobs?: boolean;
  /** Also return the raw next-token logits of every step (large; for tests). */
  returnScores?: boolean;
  /** The named sampling stream to draw from (default "default"); see NativeModel.setSeed. */
  stream?: string;
}

/** What CausalLM.generate returns. */
export interface Generation {
  /** One completion per (prompt, sample), prompt-major: row p·K + k. Real tokens only, EOS included. */
  completions: Int32Array[];
  /** Padded [rows, width] block as generated, with pads after each row's end. */
  tokens: Int32Array;
  /** Columns of `tokens`. */
  width: number;
  /** Real tokens per row. */
  lengths: Int32Array;
  /** Per row, each chosen token's log-prob (with returnLogprobs). */
  logprobs?: Float32Array[];
  /** Per row, each chosen token's log-prob under the distribution it was sampled from (with returnLogprobs). */
  processedLogprobs?: Float32Array[];
  /** Every step's raw next-token logits (with returnScores). */
  scores?: Float32Array;
}

/** Rows of token ids, one per sequence, of any lengths (unpadded). */
export type TokenRows = ReadonlyArray<ArrayLike<number>>;

/** A padded [batch, length] block of token ids, row-major, with its attention mask (1 = real token; all real when absent). */
export type TokenBatch = TokenBatchInput;

/** What CausalLM.score computes beside the per-row log-prob sums and means. */
export interface ScoreOptions {
  /** Also return each row's mean token entropy (Scores.entropy). */
  entropy?: boolean;
  /** Also return every completion token's log-prob (Scores.tokenLogprobs). */
  tokenLogprobs?: boolean;
}

/** Completion log-probs from CausalLM.score and the training losses. */
export interface Scores {
  /** Σ log π(completion token) per row. */
  sum: Float32Array;
  /** sum / completion length. */
  mean: Float32Array;
  /** Mean token entropy per row (when asked). */
  entropy?: Float32Array;
  /** Per-token log-probs, rows concatenated (when asked). */
  tokenLogprobs?: Float32Array;
}

/** How CausalLM.save writes a Hugging Face directory. */
export interface SaveOptions {
  /** The saved dtype (default: the in-memory one). */
  dtype?: Dtype;
  /** Shard model.safetensors above this many bytes (default 5 GB, as transformers). */
  maxShardBytes?: number;
  /** Writes its files into the directory too. */
  tokenizer?: {
    /** Writes the tokenizer's files into dir. */
    saveTo(dir: string): Promise<void>;
  };
}

export { ModelLoadError };
export type { NativeModelInfo as ModelInfo, TokenBatchInput };

/** Generation met NaN or infinite logits (NaN weights, overflow in the dtype). */
export class NonFiniteLogitsError extends Error {
  override name = "NonFiniteLogitsError";
}

function ragged(rows: TokenRows, what: string): { tokens: Int32Array; lengths: Int32Array } {
  const lengths = new Int32Array(rows.length);
  let total = 0;
  rows.forEach((row, i) => {
    lengths[i] = row.length;
    total += row.length;
  });
  const tokens = new Int32Array(total);
  let offset = 0;
  rows.forEach((row, i) => {
    for (let j = 0; j < row.length; j++) {
      const id = row[j];
      if (!Number.isInteger(id)) throw new TypeError(`${what}[${i}][${j}] is not an integer token id: ${id}`);
      tokens[offset + j] = id;
    }
    offset += row.length;
  });
  return { tokens, lengths };
}

export function completionBatch(prompts: TokenRows, completions: TokenRows) {
  if (prompts.length !== completions.length) {
    throw new RangeError(`${prompts.length} prompts but ${completions.length} completions: one prompt per completion`);
  }
  const p = ragged(prompts, "prompts");
  const c = ragged(completions, "completions");
  return { prompts: p.tokens, promptLengths: p.lengths, completions: c.tokens, completionLengths: c.lengths };
}

/** JSON as transformers writes its config files: sorted keys, two-space indent, trailing newline. */
function hfJson(value: Record<string, unknown>): string {
  const sort = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(sort) : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort((v as Record<string, unknown>)[k])])) : v;
  return `${JSON.stringify(sort(value), null, 2)}\n`;
}

/** The stream training-mode dropout draws its masks from (train()); every model has it, and checkpoints keep its state. */
export const DROPOUT_STREAM = "dropout";
/** The dropout seed of a model whose sampling seed is `seed` (seedTraining): apart from it, so that masks and samples
 * draw unrelated numbers. */
const dropoutSeed = (seed: number): number => seed + 2_000_003;

// generation_config.json fields that change what transformers' generate() samples but our sampler does not apply,
// with transformers' defaults (which change nothing). top_k and repetition_penalty are applied; CoMLRL's trainers pass
// do_sample, temperature, top_p and max_new_tokens themselves.
const UNAPPLIED_SAMPLING_DEFAULTS: Record<string, unknown> = {
  min_p: null,
  typical_p: 1,
  epsilon_cutoff: 0,
  eta_cutoff: 0,
  no_repeat_ngram_size: 0,
  min_length: 0,
  min_new_tokens: null,
  bad_words_ids: null,
  suppress_tokens: null,
  begin_suppress_tokens: null,
  sequence_bias: null,
  forced_bos_token_id: null,
  forced_eos_token_id: null,
  exponential_decay_length_penalty: null,
  renormalize_logits: false,
};

/** Says which sampling fields of a generation_config.json would make Hugging Face generate() sample otherwise. */
function warnUnappliedSampling(generationConfig: Record<string, unknown>, file: string): void {
  const unapplied = Object.keys(UNAPPLIED_SAMPLING_DEFAULTS).filter(
    (key) => key in generationConfig && JSON.stringify(generationConfig[key]) !== JSON.stringify(UNAPPLIED_SAMPLING_DEFAULTS[key]),
  );
  if (unapplied.length === 0) return;
  process.emitWarning(`${file}: ${unapplied.map((key) => `${key}=${JSON.stringify(generationConfig[key])}`).join(", ")} not applied: comlrl's sampler has no such setting, so it samples as transformers would without them`);
}

/** config.json read with LoadOptions' overrides: attnImplementation in place of the file's, and routerAuxLossCoef as
 * the coefficient of every training loss. */
function configWithOptions(raw: Record<string, unknown>, options: LoadOptions, file: string): ModelConfig {
  const overridden = options.attnImplementation === undefined ? raw : { ...raw, attn_implementation: options.attnImplementation };
  return withRouterAuxLoss(parseModelConfig(overridden, file), options, file);
}

/** LoadOptions' routerAuxLossCoef applied to a parsed config: the coefficient of every training loss. */
function withRouterAuxLoss(config: ModelConfig, options: LoadOptions, file: string): ModelConfig {
  const coef = options.routerAuxLossCoef;
  if (coef === undefined) return config;
  if (typeof coef !== "number" || !Number.isFinite(coef) || coef < 0) {
    throw new ConfigError(`routerAuxLossCoef must be a non-negative number, got ${JSON.stringify(coef)}`);
  }
  if (!config.layerSparse.includes(1)) throw new ConfigError(`routerAuxLossCoef: ${file} describes a model without mixture-of-experts layers`);
  return { ...config, lmRouterAuxCoef: coef, policyRouterAuxCoef: coef };
}

/** generation_config.json as transformers builds it from a config alone: its BOS, EOS and pad ids. */
function generationConfigOf(config: ModelConfig, raw: Record<string, unknown>): Record<string, unknown> {
  const generationConfig: Record<string, unknown> = { bos_token_id: config.bosTokenId, eos_token_id: raw.eos_token_id };
  if (config.padTokenId !== null) generationConfig.pad_token_id = config.padTokenId;
  return generationConfig;
}

/**
 * The configuration half of CausalLM.fromDirectory, before any weights are read: config.json parsed with the load
 * options, generation_config.json (when present) read and its EOS ids added to the config's.
 */
export function readModelDirectoryConfig(
  dir: string,
  options: LoadOptions = {},
): { config: ModelConfig; generationConfig: Record<string, unknown>; configFile: string } {
  if (!existsSync(dir)) throw new ModelLoadError(`${dir}: no such model directory`);
  const configFile = path.join(dir, "config.json");
  const config = configWithOptions(readJson(configFile), options, configFile);
  const generationFile = path.join(dir, "generation_config.json");
  const generationConfig = existsSync(generationFile) ? readJson(generationFile) : {};
  warnUnappliedSampling(generationConfig, generationFile);
  const extraEos = (Array.isArray(generationConfig.eos_token_id) ? generationConfig.eos_token_id : [generationConfig.eos_token_id]).filter(
    (id): id is number => Number.isInteger(id),
  );
  config.eosTokenIds = [...new Set([...config.eosTokenIds, ...extraEos])];
  return { config, generationConfig, configFile };
}

/** A Hugging Face causal LM held by the native core: generation, exact completion scoring, the policy and causal-LM losses, saving (docs/models.md). */
export class CausalLM {
  private constructor(
    /**
     * The native model the methods call into: only src/models and src/native reach it (eslint.config.js).
     * @internal
     */
    readonly native: NativeModel,
    /** config.json as read into the decoder's settings. */
    readonly config: ModelConfig,
    /** generation_config.json as read, or built from the config. */
    readonly generationConfig: Record<string, unknown>,
    /** Where it was loaded from (null for models built in memory). */
    readonly source: string | null,
  ) {}

  /** Loads a local HF directory, a .gguf file or a hub id (resolved in, or downloaded to, the HF cache). */
  static async load(source: string, options: LoadOptions & { revision?: string } = {}): Promise<CausalLM> {
    const dir = await resolveModelSource(source, { revision: options.revision });
    return CausalLM.fromDirectory(dir, options);
  }

  /**
   * Loads an HF directory (config.json, model.safetensors or shards, optional generation_config.json), or a .gguf
   * file (its metadata as the config, its tensors dequantized to the dtype: docs/models.md, "GGUF files").
   */
  static async fromDirectory(dir: string, options: LoadOptions = {}): Promise<CausalLM> {
    if (isGgufPath(dir) && existsSync(dir)) return CausalLM.fromGguf(dir, options);
    const { config, generationConfig, configFile } = readModelDirectoryConfig(dir, options);
    const files = weightFiles(dir);
    checkWeightsAgainstConfig(config, configFile, files);
    const native = await addon().NativeModel.load({
      config: decoderConfigOf(config),
      files,
      dtype: options.dtype ?? "float32",
      device: canonicalDevice(options.device ?? "cpu"),
      seed: options.seed ?? 0,
    });
    return new CausalLM(native, config, generationConfig, dir);
  }

  /** Loads a GGUF file as transformers' from_pretrained(dir, gguf_file=…) does: the config from its metadata, every tensor dequantized to the dtype. */
  static async fromGguf(file: string, options: LoadOptions = {}): Promise<CausalLM> {
    const gguf = readGguf(requireRegularFile(file));
    const raw = ggufModelConfig(gguf, file);
    const config = configWithOptions(raw, options, file);
    checkModelFits(config, file);
    const native = await addon().NativeModel.load({
      config: decoderConfigOf(config),
      files: [],
      gguf: { file, tensors: ggufWeightPlan(gguf, raw, file) },
      dtype: options.dtype ?? "float32",
      device: canonicalDevice(options.device ?? "cpu"),
      seed: options.seed ?? 0,
    });
    return new CausalLM(native, config, generationConfigOf(config, raw), file);
  }

  /** A model with transformers-style random weights (normal(0, initStd), zero biases, unit norms). */
  static create(configJson: Record<string, unknown>, options: LoadOptions & { initStd?: number } = {}): CausalLM {
    const config = configWithOptions(configJson, options, "config");
    checkModelFits(config, "config");
    const native = addon().NativeModel.create({
      config: decoderConfigOf(config),
      dtype: options.dtype ?? "float32",
      device: canonicalDevice(options.device ?? "cpu"),
      seed: options.seed ?? 0,
      initStd: options.initStd ?? ((configJson.initializer_range as number | undefined) ?? 0.02),
    });
    return new CausalLM(native, config, generationConfigOf(config, configJson), null);
  }

  /** The ids that end a generation: config.json's and generation_config.json's EOS ids. */
  get eosTokenIds(): number[] {
    return this.config.eosTokenIds;
  }

  /** Samples completions for token-id prompts (KV-cached, batched; one native call), from the named sampling stream. */
  async generate(prompts: TokenRows, options: GenerationOptions): Promise<Generation> {
    const eos = options.eosTokenIds ?? this.config.eosTokenIds;
    const pad = options.padTokenId ?? this.config.padTokenId ?? this.config.eosTokenIds[0] ?? eos[0];
    if (pad === undefined) throw new ConfigError("generate: no padTokenId given and the model config has neither pad nor EOS ids");
    const { tokens, lengths } = ragged(prompts, "prompts");
    const out = await this.native.generate({
      prompts: tokens,
      promptLengths: lengths,
      maxNewTokens: options.maxNewTokens,
      numReturnSequences: options.numReturnSequences ?? 1,
      doSample: options.doSample ?? false,
      temperature: options.temperature ?? 1,
      topP: options.topP ?? 1,
      topK: options.topK ?? this.generationDefault("top_k", 50, (v) => Number.isInteger(v) && v >= 0, "a non-negative integer"),
      repetitionPenalty:
        options.repetitionPenalty ?? this.generationDefault("repetition_penalty", 1, (v) => Number.isFinite(v) && v > 0, "a positive number"),
      eosTokenIds: Int32Array.from(eos),
      padTokenId: pad,
      returnLogprobs: options.returnLogprobs ?? false,
      returnScores: options.returnScores ?? false,
      ...(options.stream === undefined ? {} : { stream: options.stream }),
    }).catch((error: Error) => {
      // The native side cannot name the model whose logits went non-finite.
      throw /logits are not finite/.test(error.message) ? new NonFiniteLogitsError(`${this.source ?? "a model built in memory"}: ${error.message}`, { cause: error }) : error;
    });
    const rows = out.lengths.length;
    const completions = Array.from({ length: rows }, (_, r) => out.tokens.slice(r * out.width, r * out.width + out.lengths[r]));
    const generation: Generation = { completions, tokens: out.tokens, width: out.width, lengths: out.lengths };
    const perRow = (values: Float32Array) => Array.from({ length: rows }, (_, r) => values.slice(r * out.width, r * out.width + out.lengths[r]));
    if (out.logprobs) generation.logprobs = perRow(out.logprobs);
    if (out.processedLogprobs) generation.processedLogprobs = perRow(out.processedLogprobs);
    if (out.scores) generation.scores = out.scores;
    return generation;
  }

  /** A sampling field of generation_config.json, else transformers' GenerationConfig default, as generate() merges them. */
  private generationDefault(key: string, fallback: number, valid: (value: number) => boolean, expected: string): number {
    const value = this.generationConfig[key] ?? fallback;
    if (typeof value !== "number" || !valid(value)) {
      throw new ConfigError(`${this.source ?? "generation config"}: generation_config.json ${key} must be ${expected}, got ${JSON.stringify(value)}`);
    }
    return value;
  }

  /** Log-probs of exactly the completion tokens of each (prompt, completion) row, in one batched pass. */
  async score(prompts: TokenRows, completions: TokenRows, options: ScoreOptions = {}): Promise<Scores> {
    return addon().score(this.native, { ...completionBatch(prompts, completions), ...options });
  }

  /**
   * Accumulates ∇ of scale · (Σ_k −A_k · log π(completion_k) + c · router aux loss) into the parameters' gradients,
   * the router term only with LoadOptions' routerAuxLossCoef c, over every token of prompt ⧺ completion of each row
   * (a prompt shared by rows counts once per row), as transformers computes it for that padded batch.
   */
  async policyGradientBackward(
    prompts: TokenRows,
    completions: TokenRows,
    advantages: ArrayLike<number>,
    scale = 1,
  ): Promise<Scores & {
    /** The loss whose gradient was accumulated. */
    loss: number;
  } & RouterAuxLoss> {
    return addon().policyGradientBackward(this.native, { ...completionBatch(prompts, completions), advantages: Float32Array.from(advantages), scale });
  }

  /**
   * score()'s sums from a forward with gradients, and the gradient policyGradientBackward(prompts, completions,
   * advantages, scale) would accumulate from that forward, for a loss whose advantages need other models' scores
   * first. keepGraph holds the forward's activations until the backward, which then runs no forward of its own;
   * without, they are freed at once and the backward runs the same forward again (the same bits, dropout masks
   * included), trading a second forward for the memory.
   */
  async scoreForBackward(prompts: TokenRows, completions: TokenRows, keepGraph: boolean): Promise<Pick<Scores, "sum" | "mean"> & {
    /** Accumulates the policy-gradient loss's gradient; with a kept graph it frees it, and a second call throws. */
    policyGradientBackward(advantages: ArrayLike<number>, scale?: number): Promise<{
      /** The loss whose gradient was accumulated. */
      loss: number;
    } & RouterAuxLoss>;
    /**
     * Frees a kept graph now when its backward will not run (an update that failed first): its activations are device
     * memory the garbage collector does not see. Nothing to do after the backward, or without a kept graph.
     */
    release(): Promise<void>;
  }> {
    const { sum, mean, graph } = await addon().scoreForBackward(this.native, completionBatch(prompts, completions), { keep: keepGraph });
    return {
      sum,
      mean,
      policyGradientBackward: async (advantages, scale = 1) =>
        graph === undefined
          ? this.policyGradientBackward(prompts, completions, advantages, scale)
          : addon().heldPolicyGradientBackward(this.native, graph, { advantages: Float32Array.from(advantages), scale }),
      release: async () => {
        if (graph !== undefined) await addon().releaseHeldScores(this.native, graph);
      },
    };
  }

  /**
   * Accumulates ∇ of scale · (a clipped-ratio objective over the completion tokens + router aux loss), from one
   * scoring forward (native/losses/objective.h: GRPO's, DAPO's, Dr. GRPO's … losses); the token log-probs it returns
   * are this model's, before the update. The clipped-ratio losses of the policy loss (trainers/policy-loss.ts).
   * @internal
   */
  async objectiveBackward(
    prompts: TokenRows,
    completions: TokenRows,
    options: ObjectiveTokenInput & { advantages: ArrayLike<number>; scale?: number },
  ): Promise<Scores & ObjectiveMetrics & { loss: number; tokenLogprobs: Float32Array } & RouterAuxLoss> {
    return addon().objectiveBackward(this.native, { ...completionBatch(prompts, completions), ...options, advantages: Float32Array.from(options.advantages) });
  }

  /**
   * Mean next-token cross-entropy over the real tokens (transformers' causal-LM loss), plus router_aux_loss_coef ×
   * the router's load-balancing loss when config.json says output_router_logits (or LoadOptions' routerAuxLossCoef
   * asks), as transformers' loss of a forward given labels; its gradient accumulates unless backward is false.
   */
  async causalLMLossBackward(batch: TokenBatch, options: { backward?: boolean } = {}): Promise<{
    /** Mean next-token cross-entropy (plus the router term when added). */
    loss: number;
  } & RouterAuxLoss> {
    return addon().causalLMLossBackward(this.native, { ...batch, backward: options.backward ?? true });
  }

  /** Per-row Σ_t k3 estimate of KL(this ‖ reference) over the completion tokens (COMLRL-SPEC §3.6). */
  async klK3(reference: CausalLM, prompts: TokenRows, completions: TokenRows): Promise<Float32Array> {
    return addon().klK3(this.native, reference.native, completionBatch(prompts, completions));
  }

  /** Seeds a sampling stream (default "default"), creating it if new. */
  setSeed(seed: number, stream?: string): void {
    this.native.setSeed(seed, stream);
  }

  /** Seeds the two streams a training run draws from: its sampling stream (the default one if none is named) with `seed`, dropout apart from it. */
  seedTraining(seed: number, samplingStream?: string): void {
    this.setSeed(seed, samplingStream);
    this.setSeed(dropoutSeed(seed), DROPOUT_STREAM);
  }

  /** The stream's generator state, for checkpoints; a stream never seeded is an error naming it. */
  generatorState(stream?: string): Uint8Array {
    return this.native.getGeneratorState(stream);
  }

  /** Restores a state from generatorState() (creating the stream if new, as a checkpoint resume does). */
  setGeneratorState(state: Uint8Array, stream?: string): void {
    this.native.setGeneratorState(state, stream);
  }

  /** Replaces the weights in place from an HF directory's safetensors (checkpoint resume); every tensor is checked as at load. */
  async loadWeights(dir: string): Promise<void> {
    await this.native.loadWeights(weightFiles(dir));
  }

  /** Deep copy (optionally on another device or dtype): e.g. a frozen reference policy. */
  async clone(options: CloneOptions = {}): Promise<CausalLM> {
    const native = await this.native.clone(options.device === undefined ? options : { ...options, device: canonicalDevice(options.device) });
    return new CausalLM(native, this.config, this.generationConfig, this.source);
  }

  /** Turns off gradients of every parameter (references, frozen comparators); returns this. */
  freeze(): this {
    this.native.freeze();
    return this;
  }

  /** Recomputes activations in the backward pass instead of keeping them (less memory, more time); returns this. */
  setGradientCheckpointing(enabled: boolean): this {
    this.native.setGradientCheckpointing(enabled);
    return this;
  }

  /**
   * Training mode, as torch's module.train(): the config's dropout (attention_dropout, GPT-2's attn_pdrop /
   * resid_pdrop / embd_pdrop, Phi-3's resid_pdrop) acts in the forwards of the gradient-computing losses, its masks
   * drawn from the "dropout" stream (seeded and restored like any stream). Generation and scoring never drop.
   * A loaded or created model starts in evaluation mode, as from_pretrained leaves one; returns this.
   */
  train(enabled = true): this {
    this.native.setTraining(enabled);
    return this;
  }

  /** Evaluation mode (no dropout anywhere), as torch's module.eval(); returns this. */
  eval(): this {
    return this.train(false);
  }

  /** Clears the parameters' accumulated gradients (on the model's lane, so the JS thread never waits on its lock). */
  zeroGrad(): Promise<void> {
    return this.native.zeroGrad();
  }

  /** Shape, dtype, device, parameter count and the attention kernel in use. */
  info(): NativeModelInfo {
    return this.native.info();
  }

  /**
   * Runs this model's calls (its heads', and those of optimizers whose first module it is) on CPU agent lane `lane`
   * with one intra-op thread, beside the other lanes; null returns them to its device's lane.
   */
  setComputeLane(lane: number | null): void {
    addon().setComputeLane(this.native, lane);
  }

  /** Where this model's calls run: "cpu", "cuda:N" or an agent lane "cpu#k". */
  computeLane(): string {
    return addon().computeLane(this.native);
  }

  /** Writes an HF directory atomically: config.json, generation_config.json, safetensors (sharded above the limit). */
  async save(dir: string, options: SaveOptions = {}): Promise<void> {
    const dtype = options.dtype ?? (this.native.info().dtype as Dtype);
    await writeDirAtomic(dir, async (tmp) => {
      const saved = await this.native.save({ dir: tmp, dtype, maxShardBytes: options.maxShardBytes });
      if (saved.files.length > 1) {
        const weightMap = Object.fromEntries(Object.keys(saved.weightMap).sort().map((k) => [k, saved.weightMap[k]]));
        const index = { metadata: { total_size: saved.totalBytes }, weight_map: weightMap };
        await writeFileAtomic(path.join(tmp, "model.safetensors.index.json"), `${JSON.stringify(index, null, 2)}\n`);
      }
      // transformers 5 writes `dtype`, 4.x `torch_dtype`: keep the file's own key.
      const dtypeKey = this.config.raw.torch_dtype !== undefined && this.config.raw.dtype === undefined ? "torch_dtype" : "dtype";
      await writeFileAtomic(path.join(tmp, "config.json"), hfJson({ ...this.config.raw, [dtypeKey]: dtype }));
      await writeFileAtomic(path.join(tmp, "generation_config.json"), hfJson(this.generationConfig));
      if (options.tokenizer) await options.tokenizer.saveTo(tmp);
    });
  }

  /**
   * Writes the model and its tokenizer as one GGUF file that llama.cpp (node-llama-cpp, Ollama) runs, atomically: an
   * HF directory is saved in float32 beside `file`, converted (exportGguf) and removed. docs/gguf.md lists the
   * families and types.
   */
  async exportGguf(file: string, options: GgufExportOptions & {
    /** The tokenizer whose vocabulary, merges and chat template go into the file (GGUF carries its own). */
    tokenizer: NonNullable<SaveOptions["tokenizer"]>;
  }): Promise<GgufExportSummary> {
    const target = path.resolve(file);
    await makeDirs(path.dirname(target));
    const staging = await mkdtemp(path.join(path.dirname(target), `.${path.basename(target)}.hf-`));
    try {
      const hfDir = path.join(staging, "model");
      await this.save(hfDir, { dtype: "float32", tokenizer: options.tokenizer });
      return await exportGguf(hfDir, target, { dtype: options.dtype, name: options.name });
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
  }

  /** Frees the native weights now rather than at garbage collection; the model is unusable after. */
  dispose(): void {
    this.native.dispose();
  }

  /** dispose(), for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}
