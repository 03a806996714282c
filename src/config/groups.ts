// Field groups every trainer config is assembled from: sampling, placement, evaluation, reference KL, the runtime
// settings (seed, dtype, clipping, AdamW) and the training schedule of the MAGRPO and preference families. A trainer takes the groups it needs and changes defaults with withDefaults;
// MAGRPO's own fields (advantages, buffers, the rollout tree) stay in magrpo.ts.
import { deviceSpec } from "./devices.js";
import { bool, field, float, int, nullable, oneOf, reject, type ConfigOf } from "./fields.js";
import { PRECISIONS, type Precision } from "./precision.js";

/** How agents are placed: "none" (one device, in turn), "mp" (one device per agent, concurrently), "ddp" (data parallel across processes). */
export type ParallelTraining = "none" | "mp" | "ddp";
/** Parameter dtype of trained models. */
export type DType = "float32" | "bfloat16";

/** What happens to a prompt of more tokens than it may have. */
export type PromptOverflow = "truncate" | "error";

export const SAMPLING_FIELDS = {
  /** Completions per agent per node: the group the baseline is taken over. */
  numGenerations: int({ default: 4, min: 2 }),
  // (ours) Upstream leaves the sampling settings unchecked and lets generation fail later; these are the ranges
  // in which sampling is defined.
  /** Most tokens sampled per completion (EOS ends one sooner). */
  maxNewTokens: int({ default: 256, min: 1 }),
  /** Sampling temperature; logits are divided by it before top-k and top-p. */
  temperature: float({ default: 0.6, above: 0 }),
  /** Nucleus sampling: the smallest set of tokens whose probability reaches topP; 1 keeps every token. */
  topP: float({ default: 0.6, above: 0, max: 1 }),
  /**
   * null: what CoMLRL's top_k=None means under Hugging Face generate(): the model's generation_config.json decides
   * (its top_k, else 50). 0 turns top-k filtering off.
   */
  topK: nullable(int({ default: 50, min: 0 })),
  /**
   * (ours) Most tokens a prompt may have; null: the tokenizer's model_max_length, as CoMLRL's tokenization truncates.
   * Never more than the model's max_position_embeddings leave after maxNewTokens.
   */
  maxPromptTokens: nullable(int({ min: 1 })),
  /**
   * (ours) A prompt over its limit: "truncate" keeps the tokenizer's truncation_side (as CoMLRL does), "error" stops
   * the run naming the item and agent.
   */
  promptOverflow: oneOf<PromptOverflow>(["truncate", "error"], { default: "truncate" }),
};

/** How completions are sampled in training rollouts (and, with one sample, in evaluation). */
export interface SamplingConfig extends ConfigOf<typeof SAMPLING_FIELDS> {}

export const PLACEMENT_FIELDS = {
  // "auto" and "ddp" were removed upstream; CoMLRL reads null and "null" as "none". Our "ddp" is data parallel on c10d.
  /**
   * "none": models share one device, agents run in turn; "mp": one device per agent, concurrently; "ddp" (ours):
   * "none" in each process of a data-parallel job (comlrl launch), gradients reduced across them.
   */
  parallelTraining: oneOf(["none", "mp", "ddp"], { default: "none", aliases: { null: "none" } }),
  /** null/"auto" = auto placement; see planPlacement. Required for "mp". */
  agentDevices: deviceSpec(),
};

/** Where a trainer's agents and models go. */
export interface PlacementFields extends ConfigOf<typeof PLACEMENT_FIELDS> {}

export const EVAL_FIELDS = {
  /** Evaluate every this many train items; 0 turns periodic evaluation off. */
  evalInterval: int({ default: 16, min: 0 }),
  /** Evaluation items per evaluation (from the eval dataset, else the train dataset). */
  evalNumSamples: int({ default: 4, min: 0 }),
};

/** When and on how many items a trainer evaluates. */
export interface EvalConfig extends ConfigOf<typeof EVAL_FIELDS> {}

export const REFERENCE_KL_FIELDS = {
  /** (ours) Subtract β · KL(agent ‖ frozen reference) from each completion's reward (k3 estimator per token). */
  referenceKlEnabled: bool({ default: false }),
  /** β of the reference-KL penalty. */
  referenceKlCoef: float({ default: 0.1, min: 0 }),
  /** Devices of the frozen reference models; null = their agents' devices. */
  referenceDevices: deviceSpec(),
};

/** The reference-KL penalty against frozen copies of the agents. */
export interface ReferenceKlConfig extends ConfigOf<typeof REFERENCE_KL_FIELDS> {}

const betas = field<readonly [number, number]>((raw) => {
  const ok = Array.isArray(raw) && raw.length === 2 && raw.every((b) => typeof b === "number" && b >= 0 && b < 1);
  return ok ? [raw[0], raw[1]] : reject("must be two numbers in [0, 1), e.g. [0.9, 0.999]");
}, [0.9, 0.999], "[β1, β2], each in [0, 1)");

export const RUNTIME_FIELDS = {
  /** (ours) Seeds the agents' sampling generators and anything the trainer shuffles. */
  seed: int({ default: 0, min: 0 }),
  /** (ours) Parameter dtype of the trained models. */
  dtype: oneOf(["float32", "bfloat16"], { default: "float32", aliases: { fp32: "float32", bf16: "bfloat16" } }),
  /**
   * (ours) How each optimizer steps bf16 parameters, decided per agent (and critic, reward model) from its model's
   * dtype and device: "bf16-mixed" keeps float32 master weights and moments, "pure-bf16" steps the bf16 weights in
   * place as CoMLRL does (at small learning rates most weights then never move), "auto" is bf16-mixed for a bf16 model
   * on a GPU and pure-bf16 on a CPU. float32 models step in float32 whatever is set (src/config/precision.ts).
   */
  precision: oneOf<Precision>(PRECISIONS, { default: "auto" }),
  /** (ours) Global gradient-norm clip per optimizer step; null clips nothing, as CoMLRL. */
  maxGradNorm: nullable(float({ above: 0 })),
  /** (ours) AdamW's decoupled weight decay; PyTorch's default, which CoMLRL's optimizers inherit. */
  weightDecay: float({ default: 0.01, min: 0 }),
  /** (ours) AdamW's (β1, β2); PyTorch's default. */
  adamBetas: betas,
  /** (ours) AdamW's ε; PyTorch's default. */
  adamEps: float({ default: 1e-8, above: 0 }),
  /**
   * (ours; TRL's gradient_checkpointing) The agents' models keep only each decoder layer's input for the backward and
   * recompute the layer there: an update's activations shrink to one layer's, for about one more forward of compute.
   * The same gradients (dropout masks are replayed).
   */
  gradientCheckpointing: bool({ default: false }),
  /**
   * (ours) Seconds a reward function's call may take to settle; past them the run stops with an error naming the item
   * and turn, where a promise that never settles would end the process without a word.
   */
  rewardTimeoutSeconds: float({ default: 600, above: 0 }),
};

/** Seed, dtype, gradient clipping and AdamW settings every trainer takes. */
export interface RuntimeConfig extends ConfigOf<typeof RUNTIME_FIELDS> {}

export const TRAINING_FIELDS = {
  /** Passes over the train dataset (MADPO: over its preference pairs). */
  numTrainEpochs: int({ default: 20, min: 1 }),
  // (ours) CoMLRL leaves the learning rate unchecked; negative makes no sense, 0 is a valid frozen dry run.
  /** AdamW learning rate of every agent. */
  agentLearningRate: float({ default: 5e-6, min: 0 }),
  /** Least env-step gap between two train-metric logs. */
  loggingSteps: int({ default: 50, min: 1 }),
  /** Validated only: the trainer's own numAgents argument decides the agent count (spec §1.2). */
  numAgents: int({ default: 2, min: 1 }),
};

/** How long and how fast a trainer trains its agents, how often it logs, and for how many roles. */
export interface TrainingConfig extends ConfigOf<typeof TRAINING_FIELDS> {}

export const GROUP_FIELDS = { ...SAMPLING_FIELDS, ...PLACEMENT_FIELDS, ...EVAL_FIELDS, ...REFERENCE_KL_FIELDS, ...RUNTIME_FIELDS };

/** Every group: what a trainer config that samples, places, evaluates and may use reference KL starts from. */
export interface GroupConfig extends ConfigOf<typeof GROUP_FIELDS> {}
