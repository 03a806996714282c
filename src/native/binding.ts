// The hand-written typed surface of the native addon. Every function here exists in native/; nothing else does.
import type { StateTensor } from "../io/torch-pickle.js";

export interface RuntimeInfo {
  torchVersion: string;
  cudaCompiled: boolean;
  cudaAvailable: boolean;
  cudaDeviceCount: number;
  /** Bytes in live tensors on cuda:0 (CUDA builds on a machine with a GPU only). */
  cudaAllocatedBytes?: number;
  numThreads: number;
  /** The BLAS libtorch's matmuls run on, as that library describes itself. */
  blas: string;
  blasLibrary: string;
  /** Bytes of freed CPU tensor memory the addon keeps for reuse, and its limit (0: caching off; COMLRL_CPU_CACHE_MB). */
  cpuCacheBytes: number;
  cpuCacheLimitBytes: number;
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

/** What a head reads off its model, without gradients (native/heads/readout_binding.h). */
export interface NativeReadouts {
  /** [rows] for "v" / "q", [Σ (prompt + completion) lengths] for "positions". */
  values(model: NativeModel, head: NativeValueHead, batch: CompletionBatchInput & { readout: Readout }): Promise<Float32Array>;
  /** The head on each row's last real token (the last 1 of attentionMask; left or right padding). */
  rewardScores(model: NativeModel, head: NativeValueHead, batch: TokenBatchInput): Promise<Float32Array>;
}

export interface NativeAddon extends NativeLosses, NativeReadouts {
  runtimeInfo(): RuntimeInfo;
  setNumThreads(n: number): void;
  /**
   * Runs a CPU module's calls, and those of optimizers whose first module it is, on agent lane `lane` ("cpu#lane",
   * one intra-op thread) beside the other lanes; null returns them to the device's lane.
   */
  setComputeLane(module: NativeModel | NativeValueHead, lane: number | null): void;
  /** Where a module's calls run: "cpu", "cuda:N" or an agent lane "cpu#k". */
  computeLane(module: NativeModel | NativeValueHead): string;
  /** Agent-lane jobs running now, and the most that ran at once since the last call. */
  agentLaneJobs(): { running: number; peak: number };
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
  scores?: Float32Array;
}

export interface NativeModelInfo {
  parameterCount: number;
  parameterBytes: number;
  gradientBytes: number;
  device: string;
  dtype: string;
  /** The attention kernel on this device: libtorch's scaled_dot_product_attention or ours. */
  attention: "sdpa" | "eager";
  gradientCheckpointing: boolean;
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
  zeroGrad(): void;
  parameterNames(): Array<{ name: string; shape: number[] }>;
  getParameter(name: string): Float32Array;
  getGradient(name: string): Float32Array | null;
  save(options: { dir: string; dtype?: string; maxShardBytes?: number }): Promise<{ files: string[]; weightMap: Record<string, string>; totalBytes: number }>;
  /** Replaces the weights in place from safetensors files (checkpoint resume). */
  loadWeights(files: string[]): Promise<void>;
  clone(options?: { device?: string; dtype?: string; seed?: number }): Promise<NativeModel>;
  freeze(): void;
  setGradientCheckpointing(enabled: boolean): void;
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
  load(options: { config: object; files: string[]; dtype: string; device: string; seed?: number }): Promise<NativeModel>;
  create(options: { config: object; dtype: string; device: string; seed?: number; initStd?: number }): NativeModel;
}

export interface AdamWOptions {
  lr: number;
  betas?: [number, number];
  eps?: number;
  weightDecay?: number;
}

/** A parameter group: a model or a head (frozen parameters skipped), with its own lr / weight decay if given. */
export interface OptimizerGroup {
  module: NativeModel | NativeValueHead;
  lr?: number;
  weightDecay?: number;
}

export interface NativeOptimizer {
  /**
   * gradNorm: the total norm over all groups before clipping. CPU fp32 parameters step in the addon's fused loops,
   * anything else through libtorch's clip_grad_norm_ and AdamW::step(); libtorch: true takes libtorch's path for every
   * step (the tests compare the two; they agree to float rounding).
   */
  step(options?: { maxGradNorm?: number; libtorch?: boolean }): Promise<{ gradNorm: number }>;
  /** Every group when group is omitted. */
  setLearningRate(lr: number, group?: number): void;
  learningRates(): number[];
  save(path: string): Promise<void>;
  /** Refuses, naming the file, a state whose group count or parameter shapes differ from this optimizer's. */
  load(path: string): Promise<void>;
  /** Forgets every parameter's moments and step count (a new optimizer over the same groups). */
  reset(): Promise<void>;
  dispose(): void;
}

export interface NativeOptimizerConstructor {
  /** AdamW with PyTorch's defaults (betas 0.9/0.999, eps 1e-8, weight decay 0.01); all modules on one device. */
  new (groups: OptimizerGroup[], options: AdamWOptions): NativeOptimizer;
  new (module: NativeModel | NativeValueHead, options: AdamWOptions): NativeOptimizer;
}

export type Readout = "v" | "q" | "positions";

export interface TokenBatchInput {
  ids: Int32Array;
  batch: number;
  length: number;
  attentionMask?: Int32Array;
}

export interface ValueLossInput {
  readout: Readout;
  /** One per readout value. */
  targets: Float32Array;
  /** With clipRange: the clipped loss mean max((y − V)², (y − V_clip)²), V_clip = V_old + clamp(V − V_old, ±clipRange). */
  oldValues?: Float32Array;
  clipRange?: number;
}


export interface NativeValueHeadInfo {
  hiddenSize: number;
  /** null for the linear head. */
  hiddenDim: number | null;
  parameterCount: number;
  device: string;
  dtype: string;
  frozen: boolean;
}

export interface NativeValueHead {
  /** PyTorch state_dict names: weight, bias (linear) or 0.weight, 0.bias, 2.weight, 2.bias (MLP). */
  parameterNames(): Array<{ name: string; shape: number[] }>;
  getParameter(name: string): Float32Array;
  getGradient(name: string): Float32Array | null;
  zeroGrad(): void;
  freeze(): void;
  stateDict(): Record<string, StateTensor>;
  /** Every name and shape must match (the error names the parameter and both shapes); dtypes are converted. */
  loadStateDict(dict: Record<string, StateTensor>): void;
  info(): NativeValueHeadInfo;
  dispose(): void;
}

export interface NativeValueHeadConstructor {
  /** Linear(H, 1) when hiddenDim is null/0, else Linear(H, d) → Tanh → Linear(d, 1); weights N(0, 0.02), biases 0. */
  new (options: { hiddenSize: number; hiddenDim?: number | null; dtype: string; device: string; seed?: number }): NativeValueHead;
}

/** Bytes a collective moved from this rank and how long it took. */
export interface CollectiveTraffic {
  bytes: number;
  seconds: number;
}

/** A c10d process group (Gloo over a TCPStore rendezvous); every call is a collective all ranks make in the same order. */
export interface NativeProcessGroup {
  rank(): number;
  worldSize(): number;
  /** Gradients become Σ w_r·g_r / Σ w_r over the ranks; values are summed as given. */
  allReduceGradients(
    modules: Array<NativeModel | NativeValueHead>,
    options: { weight: number; values?: Float64Array; bucketBytes?: number },
  ): Promise<CollectiveTraffic & { totalWeight: number; values: Float64Array }>;
  /** Every parameter and buffer takes root's values. */
  broadcastParameters(modules: Array<NativeModel | NativeValueHead>, root?: number): Promise<CollectiveTraffic>;
  allReduce(values: Float64Array, op: "sum" | "mean" | "max" | "min"): Promise<Float64Array>;
  broadcast(bytes: Uint8Array, root?: number): Promise<Uint8Array>;
  allGather(bytes: Uint8Array): Promise<Uint8Array[]>;
  barrier(): Promise<void>;
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
