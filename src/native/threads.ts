// The intra-op thread count the addon starts with: COMLRL_NUM_THREADS, checked (libtorch takes any count, and
// thousands of threads make every op crawl).
import { availableParallelism } from "node:os";

/** A COMLRL_NUM_THREADS that is not a whole number of threads in range; the message names the variable. */
export class NumThreadsError extends RangeError {
  /** Always "NumThreadsError". */
  override name = "NumThreadsError";
}

/** The most intra-op threads per core COMLRL_NUM_THREADS may ask for. */
export const MAX_THREADS_PER_CORE = 4;

/** COMLRL_NUM_THREADS as a thread count in [1, MAX_THREADS_PER_CORE × cores]; `fallback` when it is unset or empty. */
export function numThreadsFromEnvironment(fallback: number, env: NodeJS.ProcessEnv = process.env, cores = availableParallelism()): number {
  const raw = env.COMLRL_NUM_THREADS;
  if (raw === undefined || raw.trim() === "") return fallback;
  const most = MAX_THREADS_PER_CORE * cores;
  const value = /^\s*\d+\s*$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(Number.isSafeInteger(value) && value >= 1 && value <= most)) {
    throw new NumThreadsError(`COMLRL_NUM_THREADS must be a whole number of threads in [1, ${most}] (${MAX_THREADS_PER_CORE} per core on this machine's ${cores} cores), got ${JSON.stringify(raw)}`);
  }
  return value;
}
