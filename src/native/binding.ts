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
  measureCopy(options: { bytes: number; device: string; iterations?: number }): Promise<{ seconds: number; gbps: number }>;
}
