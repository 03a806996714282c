// Process-wide runtime facts and settings.
import { addon } from "./native/loader.js";
import type { MemoryWindow, NumericsInfo, RuntimeInfo } from "./native/binding.js";

export type { MemoryWindow, NumericsInfo, RuntimeInfo };

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

/**
 * Closes the memory window open since the previous call and opens the next: resident bytes now and at most during
 * the window, the process's peak, and each CUDA device's allocated and reserved bytes with the window's peaks. Every
 * call resets the CUDA allocator's peak figures (runtimeInfo's peaks are then since the last window).
 */
export function memoryWindow(): MemoryWindow {
  return addon().memoryWindow();
}

/**
 * Rows of tokens whose vocabulary logits the LM head computes at once when scoring (forward and backward): 0 (the
 * default) keeps a block's float32 logits near 64 MiB, so scoring's memory does not grow with rows × vocabulary.
 */
export function setLogitsBlockRows(rows: number): void {
  if (!Number.isInteger(rows) || rows < 0) throw new RangeError(`setLogitsBlockRows: rows must be 0 (automatic) or a positive integer, got ${rows}`);
  addon().setLogitsBlockRows(rows);
}

/**
 * Gives the memory of freed CPU tensors back to the system: the addon's cache of freed blocks and malloc's free pages.
 * Trainer.close() calls it, so that the next trainer in the process starts without the closed one's blocks.
 */
export function releaseFreedCpuMemory(): void {
  addon().releaseFreedCpuMemory();
}
