// COMLRL_NUM_THREADS: a whole number of threads in [1, 4 per core], or an error naming the variable before the
// addon loads ("abc" once became 0 threads, and 2000 made every op crawl).
import { spawnSync } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { threadsPerRank } from "../../src/distributed/local-ranks.js";
import { MAX_THREADS_PER_CORE, numThreadsFromEnvironment } from "../../src/native/threads.js";

const cli = path.join(import.meta.dirname, "..", "..", "src", "cli", "main.ts");

describe("COMLRL_NUM_THREADS", () => {
  it("is a whole number of threads up to 4 per core; unset or empty takes the fallback", () => {
    expect(numThreadsFromEnvironment(2, {}, 2)).toBe(2);
    expect(numThreadsFromEnvironment(2, { COMLRL_NUM_THREADS: "" }, 2)).toBe(2);
    expect(numThreadsFromEnvironment(2, { COMLRL_NUM_THREADS: " 3 " }, 2)).toBe(3);
    expect(numThreadsFromEnvironment(2, { COMLRL_NUM_THREADS: `${2 * MAX_THREADS_PER_CORE}` }, 2)).toBe(2 * MAX_THREADS_PER_CORE);
    for (const raw of ["abc", "0", "-1", "1.5", "2e3", "2000", `${2 * MAX_THREADS_PER_CORE + 1}`]) {
      expect(() => numThreadsFromEnvironment(2, { COMLRL_NUM_THREADS: raw }, 2), raw).toThrow(
        `COMLRL_NUM_THREADS must be a whole number of threads in [1, ${2 * MAX_THREADS_PER_CORE}] (${MAX_THREADS_PER_CORE} per core on this machine's 2 cores), got ${JSON.stringify(raw)}`,
      );
    }
    expect(() => threadsPerRank(2, { COMLRL_NUM_THREADS: "abc" }, 16)).toThrow(/COMLRL_NUM_THREADS must be/);
  });

  it("a bad value stops comlrl info and comlrl launch at once, naming the variable", () => {
    for (const command of [["info"], ["launch", "--nproc", "1", "x.mjs"]]) {
      const started = Date.now();
      const run = spawnSync(process.execPath, ["--import", "tsx", cli, ...command], { encoding: "utf8", env: { ...process.env, COMLRL_NUM_THREADS: "2000" }, timeout: 60_000 });
      expect(run.status, command.join(" ")).not.toBe(0);
      expect(run.stderr).toMatch(/COMLRL_NUM_THREADS must be a whole number of threads in \[1, \d+\].*got "2000"/);
      expect(Date.now() - started).toBeLessThan(20_000);
    }
  });
});
