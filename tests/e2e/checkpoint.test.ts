// Checkpoints and exact resume: an interrupted run — in process, or SIGKILLed mid-epoch — resumed from its last
// checkpoint ends with the same weights and metric stream as an uninterrupted one; a crash while writing leaves the
// previous checkpoint usable; corrupt or incompatible checkpoints are refused by name.
import { spawn } from "node:child_process";
import { appendFileSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { readCheckpointMetadata } from "../../src/checkpoint/checkpoint.js";
import { verifyManifest } from "../../src/checkpoint/manifest.js";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import type { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";
import { makeBase, makeTrainer } from "../support/checkpoint-run.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-ckpt-"));
const base = path.join(scratch, "base");
let tokenizer: ComlrlTokenizer;
let reference: { weights: Float32Array[]; metrics: string[] };

const weightsOf = (trainer: MAGRPOTrainer) =>
  trainer.agents.flatMap((a) => a.model.native.parameterNames().map(({ name }) => a.model.native.getParameter(name)));
/** The metric stream without wall-clock times, one string per record. */
const stream = (...dirs: string[]) =>
  dirs.flatMap((dir) => readJsonlMetrics(path.join(dir, "metrics.jsonl")).map(({ time: _time, ...rest }) => JSON.stringify(rest)));
const resumeDir = (outputDir: string) => path.join(outputDir, readdirSync(outputDir).find((f) => f.startsWith("resume-"))!);

beforeAll(async () => {
  tokenizer = await makeBase(base);
  const out = path.join(scratch, "uninterrupted");
  const trainer = await makeTrainer(base, tokenizer, out, 3);
  await trainer.train({ checkpointDir: path.join(out, "checkpoints") });
  reference = { weights: weightsOf(trainer), metrics: stream(out) };
  await trainer.close();
}, 120_000);

describe("exact resume", () => {
  it("in process: 1 epoch, then resume to 3, gives bit-identical weights and the same metric stream", async () => {
    const out = path.join(scratch, "interrupted");
    const checkpoints = path.join(out, "checkpoints");
    const first = await makeTrainer(base, tokenizer, out, 1);
    await first.train({ checkpointDir: checkpoints });
    await first.close();
    expect(readCheckpointMetadata(path.join(checkpoints, "checkpoint-1"))).toMatchObject({ kind: "MAGRPO", progress: { epoch: 1, envStep: 6 * 4 }, wandb: null });

    const second = await makeTrainer(base, tokenizer, out, 3);
    await second.train({ checkpointDir: checkpoints, resumeFromCheckpoint: path.join(checkpoints, "checkpoint-1") });
    expect(second.progress.epoch).toBe(3);
    const weights = weightsOf(second);
    await second.close();
    weights.forEach((w, i) => expect(Buffer.from(w.buffer).equals(Buffer.from(reference.weights[i].buffer)), `tensor ${i}`).toBe(true));
    expect(stream(out, resumeDir(out))).toEqual(reference.metrics);
  });

  it("after a SIGKILL mid-epoch, resuming from the latest checkpoint reproduces the uninterrupted run", async () => {
    const out = path.join(scratch, "killed");
    const checkpoints = path.join(out, "checkpoints");
    const child = spawn(process.execPath, ["--import", "tsx", path.join(__dirname, "..", "support", "checkpoint-run.ts"), base, out, checkpoints, "3", "40"], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code, signal) => resolve(signal ? -1 : code)));
    // Wait for checkpoint-1 to be complete, then a little into epoch 2, and kill.
    const deadline = Date.now() + 90_000;
    while (!existsSync(path.join(checkpoints, "checkpoint-1", "manifest.json"))) {
      if (Date.now() > deadline) throw new Error(`child never wrote checkpoint-1: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 300));
    child.kill("SIGKILL");
    expect(await exited).toBe(-1);
    expect(existsSync(path.join(checkpoints, "checkpoint-3"))).toBe(false);

    const resumed = await makeTrainer(base, tokenizer, out, 3);
    await resumed.train({ checkpointDir: checkpoints, resumeFromCheckpoint: "latest" });
    const weights = weightsOf(resumed);
    await resumed.close();
    weights.forEach((w, i) => expect(Buffer.from(w.buffer).equals(Buffer.from(reference.weights[i].buffer)), `tensor ${i}`).toBe(true));
  }, 180_000);
});

describe("crash safety and bad checkpoints", () => {
  it("a write that fails part-way leaves the previous checkpoint intact and no partial directory", async () => {
    const out = path.join(scratch, "failing-write");
    const checkpoints = path.join(out, "checkpoints");
    const trainer = await makeTrainer(base, tokenizer, out, 1);
    await trainer.train({ checkpointDir: checkpoints });
    // A stateful object whose stateDict throws stands in for a full disk during the next save.
    const broken = await makeTrainer(base, tokenizer, out, 2, { stateful: [{ stateDict: () => { throw new Error("ENOSPC: no space left on device"); }, loadStateDict: () => {} }] });
    await expect(broken.train({ checkpointDir: checkpoints, resumeFromCheckpoint: "latest" })).rejects.toThrow();
    await broken.close();
    await trainer.close();
    expect(readdirSync(checkpoints)).toEqual(["checkpoint-1"]);
    await verifyManifest(path.join(checkpoints, "checkpoint-1"));
  });

  it("SIGKILL at any moment, during checkpoint writes too, leaves only complete checkpoints under final names", async () => {
    // Kills land at staggered times across a run that checkpoints every epoch; whatever was being written, every
    // visible checkpoint-* verifies, "latest" resumes, and the next save clears the dead writer's hidden leftovers.
    const out = path.join(scratch, "kill-anytime");
    const checkpoints = path.join(out, "checkpoints");
    for (const afterMs of [150, 400, 650, 900]) {
      const child = spawn(process.execPath, ["--import", "tsx", path.join(__dirname, "..", "support", "checkpoint-run.ts"), base, out, checkpoints, "40", "0"], { stdio: "ignore" });
      const exited = new Promise((resolve) => child.on("exit", resolve));
      const deadline = Date.now() + 90_000;
      while (!existsSync(path.join(checkpoints, "checkpoint-1", "manifest.json")) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
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
    const single = await makeTrainer(base, tokenizer, path.join(scratch, "compat-single"), 2, { agents: [base], config: { numAgents: 1 } as never, formatters: null });
    await expect(single.train({ resumeFromCheckpoint: path.join(checkpoints, "checkpoint-1") })).rejects.toThrow(/holds components \[agent_0, agent_1\], this trainer has \[agent_0\]/);
    await single.close();
  });
});
