// Process-wide runtime facts and settings.
import { addon } from "./native/loader.js";
import type { CudaDeviceMemory, MemoryWindow, NumericsInfo, RuntimeInfo } from "./native/binding.js";

export type { CudaDeviceMemory, MemoryWindow, NumericsInfo, RuntimeInfo };

/** libtorch version, CUDA availability and device count, intra-op threads and the BLAS in use. */
export function runtimeInfo(): RuntimeInfo {
  return addon().runtimeInfo();
}

/** Whether TF32 and deterministic algorithms are on: opted into with COMLRL_TF32=1 and COMLRL_DETERMINISTIC=1 (docs/gpu.md). */
export function numerics(): NumericsInfo {
  return addon().numerics();
}

/**
 * What TF32 would buy, when a CUDA device is present and TF32 was not asked for; null otherwise. TF32 stays opt-in
 * (float32 results then carry a 10-bit mantissa through matmuls, which changes them at ~1e-3), so float32 training on
 * a GPU is told once what it leaves: tensor cores run TF32 matmuls at about 8× the float32 rate (A100 156 vs 19.5
 * TFLOP/s, H100/H200 SXM 495 vs 67, dense).
 */
export function tf32Hint(facts: Pick<NumericsInfo, "tf32Requested">, cudaDeviceCount: number): string | null {
  if (facts.tf32Requested || cudaDeviceCount === 0) return null;
  return (
    "TF32 is off: float32 matmuls on this GPU run without tensor cores, at about 1/8 of the TF32 rate (A100 19.5 vs " +
    "156 TFLOP/s, H100/H200 67 vs 495). COMLRL_TF32=1 turns it on (results change at ~1e-3); bf16 models with " +
    'precision "bf16-mixed" run at about twice TF32\'s rate (docs/gpu.md)'
  );
}

/** Sets libtorch's intra-op thread count (defaults to the machine's cores, or COMLRL_NUM_THREADS). */
export function setNumThreads(n: number): void {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`setNumThreads: n must be a positive integer, got ${n}`);
  addon().setNumThreads(n);
}

/**
 * CPU agent lanes with jobs in flight (queued or running) now, and the most at once since the last call: whether a
 * trainer issues its agents' work side by side. Counted from when a job is queued, so a loaded machine's scheduling
 * cannot hide an overlap the trainer made.
 */
export function agentLaneJobs(): { busy: number; peak: number } {
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
 * default) sizes blocks per device (logitsBlockRows), so scoring's memory does not grow with rows × vocabulary.
 */
export function setLogitsBlockRows(rows: number): void {
  if (!Number.isInteger(rows) || rows < 0) throw new RangeError(`setLogitsBlockRows: rows must be 0 (automatic) or a positive integer, got ${rows}`);
  addon().setLogitsBlockRows(rows);
}

/**
 * Rows per LM-head block when scoring a vocabulary of `vocab` on `device` (setLogitsBlockRows' setting when one is
 * made): float32 logits of 64 MiB on a CPU; on a GPU a sixteenth of `freeBytes` (default: what the device has free
 * now, the caching allocator's unused blocks included), between 64 MiB and 2 GiB, so that a block re-reads the LM
 * head rarely enough for the matmuls to dominate.
 */
export function logitsBlockRows(vocab: number, device: string, freeBytes?: number): number {
  if (!Number.isInteger(vocab) || vocab < 1) throw new RangeError(`logitsBlockRows: vocab must be a positive integer, got ${vocab}`);
  if (freeBytes !== undefined && !(Number.isSafeInteger(freeBytes) && freeBytes >= 0)) throw new RangeError(`logitsBlockRows: freeBytes must be a non-negative integer, got ${freeBytes}`);
  return addon().logitsBlockRows(vocab, device, freeBytes);
}

/**
 * Gives the memory of freed CPU tensors back to the system: the addon's cache of freed blocks and malloc's free pages.
 * Trainer.close() calls it, so that the next trainer in the process starts without the closed one's blocks.
 */
export function releaseFreedCpuMemory(): void {
  addon().releaseFreedCpuMemory();
}
