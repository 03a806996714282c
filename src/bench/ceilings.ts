// The ceilings every other figure is read against, measured in the same run on the same machine: the matmul rate
// (GFLOP/s of an n×n×n product) per dtype, and the memory bandwidth of a large copy (GB/s, read + write) and of
// reading alone (the decode roofline: decoding streams weights it does not write).
import { addon } from "../native/loader.js";
import { TORCH_DTYPE, type CopyCeilingCase, type MatmulCeilingCase, type WorkerOutput } from "./types.js";

/** Sizes tried, smallest first. */
const MATMUL_SIZES = [256, 512, 1024, 2048, 4096, 8192];
/** Big enough that the probe's rate is not dominated by call overhead, small enough to be cheap in any dtype. */
const PROBE_SIZE = 512;

/**
 * A matmul's rate grows with n until the BLAS kernels saturate, so the ceiling is the largest n whose product still
 * fits the case's time per iteration (estimated from a probe at a small n, which underestimates the rate, so the
 * real iteration is shorter than the estimate; the smallest size when even that does not fit). That keeps slow dtypes (bf16 without hardware support runs at a few
 * GFLOP/s) from taking minutes, and lets a GPU go to sizes that keep it busy.
 */
export async function measureMatmulCeiling(spec: MatmulCeilingCase, device: string): Promise<WorkerOutput> {
  const dtype = TORCH_DTYPE[spec.dtype];
  const probe = await addon().measureMatmul({ n: PROBE_SIZE, dtype, device, iterations: 3 });
  const flopsPerSecond = probe.gflops * 1e9;
  const iterationSeconds = (n: number) => (2 * n ** 3) / flopsPerSecond;
  const n = MATMUL_SIZES.filter((size) => iterationSeconds(size) <= spec.iterationSeconds).at(-1) ?? MATMUL_SIZES[0];
  const iterations = Math.min(50, Math.max(3, Math.ceil(spec.repeatSeconds / iterationSeconds(n))));
  const gflops: number[] = [];
  for (let r = 0; r < spec.repeats; r++) gflops.push((await addon().measureMatmul({ n, dtype, device, iterations })).gflops);
  return { samples: { gflops }, details: { n, iterations } };
}

export async function measureCopyCeiling(spec: CopyCeilingCase, device: string): Promise<WorkerOutput> {
  const samples: Record<"gbps" | "readGbps", number[]> = { gbps: [], readGbps: [] };
  for (let r = 0; r < spec.repeats; r++) {
    const measured = await addon().measureCopy({ bytes: spec.bytes, device, iterations: spec.iterations });
    samples.gbps.push(measured.gbps);
    samples.readGbps.push(measured.readGbps);
  }
  return { samples, details: { bytes: spec.bytes } };
}
