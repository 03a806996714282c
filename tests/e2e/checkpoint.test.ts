// Checkpoints and exact resume: an interrupted run — in process, or SIGKILLed mid-epoch — resumed from its last
// checkpoint ends with the same weights and metric stream as an uninterrupted one; a crash while writing leaves the
// previous checkpoint usable; corrupt or incompatible checkpoints are refused by name.
import { execFileSync, spawn } from "node:child_process";
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { readCheckpointMetadata } from "../../src/checkpoint/checkpoint.js";
import { verifyManifest } from "../../src/checkpoint/manifest.js";
import { readJsonlMetrics, readRunMetrics } from "../../src/logging/jsonl.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import type { RewardContext, RewardFunction } from "../../src/rollout/types.js";
import { coverVowelsDataset, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { makeBase, makeTrainer, TRAINER_KINDS } from "../support/checkpoint-run.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-ckpt-"));
const base = path.join(scratch, "base");
const runner = path.join(__dirname, "..", "support", "checkpoint-run.ts");
let tokenizer: ComlrlTokenizer;

/** A metric stream without measurements (wall-clock times, "memory" records), one string per record. */
const withoutTimes = (records: Array<Record<string, unknown>>) => records.filter((r) => r.kind !== "memory").map(({ time: _time, ...rest }) => JSON.stringify(rest));
const stream = (...dirs: string[]) => dirs.flatMap((dir) => withoutTimes(readJsonlMetrics(path.join(dir, "metrics.jsonl"))));
const resumeDir = (outputDir: string) => path.join(outputDir, readdirSync(outputDir).find((f) => f.startsWith("resume-"))!);
const sameBits = (a: Float32Array[], b: Float32Array[]) => {
  expect(a.length).toBe(b.length);
  a.forEach((w, i) => expect(Buffer.from(w.buffer).equals(Buffer.from(b[i].buffer)), `tensor ${i}`).toBe(true));
};

beforeAll(async () => {
  tokenizer = await makeBase(base);
}, 120_000);

describe.each(Object.keys(TRAINER_KINDS))("exact resume: %s", (kind) => {
  let reference: { weights: Float32Array[]; metrics: string[] };

  beforeAll(async () => {
    const out = path.join(scratch, `${kind}-uninterrupted`);
    const trainer = await makeTrainer(base, tokenizer, out, 3, {}, kind);
    await trainer.train({ checkpointDir: path.join(out, "checkpoints") });
    reference = { weights: trainer.weights(), metrics: stream(out) };
    await trainer.close();
  }, 120_000);

  it("in process: 1 epoch, then resume to 3, gives bit-identical weights and the same metric stream", async () => {
    const out = path.join(scratch, `${kind}-interrupted`);
    const checkpoints = path.join(out, "checkpoints");
    const first = await makeTrainer(base, tokenizer, out, 1, {}, kind);
    await first.train({ checkpointDir: checkpoints });
    await first.close();
    expect(readCheckpointMetadata(path.join(checkpoints, "checkpoint-1"))).toMatchObject({ kind: first.algorithm, progress: { epoch: 1, envStep: 6 * 4 }, wandb: null });

    // The first run's last checkpoint: checkpoint-1 for one-stage trainers, later for staged ones (pairs, reward model).
    const second = await makeTrainer(base, tokenizer, out, 3, {}, kind);
    await second.train({ checkpointDir: checkpoints, resumeFromCheckpoint: "latest" });
    expect(second.progress.epoch).toBe(3);
    sameBits(second.weights(), reference.weights);
    await second.close();
    expect(stream(out, resumeDir(out))).toEqual(reference.metrics);
    expect(withoutTimes(readRunMetrics(out))).toEqual(reference.metrics);
  });

  it("after a SIGKILL mid-epoch, resuming from the latest checkpoint reproduces the run: weights and metric stream", async () => {
    const out = path.join(scratch, `${kind}-killed`);
    const checkpoints = path.join(out, "checkpoints");
    const child = spawn(process.execPath, ["--import", "tsx", runner, base, out, checkpoints, "3", "40", kind], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code, signal) => resolve(signal ? -1 : code)));
    // Wait for checkpoint-1 to be complete, then a little into epoch 2, and kill.
    const deadline = Date.now() + 90_000;
    while (!existsSync(path.join(checkpoints, "checkpoint-1", "manifest.json"))) {
      if (Date.now() > deadline) throw new Error(`child never wrote checkpoint-1: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    // Kill once the run has written records past checkpoint-1 (polled, not a fixed sleep: on a loaded machine 300 ms
    // could pass with nothing written, and the test then failed for want of a mid-epoch kill).
    const atCheckpoint = stream(out).length;
    while (stream(out).length <= atCheckpoint) {
      if (Date.now() > deadline) throw new Error(`child wrote nothing after checkpoint-1: ${stderr}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill("SIGKILL");
    expect(await exited).toBe(-1);
    expect(existsSync(path.join(checkpoints, "checkpoint-3"))).toBe(false);
    // The killed run wrote records after its checkpoint was complete; the resumed run redoes that work.
    expect(stream(out).length).toBeGreaterThan(atCheckpoint);

    const resumed = await makeTrainer(base, tokenizer, out, 3, {}, kind);
    await resumed.train({ checkpointDir: checkpoints, resumeFromCheckpoint: "latest" });
    sameBits(resumed.weights(), reference.weights);
    await resumed.close();
    expect(withoutTimes(readRunMetrics(out))).toEqual(reference.metrics);
  }, 180_000);
});

describe("crash safety and bad checkpoints", () => {
  it("a write that fails part-way leaves the previous checkpoint intact and no partial directory", async () => {
    const out = path.join(scratch, "failing-write");
    const checkpoints = path.join(out, "checkpoints");
    const trainer = await makeTrainer(base, tokenizer, out, 1, { stateful: [{ stateDict: () => ({}), loadStateDict: () => {} }] });
    await trainer.train({ checkpointDir: checkpoints });
    // A stateful object whose stateDict throws stands in for a full disk during the next save (the resume before it
    // must succeed, so the first run had one stateful object too).
    const broken = await makeTrainer(base, tokenizer, out, 2, { stateful: [{ stateDict: () => { throw new Error("ENOSPC: no space left on device"); }, loadStateDict: () => {} }] });
    await expect(broken.train({ checkpointDir: checkpoints, resumeFromCheckpoint: "latest" })).rejects.toThrow(/ENOSPC: no space left on device/);
    await broken.close();
    await trainer.close();
    expect(readdirSync(checkpoints)).toEqual(["checkpoint-1"]);
    await verifyManifest(path.join(checkpoints, "checkpoint-1"));
  });

  it("a full disk while writing optimizer.pt is a JS error naming the file; the temp dir goes, the previous checkpoint stays", async () => {
    const out = path.join(scratch, "disk-full");
    // Size a tmpfs to hold checkpoint-1 and the next checkpoint only up to the middle of agent_0/optimizer.pt.
    const sized = path.join(scratch, "disk-full-sizing");
    const probe = await makeTrainer(base, tokenizer, sized, 1);
    await probe.train({ checkpointDir: path.join(sized, "checkpoints") });
    await probe.close();
    const page = 4096;
    const pages = (file: string) => Math.ceil(statSync(file).size / page) * page;
    const allFiles = (dir: string): string[] => readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? allFiles(path.join(dir, e.name)) : [path.join(dir, e.name)]));
    const first = path.join(sized, "checkpoints", "checkpoint-1");
    const whole = allFiles(first).reduce((sum, f) => sum + pages(f), 0);
    const agent0 = path.join(first, "agent_0");
    const beforeOptimizer = readdirSync(agent0).filter((f) => f !== "optimizer.pt").reduce((sum, f) => sum + pages(path.join(agent0, f)), 0);
    const budget = whole + beforeOptimizer + Math.floor(pages(path.join(agent0, "optimizer.pt")) / 2 / page) * page + 8 * page;
    const checkpoints = path.join(scratch, "disk-full-tmpfs");
    mkdirSync(checkpoints);
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${budget}`, "tmpfs", checkpoints]);
    try {
      const trainer = await makeTrainer(base, tokenizer, out, 2);
      const error = await trainer.train({ checkpointDir: checkpoints }).then(() => null, (e: Error) => e);
      await trainer.close();
      expect(error?.message).toMatch(/agent_0\/optimizer\.pt.*No space left on device/);
      expect(readdirSync(checkpoints)).toEqual(["checkpoint-1"]);
      await verifyManifest(path.join(checkpoints, "checkpoint-1"));
    } finally {
      execFileSync("umount", [checkpoints]);
    }
  });

  it("SIGKILL at any moment, during checkpoint writes too, leaves only complete checkpoints under final names", async () => {
    // Kills land at staggered times across a run that checkpoints every epoch; whatever was being written, every
    // visible checkpoint-* verifies, "latest" resumes, and the next save clears the dead writer's hidden leftovers.
    // Each child starts a fresh run, which sets the previous child's checkpoints aside: the kill is timed from the
    // first checkpoint this child completed, not from one the previous child left.
    const out = path.join(scratch, "kill-anytime");
    const checkpoints = path.join(out, "checkpoints");
    const firstManifest = path.join(checkpoints, "checkpoint-1", "manifest.json");
    const writtenSince = (startMs: number) => {
      try {
        return statSync(firstManifest).mtimeMs >= startMs;
      } catch {
        return false;
      }
    };
    for (const afterMs of [150, 400, 650, 900]) {
      const startMs = Date.now() - 1;
      const child = spawn(process.execPath, ["--import", "tsx", runner, base, out, checkpoints, "40", "0"], { stdio: "ignore" });
      const exited = new Promise((resolve) => child.on("exit", resolve));
      const deadline = Date.now() + 90_000;
      while (!writtenSince(startMs) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(writtenSince(startMs), `child ${afterMs}: no checkpoint-1 within 90 s`).toBe(true);
      await new Promise((r) => setTimeout(r, afterMs));
      child.kill("SIGKILL");
      await exited;
      for (const name of readdirSync(checkpoints).filter((n) => n.startsWith("checkpoint-"))) await verifyManifest(path.join(checkpoints, name));
    }
    const latest = Math.max(...readdirSync(checkpoints).filter((n) => n.startsWith("checkpoint-")).map((n) => Number(n.split("-")[1])));
    expect(latest).toBeGreaterThanOrEqual(1);
    const resumed = await makeTrainer(base, tokenizer, out, latest + 1);
    await resumed.train({ checkpointDir: checkpoints, resumeFromCheckpoint: "latest" });
    await resumed.close();
    expect(resumed.progress.epoch).toBe(latest + 1);
    expect(readdirSync(checkpoints).filter((n) => n.startsWith("."))).toEqual([]);
  }, 240_000);

  it("checkpointInterval 2 writes every second unit and the last, keepLast 2 prunes the older ones, and a Stateful gets back the state it saved", async () => {
    const out = path.join(scratch, "interval");
    const checkpoints = path.join(out, "checkpoints");
    let saves = 0;
    const counter = { stateDict: () => ({ saves: ++saves }), loadStateDict: () => {} };
    const trainer = await makeTrainer(base, tokenizer, out, 5, { stateful: [counter] });
    await trainer.train({ checkpointDir: checkpoints, checkpointInterval: 2, keepLast: 2 });
    await trainer.close();
    // Written after units 2, 4 and 5 (the last); checkpoint-2 pruned once checkpoint-5 was complete.
    expect(saves).toBe(3);
    expect(readdirSync(checkpoints).sort()).toEqual(["checkpoint-4", "checkpoint-5"]);
    const restored: unknown[] = [];
    const resumed = await makeTrainer(base, tokenizer, path.join(scratch, "interval-resumed"), 5, { stateful: [{ stateDict: () => ({ saves: -1 }), loadStateDict: (state) => restored.push(state) }] });
    await resumed.train({ resumeFromCheckpoint: path.join(checkpoints, "checkpoint-4") });
    await resumed.close();
    expect(restored).toEqual([{ saves: 2 }]);
  });

  it("stateful datasets and callbacks given as options are checkpointed by name without being listed, as CoMLRL finds them", async () => {
    const out = path.join(scratch, "detected");
    const checkpoints = path.join(out, "checkpoints");
    /** A dataset and a reward function that count how often they were used, and report it as their state. */
    const task = (restored: Record<string, unknown>) => {
      const dataset = Object.assign(coverVowelsDataset(6), { epochs: 0, stateDict: () => ({ epochs: ++dataset.epochs }), loadStateDict: (state: unknown) => (restored.trainDataset = state) });
      let calls = 0;
      const rewardFunc = Object.assign((completions: string[][], ctx: RewardContext) => (calls++, coverVowelsRewardFunc(completions, ctx)), {
        stateDict: () => ({ calls }),
        loadStateDict: (state: unknown) => (restored.rewardFunc = state),
      });
      return { trainDataset: dataset, rewardFunc: rewardFunc as RewardFunction };
    };
    const trainer = await makeTrainer(base, tokenizer, out, 2, task({}));
    await trainer.train({ checkpointDir: checkpoints });
    await trainer.close();

    const restored: Record<string, unknown> = {};
    const resumed = await makeTrainer(base, tokenizer, path.join(scratch, "detected-resumed"), 2, task(restored));
    await resumed.train({ resumeFromCheckpoint: path.join(checkpoints, "checkpoint-1") });
    await resumed.close();
    // 6 items × 1 node each in the first epoch.
    expect(restored).toEqual({ trainDataset: { epochs: 1 }, rewardFunc: { calls: 6 } });

    const plain = await makeTrainer(base, tokenizer, path.join(scratch, "detected-plain"), 2);
    await expect(plain.train({ resumeFromCheckpoint: path.join(checkpoints, "checkpoint-1") })).rejects.toThrow(
      /the checkpoint holds state for trainDataset, rewardFunc, which this trainer was not given with a stateDict/,
    );
    await plain.close();
    const halfStateful = await makeTrainer(base, tokenizer, path.join(scratch, "detected-half"), 1, { rewardFunc: Object.assign(coverVowelsRewardFunc.bind(null), { stateDict: () => ({}) }) });
    await expect(halfStateful.train({ checkpointDir: path.join(scratch, "detected-half", "checkpoints") })).rejects.toThrow(/rewardFunc provides stateDict but no loadStateDict/);
    await halfStateful.close();
  });

  it("a dataset or callback with Python's state_dict / load_state_dict (as CoMLRL calls them) is checkpointed the same way", async () => {
    const out = path.join(scratch, "detected-python");
    const checkpoints = path.join(out, "checkpoints");
    const dataset = (restored: unknown[]) => {
      let epochs = 0;
      return Object.assign(coverVowelsDataset(6), { state_dict: () => ({ epochs: ++epochs }), load_state_dict: (state: unknown) => void restored.push(state) });
    };
    const trainer = await makeTrainer(base, tokenizer, out, 2, { trainDataset: dataset([]) });
    await trainer.train({ checkpointDir: checkpoints });
    await trainer.close();
    const restored: unknown[] = [];
    const resumed = await makeTrainer(base, tokenizer, path.join(scratch, "detected-python-resumed"), 2, { trainDataset: dataset(restored) });
    await resumed.train({ resumeFromCheckpoint: path.join(checkpoints, "checkpoint-1") });
    await resumed.close();
    expect(restored).toEqual([{ epochs: 1 }]);

    const halfStateful = await makeTrainer(base, tokenizer, path.join(scratch, "detected-python-half"), 1, { rewardFunc: Object.assign(coverVowelsRewardFunc.bind(null), { state_dict: () => ({}) }) });
    await expect(halfStateful.train({ checkpointDir: path.join(scratch, "detected-python-half", "checkpoints") })).rejects.toThrow(/rewardFunc provides state_dict but no load_state_dict/);
    await halfStateful.close();
  });

  it("refuses missing, truncated and corrupted files by name", async () => {
    const out = path.join(scratch, "corrupt");
    const checkpoints = path.join(out, "checkpoints");
    const trainer = await makeTrainer(base, tokenizer, out, 1);
    await trainer.train({ checkpointDir: checkpoints, keepLast: 1 });
    await trainer.close();
    const pristine = path.join(checkpoints, "checkpoint-1");
    /** A fresh copy of the checkpoint, damaged by `damage`, and the error resuming from it gives. */
    const resumeFromDamaged = async (name: string, damage: (dir: string) => void) => {
      const dir = path.join(scratch, `damaged-${name}`);
      cpSync(pristine, dir, { recursive: true });
      damage(dir);
      const t = await makeTrainer(base, tokenizer, path.join(scratch, `resume-${name}`), 2);
      try {
        await t.train({ resumeFromCheckpoint: dir });
        return null;
      } catch (error) {
        return (error as Error).message;
      } finally {
        await t.close();
      }
    };
    expect(await resumeFromDamaged("grown", (dir) => appendFileSync(path.join(dir, "agent_0", "optimizer.pt"), "x"))).toMatch(
      /agent_0\/optimizer\.pt has \d+ bytes, the manifest says \d+ \(truncated or changed\)/,
    );
    expect(await resumeFromDamaged("truncated", (dir) => truncateSync(path.join(dir, "agent_1", "model.safetensors"), 100))).toMatch(
      /agent_1\/model\.safetensors has 100 bytes/,
    );
    expect(
      await resumeFromDamaged("flipped", (dir) => {
        const file = path.join(dir, "agent_1", "model.safetensors");
        const bytes = readFileSync(file);
        bytes[bytes.length - 1] ^= 0xff;
        writeFileSync(file, bytes);
      }),
    ).toMatch(/agent_1\/model\.safetensors does not match its checksum/);
    expect(await resumeFromDamaged("missing", (dir) => rmSync(path.join(dir, "agent_0", "generator.bin")))).toMatch(/agent_0\/generator\.bin is missing/);
    expect(await resumeFromDamaged("no-manifest", (dir) => rmSync(path.join(dir, "manifest.json")))).toMatch(/not a complete checkpoint: manifest\.json is missing/);
    expect(await resumeFromDamaged("intact", () => {})).toBeNull();
  });

  it("refuses a checkpoint from a different agent count", async () => {
    const out = path.join(scratch, "compat");
    const checkpoints = path.join(out, "checkpoints");
    const trainer = await makeTrainer(base, tokenizer, out, 1);
    await trainer.train({ checkpointDir: checkpoints });
    await trainer.close();
    const single = await makeTrainer(base, tokenizer, path.join(scratch, "compat-single"), 2, { agents: [base], config: { numAgents: 1 }, formatters: null });
    await expect(single.train({ resumeFromCheckpoint: path.join(checkpoints, "checkpoint-1") })).rejects.toThrow(/holds components \[agent_0, agent_1\], this trainer has \[agent_0\]/);
    await single.close();
  });
});
