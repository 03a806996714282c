// Two runs on one output directory would interleave their metrics, checkpoints and pruning: train() holds a lock file
// (pid, host, start time) in outputDir while it runs, refuses a directory a live run holds, naming it, and takes over
// a lock whose process is gone. The lock is removed when train() ends, whether it finished or threw.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { RUN_LOCK } from "../../src/util/run-lock.js";
import { makeBase, makeTrainer } from "../support/checkpoint-run.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-run-lock-"));
const base = path.join(scratch, "base");
let tokenizer: ComlrlTokenizer;
// A live process that is not this one, to hold a lock as another run would.
const holder = spawn("sleep", ["120"], { stdio: "ignore" });

beforeAll(async () => {
  tokenizer = await makeBase(base);
});
afterAll(() => holder.kill());

function lockedBy(dir: string, pid: number, host = hostname()): string {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, RUN_LOCK);
  writeFileSync(file, JSON.stringify({ pid, host, startedAt: "2026-01-01T00:00:00.000Z" }));
  return file;
}

describe("run lock", () => {
  it("train() on an output directory a live run holds is refused, naming the directory and the run", async () => {
    const dir = path.join(scratch, "held");
    const file = lockedBy(dir, holder.pid!);
    const trainer = await makeTrainer(base, tokenizer, dir, 1);
    try {
      await expect(trainer.train()).rejects.toThrow(
        `outputDir ${dir} is in use by another run (pid ${holder.pid} on ${hostname()}, since 2026-01-01T00:00:00.000Z; lock file ${file})`,
      );
    } finally {
      await trainer.close();
    }
    expect(JSON.parse(readFileSync(file, "utf8")).pid).toBe(holder.pid);
  });

  it("a lock left by a process that is gone is taken over, and train() removes its own lock at the end", async () => {
    const dir = path.join(scratch, "stale");
    const file = lockedBy(dir, 2 ** 22 + 12345);
    const trainer = await makeTrainer(base, tokenizer, dir, 1);
    try {
      await trainer.train();
    } finally {
      await trainer.close();
    }
    expect(existsSync(path.join(dir, "metrics.jsonl"))).toBe(true);
    expect(existsSync(file)).toBe(false);
  });

  it("a run that fails keeps its own error when releasing the lock fails too", async () => {
    const dir = path.join(scratch, "failing");
    const trainer = await makeTrainer(base, tokenizer, dir, 1, {
      rewardFunc: () => {
        // The lock file replaced by a directory: the release at the end cannot read it.
        const file = path.join(dir, RUN_LOCK);
        rmSync(file);
        mkdirSync(file);
        throw new Error("the reward service is down");
      },
    });
    try {
      await expect(trainer.train()).rejects.toThrow(/the reward service is down/);
    } finally {
      await trainer.close();
    }
  });

  it("a lock from another host is not guessed at: refused, naming the host", async () => {
    const dir = path.join(scratch, "remote");
    lockedBy(dir, process.pid, "another-host");
    const trainer = await makeTrainer(base, tokenizer, dir, 1);
    try {
      await expect(trainer.train()).rejects.toThrow(/is in use by another run \(pid \d+ on another-host/);
    } finally {
      await trainer.close();
    }
  });
});

// Six processes start on one directory at once, round after round, every other round over a stale lock: no two ever
// hold the lock at the same time, and the others are refused naming the holder. Every child waits for the round's go
// file, so the attempts land within milliseconds (a late one may find the lock released and take it: that is fine).
describe("run lock under concurrent starts", () => {
  const contenders = 6;
  const rounds = 12;

  function contender(dir: string, signals: string): ReturnType<typeof spawn> {
    const body = `import { existsSync, appendFileSync, writeFileSync } from "node:fs";
      import { acquireRunLock } from ${JSON.stringify(path.resolve("src/util/run-lock.ts"))};
      const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
      writeFileSync(${JSON.stringify(signals)} + "/ready-" + process.pid, "");
      for (let round = 0; round < ${rounds}; round++) {
        while (!existsSync(${JSON.stringify(signals)} + "/go-" + round)) sleep(2);
        let outcome;
        try {
          const release = acquireRunLock(${JSON.stringify(dir)}, "outputDir");
          const start = Date.now();
          sleep(400);
          outcome = "held " + start + " " + Date.now();
          release();
        } catch (error) {
          outcome = /is in use by another run/.test(error.message) ? "refused" : "error " + error.message;
        }
        appendFileSync(${JSON.stringify(signals)} + "/round-" + round, outcome + "\\n");
      }`;
    return spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", body], { stdio: ["ignore", "ignore", "inherit"] });
  }

  it("of six simultaneous starts only one holds the lock at a time, also when they all find a stale one", async () => {
    const dir = path.join(scratch, "contended");
    const signals = path.join(scratch, "contended-signals");
    mkdirSync(signals, { recursive: true });
    const children = Array.from({ length: contenders }, () => contender(dir, signals));
    const exits = children.map((c) => new Promise((resolve) => c.on("exit", resolve)));
    const waitFor = async (done: () => boolean) => {
      while (!done()) await new Promise((resolve) => setTimeout(resolve, 20));
    };
    const lines = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : []);
    await waitFor(() => readdirSync(signals).filter((name) => name.startsWith("ready-")).length === contenders);
    const holds: Array<{ round: number; start: number; end: number }> = [];
    for (let round = 0; round < rounds; round++) {
      if (round % 2 === 1) lockedBy(dir, 2 ** 22 + 777);
      writeFileSync(path.join(signals, `go-${round}`), "");
      await waitFor(() => lines(path.join(signals, `round-${round}`)).length === contenders);
      const outcomes = lines(path.join(signals, `round-${round}`));
      expect(outcomes.filter((o) => !o.startsWith("held ") && o !== "refused"), `round ${round}`).toEqual([]);
      const held = outcomes.filter((o) => o.startsWith("held ")).map((o) => o.split(" ").slice(1).map(Number));
      expect(held.length, `round ${round}: ${outcomes.join(", ")}`).toBeGreaterThan(0);
      holds.push(...held.map(([start, end]) => ({ round, start: start!, end: end! })));
    }
    await Promise.all(exits);
    holds.sort((a, b) => a.start - b.start);
    const overlapping = holds.slice(1).filter((hold, i) => hold.start < holds[i]!.end);
    expect(overlapping, "holders whose time overlapped another's").toEqual([]);
    expect(existsSync(path.join(dir, RUN_LOCK))).toBe(false);
  }, 120_000);
});
