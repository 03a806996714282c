// The hand-written typed surface of the native addon. Every function here exists in native/; nothing else does.
import type { StateTensor } from "../io/torch-pickle.js";

/** What the loaded addon runs on: libtorch, CUDA, threads, BLAS and the CPU allocator (runtimeInfo(); `npx comlrl info`). */
export interface RuntimeInfo {
  /** The libtorch version the addon was built against. */
  torchVersion: string;
  /** Whether the addon is the `cuda` variant. */
  cudaCompiled: boolean;
  /** Whether CUDA can be used on this machine. */
  cudaAvailable: boolean;
  /** Visible CUDA devices. */
  cudaDeviceCount: number;
  /** Bytes in live tensors on cuda:0 (CUDA builds on a machine with a GPU only; 0 until CUDA has started). */
  cudaAllocatedBytes?: number;
  /**
   * The CUDA caching allocator's figures per visible device (empty without CUDA). All 0 until CUDA starts, at the
   * first CUDA tensor; a CUDA build on libtorch 1.x reports 0 throughout (it cannot tell when the allocator starts).
   */
  cudaMemory: CudaDeviceMemory[];
  /** Intra-op threads (COMLRL_NUM_THREADS or setNumThreads). */
  numThreads: number;
  /** The BLAS libtorch's matmuls run on, as that library describes itself. */
  blas: string;
  /** The shared library the BLAS was loaded from. */
  blasLibrary: string;
  /** Bytes of freed CPU tensor memory the addon keeps for reuse, and its limit (0: caching off; COMLRL_CPU_CACHE_MB). */
  cpuCacheBytes: number;
  /** The cache's limit in bytes. */
  cpuCacheLimitBytes: number;
}

/** What COMLRL_TF32 and COMLRL_DETERMINISTIC turned on when the addon loaded (native/optim/numerics.h). */
export interface NumericsInfo {
  /** Whether TF32 was asked for (COMLRL_TF32) when the addon loaded. */
  tf32Requested: boolean;
  /** TF32 matmuls and convolutions on CUDA: requested and a CUDA device present. */
  tf32: boolean;
  /** Whether deterministic algorithms were asked for (COMLRL_DETERMINISTIC) when the addon loaded. */
  deterministic: boolean;
  /** CUBLAS_WORKSPACE_CONFIG as the addon saw it (null: unset). */
  cublasWorkspaceConfig: string | null;
}

/** A GGUF metadata value: numbers of every GGUF numeric type, booleans, strings and arrays of them. */
export type GgufValue = number | boolean | string | GgufValue[];

/** A GGUF file's header as readGguf() reads it (native/io/gguf.h). */
export interface GgufContents {
  /** Every metadata key with its value. */
  metadata: Record<string, GgufValue>;
  /** The tensor table: name, ggml type name ("Q4_K"), shape outermost first (PyTorch order). */
  tensors: { name: string; type: string; shape: number[] }[];
}

/** Where one parameter of a model loaded from a GGUF file comes from (native/model/gguf_weights.h). */
export interface GgufTensorSource {
  /** The parameter's (Hugging Face) name. */
  parameter: string;
  /** The GGUF tensor's name. */
  tensor: string;
  /** Undo llama.cpp's rotary row permutation over this many heads. */
  permuteHeads?: number;
  /** Added to the dequantized values (Gemma's norms are stored as 1 + w). */
  offset?: number;
}

/** One CUDA device's memory as libtorch's caching allocator reports it, in bytes. */
export interface CudaDeviceMemory {
  /** "cuda:N". */
  device: string;
  /** Bytes in live tensors. */
  allocatedBytes: number;
  /** Bytes the allocator holds from the driver: live tensors plus its cache (what nvidia-smi shows, less the context). */
  reservedBytes: number;
  /** The highest allocatedBytes since the process started (in a memoryWindow(): since the window opened). */
  peakAllocatedBytes: number;
  /** The highest reservedBytes since the process started (in a memoryWindow(): since the window opened). */
  peakReservedBytes: number;
}

/** One window of time's memory (memoryWindow()): the window since the previous call, in bytes. */
export interface MemoryWindow {
  /** Resident bytes now. */
  residentBytes: number;
  /** The most resident bytes during the window: sampled every millisecond, exact for a window that raised the process's peak. */
  peakResidentBytes: number;
  /** The process's peak resident bytes since it started (VmHWM, what GNU time and wait4 report). */
  processPeakResidentBytes: number;
  /** Per visible CUDA device; its peaks are the window's (the allocator's peak figures are reset at every call). */
  cudaMemory: CudaDeviceMemory[];
}

export interface MatmulResult {
  data: Float32Array;
  shape: number[];
}

/** The training kernels (native/losses/loss_binding.h): free functions over a model, or a model and its head. */
export interface NativeLosses {
  score(model: NativeModel, batch: CompletionBatchInput & { entropy?: boolean; tokenLogprobs?: boolean }): Promise<NativeScores>;
  /** Per-row Σ_t k3 of KL(policy ‖ reference) over the completion tokens. */
  klK3(policy: NativeModel, reference: NativeModel, batch: CompletionBatchInput): Promise<Float32Array>;
  /** Accumulates ∇ scale · Σ_k −A_k · log π(completion_k). */
  policyGradientBackward(model: NativeModel, batch: CompletionBatchInput & { advantages: Float32Array; scale?: number }): Promise<NativeScores & { loss: number }>;
  /** A clipped-ratio objective (native/losses/objective.h) over given per-token log-probs, and its gradient wrt them. */
  objectiveLoss(inputs: ObjectiveTokenInput & { logprobs: Float32Array; rowLengths: Int32Array; advantages: Float32Array; entropies?: Float32Array }): Promise<
    ObjectiveMetrics & { loss: number; gradLogprobs: Float32Array; gradEntropies?: Float32Array }
  >;
  /** Accumulates ∇ scale · (objective + router aux) from one scoring forward; tokenLogprobs are the trainer's. */
  objectiveBackward(
    model: NativeModel,
    batch: CompletionBatchInput & ObjectiveTokenInput & { advantages: Float32Array; scale?: number },
  ): Promise<NativeScores & ObjectiveMetrics & { loss: number; tokenLogprobs: Float32Array; routerAuxLoss?: number }>;
  causalLMLossBackward(model: NativeModel, batch: TokenBatchInput & { backward?: boolean }): Promise<{ loss: number }>;
  /** MSE (or, with oldValues and clipRange, PPO-clipped) value loss; accumulates scale · ∇loss. loss is unscaled. */
  valueLossBackward(
    model: NativeModel,
    head: NativeValueHead,
    batch: CompletionBatchInput & ValueLossInput & { scale?: number; backward?: boolean },
  ): Promise<{ loss: number; values: Float32Array }>;
  /** Policy-gradient loss + valueLossCoef · value loss from one forward, one backward (scale weights the gradient only). */
  actorCriticBackward(
    model: NativeModel,
    head: NativeValueHead,
    batch: CompletionBatchInput & ValueLossInput & { advantages: Float32Array; valueLossCoef: number; scale?: number },
  ): Promise<NativeScores & { policyLoss: number; valueLoss: number; loss: number; values: Float32Array }>;
  /** mean −log σ(s[chosen_i] − s[rejected_i]) over the pairs (row indices into the batch). */
  bradleyTerryBackward(
    model: NativeModel,
    head: NativeValueHead,
    batch: TokenBatchInput & { chosen: Int32Array; rejected: Int32Array; backward?: boolean },
  ): Promise<{ loss: number; scores: Float32Array }>;
}

/** A scoring forward's graph, kept for one backward (native/losses/held_score_binding.h); opaque to JS. */
export interface HeldGraph {
  readonly heldGraph: unique symbol;
}

/** Scoring with the forward's graph kept for one backward whose row weights are known only after the scores. */
export interface NativeHeldScores {
  /**
   * score()'s sums and means from a forward with gradients, its graph kept in `graph` with keep (the default).
   * Without keep nothing is held, and policyGradientBackward's own forward of the batch is this one again, to the bit.
   */
  scoreForBackward(model: NativeModel, batch: CompletionBatchInput, options: { keep?: boolean }): Promise<{ sum: Float32Array; mean: Float32Array; graph?: HeldGraph }>;
  /** policyGradientBackward's gradient from the kept forward, which it frees: a graph takes one backward. */
  heldPolicyGradientBackward(model: NativeModel, graph: HeldGraph, options: { advantages: Float32Array; scale?: number }): Promise<{ loss: number; routerAuxLoss?: number }>;
  /** Frees a kept graph whose backward will not run; a graph a backward used has nothing left to free. */
  releaseHeldScores(model: NativeModel, graph: HeldGraph): Promise<void>;
}

/** What a head reads off its model, without gradients (native/heads/readout_binding.h). */
export interface NativeReadouts {
  /** [rows] for "v" / "q", [Σ (prompt + completion) lengths] for "positions". */
  values(model: NativeModel, head: NativeValueHead, batch: CompletionBatchInput & { readout: Readout }): Promise<Float32Array>;
  /** The head on each row's last real token (the last 1 of attentionMask; left or right padding). */
  rewardScores(model: NativeModel, head: NativeValueHead, batch: TokenBatchInput): Promise<Float32Array>;
}

export interface NativeAddon extends NativeLosses, NativeHeldScores, NativeReadouts {
  runtimeInfo(): RuntimeInfo;
  numerics(): NumericsInfo;
  /** A GGUF file's metadata and tensor table, validated against the file. */
  readGguf(path: string): GgufContents;
  /** One tensor of a GGUF file dequantized to float32, as stored (no permutation). */
  ggufTensor(path: string, name: string): { shape: number[]; values: Float32Array };
  setNumThreads(n: number): void;
  /** Closes the memory window open since the previous call (the first: since the addon loaded) and opens the next. */
  memoryWindow(): MemoryWindow;
  /** Rows per block of the LM head when scoring tokens (0: as many as keep a block's logits near 64 MiB). */
  setLogitsBlockRows(rows: number): void;
  /** Rows per LM-head block a scoring call on device makes with freeBytes free there (default: its free memory now). */
  logitsBlockRows(vocab: number, device: string, freeBytes?: number): number;
  /** Gives freed tensors' memory back to the system: the CPU cache's blocks and malloc's free pages. */
  releaseFreedCpuMemory(): void;
  /**
   * Runs a CPU module's calls, and those of optimizers whose first module it is, on agent lane `lane` ("cpu#lane",
   * one intra-op thread) beside the other lanes; null returns them to the device's lane.
   */
  setComputeLane(module: NativeModel | NativeValueHead, lane: number | null): void;
  /** Where a module's calls run: "cpu", "cuda:N" or an agent lane "cpu#k". */
  computeLane(module: NativeModel | NativeValueHead): string;
  /** Agent lanes with jobs in flight (queued or running) now, and the most at once since the last call. */
  agentLaneJobs(): { busy: number; peak: number };
  matmul(a: Float32Array, aShape: number[], b: Float32Array, bShape: number[]): MatmulResult;
  matmulAsync(a: Float32Array, aShape: number[], b: Float32Array, bShape: number[], repeat?: number): Promise<MatmulResult>;
  measureMatmul(options: { n: number; dtype: string; device: string; iterations?: number }): Promise<{ seconds: number; gflops: number }>;
  measureCopy(options: { bytes: number; device: string; iterations?: number }): Promise<{ seconds: number; gbps: number; readGbps: number }>;
  NativeModel: NativeModelStatic;
  NativeOptimizer: NativeOptimizerConstructor;
  NativeValueHead: NativeValueHeadConstructor;
  NativeProcessGroup: NativeProcessGroupStatic;
}

/** Ragged rows of token ids: all rows concatenated, with each row's length. */
export interface RaggedIds {
  tokens: Int32Array;
  lengths: Int32Array;
}

export interface CompletionBatchInput {
  prompts: Int32Array;
  promptLengths: Int32Array;
  completions: Int32Array;
  completionLengths: Int32Array;
}

/** The objective's settings, TRL's defaults where absent (native/losses/objective.h). */
export interface NativeObjectiveOptions {
  lossType: "grpo" | "dapo" | "dr_grpo" | "bnpo" | "cispo" | "sapo";
  importanceSamplingLevel?: "token" | "sequence";
  epsilon?: number;
  epsilonHigh?: number;
  delta?: number | null;
  /** Weight of the per-token KL to the reference in the loss; refLogprobs are needed when ≠ 0. */
  beta?: number;
  klEstimator?: "k1" | "k2" | "k3";
  /** TRL's use_bias_correction_kl (default true): the KL term times the importance weight. */
  klBiasCorrection?: boolean;
  entropyCoef?: number;
  sapoTemperaturePos?: number;
  sapoTemperatureNeg?: number;
  /** dr_grpo divides by rows × this. */
  maxCompletionLength?: number;
  /** dapo and cispo divide by this token count (default: the unmasked tokens given). */
  tokenNormalizer?: number;
}

/** Per-token inputs beside the log-probs, one value per completion token (rows concatenated). */
export interface ObjectiveTokenInput {
  objective: NativeObjectiveOptions;
  /** The rollout's log-probs; absent: the current ones, detached (every ratio 1). */
  oldLogprobs?: Float32Array;
  refLogprobs?: Float32Array;
  /** 0/1 per token; absent: all 1. */
  tokenMask?: Float32Array;
}

export interface ObjectiveMetrics {
  /** The loss before the entropy term. */
  policyLoss: number;
  /** NaN when the loss has no KL term. */
  klMean: number;
  /** NaN without entropies. */
  entropyMean: number;
  clipLow: number;
  clipHigh: number;
  ratioMean: number;
}

export interface NativeScores {
  sum: Float32Array;
  mean: Float32Array;
  entropy?: Float32Array;
  tokenLogprobs?: Float32Array;
}

export interface NativeGeneration {
  /** [rows, width], rows of one prompt adjacent; padding after each row's end. */
  tokens: Int32Array;
  lengths: Int32Array;
  width: number;
  logprobs?: Float32Array;
  processedLogprobs?: Float32Array;
  scores?: Float32Array;
}

/** A loaded model's size, placement and kernels, as CausalLM.info() reports them. */
export interface NativeModelInfo {
  /** Number of parameters. */
  parameterCount: number;
  /** Bytes the parameters take. */
  parameterBytes: number;
  /** Bytes the model's gradient buffers take. */
  gradientBytes: number;
  /**
   * How many blocks of memory hold the parameters: 1 for a model loaded or created on the CPU (one block the kernel
   * may back with 2 MiB pages, so decoding's weight stream takes few TLB misses); one per parameter elsewhere.
   */
  parameterBlocks: number;
  /** The device the model lives on ("cpu", "cuda:0"). */
  device: string;
  /** The parameters' in-memory dtype. */
  dtype: string;
  /** The attention kernel on this device: libtorch's scaled_dot_product_attention or ours. */
  attention: "sdpa" | "eager";
  /**
   * The kernel each kind of forward runs: "eager" (ours) or the one libtorch's SDPA picks ("flash_attention",
   * "efficient_attention", "cudnn_attention", "math"). training: right-padded rows, no cache, layers without a
   * window; masked: left-padded prefills, shared-prompt scoring, windowed layers; decode: one query against a cache.
   */
  attentionKernels: {
    /** The kernel of training forwards. */
    training: string;
    /** The kernel of masked forwards. */
    masked: string;
    /** The kernel of cached decoding. */
    decode: string;
  };
  /** Whether layer activations are recomputed in the backward to save memory. */
  gradientCheckpointing: boolean;
  /** Training mode: the config's dropout acts in the forwards of the losses (setTraining). */
  training: boolean;
  /** Whether the model is frozen: no gradients are kept for it. */
  frozen: boolean;
}

export interface NativeModel {
  forward(options: {
    ids: Int32Array;
    batch: number;
    length: number;
    attentionMask?: Int32Array;
    positionIds?: Int32Array;
    logits?: boolean;
    hiddenStates?: boolean;
  }): Promise<{ logits?: Float32Array; shape?: number[]; hiddenStates?: Float32Array[] }>;
  generate(options: {
    prompts: Int32Array;
    promptLengths: Int32Array;
    maxNewTokens: number;
    numReturnSequences?: number;
    doSample?: boolean;
    temperature?: number;
    topP?: number;
    topK?: number;
    /** Hugging Face's repetition_penalty (> 0; 1: off). */
    repetitionPenalty?: number;
    eosTokenIds: Int32Array;
    padTokenId: number;
    returnLogprobs?: boolean;
    returnScores?: boolean;
    /** Sampling stream (default "default"); one never seeded is an error. */
    stream?: string;
  }): Promise<NativeGeneration>;
  /** Drops its gradients on its lane, behind the work queued there. */
  zeroGrad(): Promise<void>;
  parameterNames(): Array<{ name: string; shape: number[] }>;
  getParameter(name: string): Float32Array;
  getGradient(name: string): Float32Array | null;
  save(options: { dir: string; dtype?: string; maxShardBytes?: number }): Promise<{ files: string[]; weightMap: Record<string, string>; totalBytes: number }>;
  /** Replaces the weights in place from safetensors files (checkpoint resume). */
  loadWeights(files: string[]): Promise<void>;
  clone(options?: { device?: string; dtype?: string; seed?: number }): Promise<NativeModel>;
  freeze(): void;
  setGradientCheckpointing(enabled: boolean): void;
  /** Training mode on or off; dropout draws from the "dropout" stream. */
  setTraining(enabled: boolean): void;
  /** Seeds a sampling stream (default "default"), creating it if new. */
  setSeed(seed: number, stream?: string): void;
  /** A stream never seeded is an error naming it. */
  getGeneratorState(stream?: string): Uint8Array;
  /** Restores a stream's state (creating the stream if new, as a checkpoint resume does). */
  setGeneratorState(state: Uint8Array, stream?: string): void;
  info(): NativeModelInfo;
  dispose(): void;
}

export interface NativeModelStatic {
  load(options: { config: object; files: string[]; gguf?: { file: string; tensors: GgufTensorSource[] }; dtype: string; device: string; seed?: number }): Promise<NativeModel>;
  create(options: { config: object; dtype: string; device: string; seed?: number; initStd?: number }): NativeModel;
}

/** AdamW hyperparameters of an optimizer; unset ones take PyTorch's defaults. */
export interface AdamWOptions {
  /** Learning rate. */
  lr: number;
  /** Decay rates of the first and second moments (default [0.9, 0.999]). */
  betas?: [number, number];
  /** Added to the second moment's square root for stability (default 1e-8). */
  eps?: number;
  /** Decoupled weight decay (default 0.01). */
  weightDecay?: number;
  /**
   * Keep AdamW's moments in float32 for bf16 parameters (their updates still round to bf16). Off (the default):
   * moments in the parameter's dtype, pure-bf16 AdamW as CoMLRL runs it with bf16 parameters, where the second
   * moment cannot decay by 0.1% a step and small updates round away.
   */
  fp32Moments?: boolean;
  /**
   * Keep a float32 master copy of every bf16 parameter (with float32 moments): AdamW steps the master and the
   * parameter becomes its rounding, so updates under half a bf16 ulp accumulate instead of rounding away. The masters
   * save and load with the optimizer's state.
   */
  masterWeights?: boolean;
}

/** What an optimizer's parameters and state hold, in bytes (NativeOptimizer.memory). */
export interface OptimizerMemory {
  /** Trained parameters (elements). */
  parameters: number;
  /** The parameters' weights. */
  weightBytes: number;
  /** float32 master weights held now (bf16-mixed). */
  masterBytes: number;
  /** AdamW's moments held now (created at a parameter's first step). */
  momentBytes: number;
  /** What one backward's gradients take, each in its parameter's dtype (a step in backward never holds them all). */
  gradientBytes: number;
}

/** A parameter group: a model or a head (frozen parameters skipped), with its own lr / weight decay if given. */
export interface OptimizerGroup {
  /** The native module whose parameters the group steps. */
  module: NativeModel | NativeValueHead;
  /** The group's learning rate (default: the optimizer's). */
  lr?: number;
  /** The group's weight decay (default: the optimizer's). */
  weightDecay?: number;
}

export interface NativeOptimizer {
  /**
   * gradNorm: the total norm over all groups before clipping. CPU fp32 parameters step in the addon's fused loops,
   * anything else through libtorch's clip_grad_norm_ and AdamW::step(); libtorch: true takes libtorch's path for every
   * step (the tests compare the two; they agree to float rounding).
   */
  step(options?: { maxGradNorm?: number; libtorch?: boolean }): Promise<{ gradNorm: number }>;
  /**
   * true arms the next step to be taken inside the following backward, each parameter as its gradient is
   * accumulated (its gradient then dropped), step() finishing it; false disarms without stepping.
   */
  stepInBackward(on: boolean): Promise<void>;
  /** Every group when group is omitted. */
  setLearningRate(lr: number, group?: number): void;
  learningRates(): number[];
  save(path: string): Promise<void>;
  /** Refuses, naming the file, a state whose group count or parameter shapes differ from this optimizer's. */
  load(path: string): Promise<void>;
  /** Forgets every parameter's moments and step count (a new optimizer over the same groups). */
  reset(): Promise<void>;
  /** The dtype of each moment held (exp_avg and exp_avg_sq of every parameter with state; order unspecified). */
  momentDtypes(): string[];
  /** The bytes the trained parameters and their optimizer state hold. */
  memory(): OptimizerMemory;
  /** The share of bf16 weights a step of their group's learning rate cannot move (w ± lr rounds back to w). */
  stalledFraction(): Promise<number>;
  dispose(): void;
}

export interface NativeOptimizerConstructor {
  /** AdamW with PyTorch's defaults (betas 0.9/0.999, eps 1e-8, weight decay 0.01); all modules on one device. */
  new (groups: OptimizerGroup[], options: AdamWOptions): NativeOptimizer;
  new (module: NativeModel | NativeValueHead, options: AdamWOptions): NativeOptimizer;
}

/** Where values are read: "v" the last prompt token, "q" the last completion token, "positions" every token. */
export type Readout = "v" | "q" | "positions";

/** A padded [batch, length] block of token ids with its attention mask. */
export interface TokenBatchInput {
  /** Token ids, row-major. */
  ids: Int32Array;
  /** Rows. */
  batch: number;
  /** Columns. */
  length: number;
  /** 1 for real tokens, 0 for padding (all real when absent). */
  attentionMask?: Int32Array;
}

/** The native value loss's inputs (ValueHead.valueLossBackward builds them). */
export interface ValueLossInput {
  /** Where the values are read. */
  readout: Readout;
  /** One per readout value. */
  targets: Float32Array;
  /** With clipRange: the clipped loss mean max((y − V)², (y − V_clip)²), V_clip = V_old + clamp(V − V_old, ±clipRange). */
  oldValues?: Float32Array;
  /** PPO value clipping around oldValues. */
  clipRange?: number;
}


/** A value head's shape, size, device and state. */
export interface NativeValueHeadInfo {
  /** Width of the backbone's hidden state it reads. */
  hiddenSize: number;
  /** null for the linear head. */
  hiddenDim: number | null;
  /** Its parameters. */
  parameterCount: number;
  /** Its device. */
  device: string;
  /** Its dtype. */
  dtype: string;
  /** Whether its gradients are off. */
  frozen: boolean;
}

/** A value head held by the native core (ValueHead wraps it). */
export interface NativeValueHead {
  /** PyTorch state_dict names: weight, bias (linear) or 0.weight, 0.bias, 2.weight, 2.bias (MLP). */
  parameterNames(): Array<{
    /** The parameter's name (CoMLRL's ValueHead keys). */
    name: string;
    /** Its shape. */
    shape: number[];
  }>;
  /** A parameter's values as fp32. */
  getParameter(name: string): Float32Array;
  /** A parameter's accumulated gradient, or null when it has none. */
  getGradient(name: string): Float32Array | null;
  /** Drops its gradients on its lane, behind the work queued there. */
  zeroGrad(): Promise<void>;
  /** Turns its gradients off. */
  freeze(): void;
  /** Its parameters as a state dict. */
  stateDict(): Record<string, StateTensor>;
  /** Every name and shape must match (the error names the parameter and both shapes); dtypes are converted. */
  loadStateDict(dict: Record<string, StateTensor>): void;
  /** Its shape and state. */
  info(): NativeValueHeadInfo;
  /** Frees it now. */
  dispose(): void;
}

export interface NativeValueHeadConstructor {
  /** Linear(H, 1) when hiddenDim is null/0, else Linear(H, d) → Tanh → Linear(d, 1); weights N(0, 0.02), biases 0. */
  new (options: { hiddenSize: number; hiddenDim?: number | null; dtype: string; device: string; seed?: number }): NativeValueHead;
}

/** Bytes a collective moved from this rank and how long it took. */
export interface CollectiveTraffic {
  /** Bytes this rank sent. */
  bytes: number;
  /** Seconds the collective took. */
  seconds: number;
}

/** A c10d process group (Gloo over a TCPStore rendezvous); every call is a collective all ranks make in the same order. */
export interface NativeProcessGroup {
  /** This process's rank. */
  rank(): number;
  /** Ranks in the group. */
  worldSize(): number;
  /** Gradients become Σ w_r·g_r / Σ w_r over the ranks; values are summed as given. */
  allReduceGradients(
    modules: Array<NativeModel | NativeValueHead>,
    options: { weight: number; values?: Float64Array; bucketBytes?: number },
  ): Promise<CollectiveTraffic & {
    /** Σ of the ranks' weights. */
    totalWeight: number;
    /** The values summed over the ranks. */
    values: Float64Array;
  }>;
  /** Every parameter and buffer takes root's values. */
  broadcastParameters(modules: Array<NativeModel | NativeValueHead>, root?: number): Promise<CollectiveTraffic>;
  /** Combines a vector of float64 values over the ranks. */
  allReduce(values: Float64Array, op: "sum" | "mean" | "max" | "min"): Promise<Float64Array>;
  /** Rank root's bytes, on every rank. */
  broadcast(bytes: Uint8Array, root?: number): Promise<Uint8Array>;
  /** Every rank's bytes, in rank order. */
  allGather(bytes: Uint8Array): Promise<Uint8Array[]>;
  /** Waits for every rank. */
  barrier(): Promise<void>;
  /** Leaves the group. */
  dispose(): void;
}

export interface NativeProcessGroupStatic {
  /** With ncclDevice (a CUDA device index), gradients and parameters on that GPU are reduced there by NCCL. */
  create(options: {
    rank: number;
    worldSize: number;
    masterAddr: string;
    masterPort: number;
    timeoutMs: number;
    interface?: string;
    ncclDevice?: number;
  }): Promise<NativeProcessGroup>;
  /** Whether this build has Gloo process groups (libtorch's Gloo headers were found). */
  glooAvailable(): boolean;
  /** Whether this build has NCCL (a CUDA libtorch with nccl.h at build time). */
  ncclAvailable(): boolean;
}
