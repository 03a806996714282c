// What starting the ranks of a job on this machine needs, for `comlrl launch`, the data-parallel bench and the test
// runner alike: a free rendezvous port on loopback, and each rank's share of the cores.
import { createServer } from "node:net";
import { availableParallelism } from "node:os";
import { numThreadsFromEnvironment } from "../native/threads.js";

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

/** Each rank's intra-op threads: COMLRL_NUM_THREADS when set, else the cores shared equally (at least one). */
export function threadsPerRank(nproc: number, env: NodeJS.ProcessEnv = process.env, cores = availableParallelism()): string {
  return `${numThreadsFromEnvironment(Math.max(1, Math.floor(cores / nproc)), env, cores)}`;
}
