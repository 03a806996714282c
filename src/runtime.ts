// Process-wide runtime facts and settings.
import { addon } from "./native/loader.js";
import type { RuntimeInfo } from "./native/binding.js";

export type { RuntimeInfo };

/** libtorch version, CUDA availability and device count, intra-op threads and the BLAS in use. */
export function runtimeInfo(): RuntimeInfo {
  return addon().runtimeInfo();
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
