// Two runs on one output directory would interleave their metrics, checkpoints and pruning: train() holds a lock file
// (pid, host, start time) in outputDir while it runs, refuses a directory a live run holds, naming it, and takes over
// a lock whose process is gone. The lock is removed when train() ends, whether it finished or threw.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
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
