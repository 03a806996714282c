// The hand-written typed surface of the native addon. Every function here exists in native/; nothing else does.

export interface RuntimeInfo {
  torchVersion: string;
  cudaCompiled: boolean;
  cudaAvailable: boolean;
  cudaDeviceCount: number;
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

export interface NativeAddon {
  runtimeInfo(): RuntimeInfo;
  setNumThreads(n: number): void;
  matmul(a: Float32Array, aShape: number[], b: Float32Array, bShape: number[]): MatmulResult;
  matmulAsync(a: Float32Array, aShape: number[], b: Float32Array, bShape: number[], repeat?: number): Promise<MatmulResult>;
  measureMatmul(options: { n: number; dtype: string; device: string; iterations?: number }): Promise<{ seconds: number; gflops: number }>;
  measureCopy(options: { bytes: number; device: string; iterations?: number }): Promise<{ seconds: number; gbps: number; readGbps: number }>;
  NativeModel: NativeModelStatic;
  NativeOptimizer: NativeOptimizerConstructor;
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
    eosTokenIds: Int32Array;
    padTokenId: number;
    returnLogprobs?: boolean;
    returnScores?: boolean;
  }): Promise<NativeGeneration>;
  score(options: CompletionBatchInput & { entropy?: boolean; tokenLogprobs?: boolean }): Promise<NativeScores>;
  klK3(reference: NativeModel, batch: CompletionBatchInput): Promise<Float32Array>;
  policyGradientBackward(options: CompletionBatchInput & { advantages: Float32Array; scale?: number }): Promise<NativeScores & { loss: number }>;
  causalLMLossBackward(options: { ids: Int32Array; batch: number; length: number; attentionMask?: Int32Array; backward?: boolean }): Promise<{ loss: number }>;
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
  setSeed(seed: number): void;
  getGeneratorState(): Uint8Array;
  setGeneratorState(state: Uint8Array): void;
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

export interface NativeOptimizer {
  step(options?: { maxGradNorm?: number }): Promise<{ gradNorm: number }>;
  setLearningRate(lr: number): void;
  save(path: string): Promise<void>;
  load(path: string): Promise<void>;
  dispose(): void;
}

export interface NativeOptimizerConstructor {
  new (model: NativeModel, options: AdamWOptions): NativeOptimizer;
}
