import { defineConfig } from "vitest/config";
import { threadsPerRank } from "./src/distributed/local-ranks.js";

// Each test process loads libtorch (~0.4 s, ~200 MB): few forked workers, long timeouts for real training runs.
const maxWorkers = 2;
// The workers share the cores (as `comlrl launch` shares them between ranks): two OpenMP teams of two threads on two
// cores stall each other at every parallel region (a MADPO run took over 300 s beside another test, 33 s alone).
const threadsPerWorker = threadsPerRank(maxWorkers);

export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts"],
    pool: "forks",
    maxWorkers,
    testTimeout: 120_000,
    hookTimeout: 120_000,
    env: { COMLRL_NUM_THREADS: threadsPerWorker },
  },
});
