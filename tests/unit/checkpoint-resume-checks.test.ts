// A resume must continue the run its checkpoint was taken from, exactly, or refuse by name: under another config
// (numGenerations, seed, learning rate, maxNewTokens, temperature), from a trainer_state.json whose counters are not
// whole non-negative numbers, or from a damaged generator state. Checkpoints past the resumed one belong to another
// timeline: they are set aside, so keepLast and "latest" see only this run's.
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { readCheckpointMetadata, resolveCheckpoint } from "../../src/checkpoint/checkpoint.js";
import { writeManifest } from "../../src/checkpoint/manifest.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { makeBase, makeTrainer } from "../support/checkpoint-run.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-resume-checks-"));
const base = path.join(scratch, "base");
const checkpoints = path.join(scratch, "first", "checkpoints");
let tokenizer: ComlrlTokenizer;

beforeAll(async () => {
  tokenizer = await makeBase(base);
  const first = await makeTrainer(base, tokenizer, path.join(scratch, "first"), 3);
  try {
    await first.train({ checkpointDir: checkpoints });
  } finally {
    await first.close();
  }
}, 120_000);

/** Resumes a 2-epoch run from `from`; the error message, or null when it trained. */
async function resume(name: string, from: string, config: Record<string, unknown> = {}, allowConfigChanges?: string[]): Promise<string | null> {
  const trainer = await makeTrainer(base, tokenizer, path.join(scratch, name), 2, { config: config });
  try {
    await trainer.train({ resumeFromCheckpoint: from, ...(allowConfigChanges && { allowConfigChanges }) });
    return null;
  } catch (error) {
    return (error as Error).message;
  } finally {
    await trainer.close();
  }
}

/** A resealed copy of checkpoint-1 (its manifest rewritten), damaged by `damage`. */
async function damaged(name: string, damage: (dir: string) => void): Promise<string> {
  const dir = path.join(scratch, `damaged-${name}`);
  cpSync(path.join(checkpoints, "checkpoint-1"), dir, { recursive: true });
  damage(dir);
  await writeManifest(dir);
  return dir;
}

function editState(dir: string, edit: (state: Record<string, unknown>) => void): void {
  const file = path.join(dir, "trainer_state.json");
  const state = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  edit(state);
  writeFileSync(file, JSON.stringify(state));
}

describe("resume under another config", () => {
  it("is refused naming each changed field with both values", async () => {
    const message = await resume("changed", path.join(checkpoints, "checkpoint-1"), { numGenerations: 8, seed: 4, agentLearningRate: 1e-3, maxNewTokens: 5, temperature: 0.7 });
    expect(message).toContain(`${path.join(checkpoints, "checkpoint-1")} was trained under another config: `);
    for (const field of ["agentLearningRate (checkpoint 0.002, now 0.001)", "maxNewTokens (checkpoint 4, now 5)", "numGenerations (checkpoint 4, now 8)", "seed (checkpoint 3, now 4)", "temperature (checkpoint 1, now 0.7)"]) {
      expect(message).toContain(field);
    }
  }, 60_000);

  it("goes on when the changed fields are allowed explicitly; the epoch count may always change", async () => {
    expect(await resume("allowed", path.join(checkpoints, "checkpoint-1"), { numGenerations: 8, seed: 4 }, ["numGenerations", "seed"])).toBeNull();
  }, 60_000);
});

describe("trainer_state.json values on resume", () => {
  const stateFile = (dir: string) => path.join(dir, "trainer_state.json");

  it.each([
    ["epoch -1", (s: Record<string, unknown>) => ((s.progress as Record<string, unknown>).epoch = -1), "progress.epoch is -1, expected a whole number ≥ 0"],
    ["epoch 1.5", (s: Record<string, unknown>) => ((s.progress as Record<string, unknown>).epoch = 1.5), "progress.epoch is 1.5, expected a whole number ≥ 0"],
    ["progress null", (s: Record<string, unknown>) => (s.progress = null), "progress is null, expected an object of counters"],
    ["random 2^40", (s: Record<string, unknown>) => ((s.state as Record<string, unknown>).random = 2 ** 40), "state.random is 1099511627776, expected the sampler's state"],
  ])("%s is refused, naming the file and field", async (name, edit, expected) => {
    const dir = await damaged(name.replace(/\W/g, "-"), (d) => editState(d, edit));
    const message = await resume(`state-${name.replace(/\W/g, "-")}`, dir);
    expect(message).toContain(`${stateFile(dir)}: ${expected}`);
  }, 60_000);

  it("a damaged generator state is refused, naming the file", async () => {
    const dir = await damaged("generator", (d) => writeFileSync(path.join(d, "agent_0", "generator.bin"), Buffer.alloc(64, 7)));
    const message = await resume("generator", dir);
    expect(message).toContain(`${path.join(dir, "agent_0", "generator.bin")}: not a sampling generator's state`);
  }, 60_000);
});

describe("checkpoints of another timeline", () => {
  it("resuming an earlier checkpoint with keepLast 1 keeps this run's newest and sets the later ones aside", async () => {
    const root = path.join(scratch, "timelines");
    cpSync(checkpoints, root, { recursive: true });
    const trainer = await makeTrainer(base, tokenizer, path.join(scratch, "timelines-run"), 2);
    try {
      await trainer.train({ checkpointDir: root, resumeFromCheckpoint: path.join(root, "checkpoint-1"), keepLast: 1 });
    } finally {
      await trainer.close();
    }
    const latest = await resolveCheckpoint("latest", root);
    expect(latest).toBe(path.join(root, "checkpoint-2"));
    expect(readCheckpointMetadata(latest).progress.epoch).toBe(2);
    const aside = readdirSync(root).filter((name) => name.startsWith("superseded-"));
    expect(aside).toHaveLength(1);
    expect(readdirSync(path.join(root, aside[0])).sort()).toEqual(["checkpoint-2", "checkpoint-3"]);
    expect(existsSync(path.join(root, "checkpoint-1"))).toBe(false);
  }, 60_000);
});
