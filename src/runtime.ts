// Process-wide runtime facts and settings.
import { addon } from "./native/loader.js";
import type { NumericsInfo, RuntimeInfo } from "./native/binding.js";

export type { NumericsInfo, RuntimeInfo };

/** libtorch version, CUDA availability and device count, intra-op threads and the BLAS in use. */
export function runtimeInfo(): RuntimeInfo {
  return addon().runtimeInfo();
}

/** Whether TF32 and deterministic algorithms are on: opted into with COMLRL_TF32=1 and COMLRL_DETERMINISTIC=1 (docs/gpu.md). */
export function numerics(): NumericsInfo {
  return addon().numerics();
}

/** Sets libtorch's intra-op thread count (defaults to the machine's cores, or COMLRL_NUM_THREADS). */
export function setNumThreads(n: number): void {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`setNumThreads: n must be a positive integer, got ${n}`);
  addon().setNumThreads(n);
}

/**
 * CPU agent-lane jobs running now, and the most that ran at once since the last call: whether agents on lanes of
 * their own really overlap.
 */
export function agentLaneJobs(): { running: number; peak: number } {
  return addon().agentLaneJobs();
}
