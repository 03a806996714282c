import { defineConfig } from "vitest/config";

// Each test process loads libtorch (~0.4 s, ~200 MB): few forked workers, long timeouts for real training runs.
export default defineConfig({
  test: {
    include: ["tests/**/*.test.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
