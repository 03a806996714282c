// What starting the ranks of a job on this machine needs, for `comlrl launch`, the data-parallel bench and the test
// runner alike: a free rendezvous port on loopback, and each rank's share of the cores; and the intra-op thread count
// COMLRL_NUM_THREADS asks for, checked: libtorch takes any count, and thousands of threads make every op crawl.
import { createServer } from "node:net";
import { availableParallelism } from "node:os";

/** A TCP port on 127.0.0.1 that nothing listens on now. */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

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

/** Each rank's intra-op threads: COMLRL_NUM_THREADS when set, else the cores shared equally (at least one). */
export function threadsPerRank(nproc: number, env: NodeJS.ProcessEnv = process.env, cores = availableParallelism()): string {
  return `${numThreadsFromEnvironment(Math.max(1, Math.floor(cores / nproc)), env, cores)}`;
}
