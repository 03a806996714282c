// Training checkpoints (REQUIREMENTS "Saving and continuing"): checkpoint-<n>/ holds every registered component of
// the trainer (models in Hugging Face layout, optimizer and sampling-stream states; frozen modules that can be reloaded
// from their source are not copied), the trainer's own state (progress, RNG, logger, config, stateful
// datasets/callbacks, trainer-specific files) and a manifest of checksums. A checkpoint appears complete or not at
// all: it is built in a hidden temporary directory, fsynced, then renamed.
import { existsSync } from "node:fs";
import { mkdir, readdir, rename, rm } from "node:fs/promises";
import path from "node:path";
import { redactSecrets } from "../config/secrets.js";
import type { WandbRunIdentity } from "../logging/wandb.js";
import type { ComponentRegistry, SavedComponent } from "../components/registry.js";
import { writeDirAtomic, writeFileChecked } from "../util/atomic.js";
import { processAlive } from "../util/run-lock.js";
import { CheckpointError, MANIFEST, readCheckpointJson, verifyManifest, writeManifest } from "./manifest.js";

export { CheckpointError };

const TRAINER_STATE = "trainer_state.json";
const NAME = /^checkpoint-(\d+)$/;

export interface TrainerState {
  kind: string;
  progress: {
    /** Completed epochs. */
    epoch: number;
    /** Items done in the current epoch. */
    itemIndex: number;
    /** Env steps so far. */
    envStep: number;
    /** The trainer's other counters (iteration, stage, update, …). */
    [key: string]: number;
  };
  wandb: WandbRunIdentity | null;
  /** Everything else the trainer restores (RNG, logger, config snapshot, datasets' and callbacks' state dicts). */
  state: Record<string, unknown>;
}

interface SavedTrainerState extends TrainerState {
  format: 2;
  components: SavedComponent[];
}

/** What readCheckpointMetadata reports of a checkpoint directory. */
export interface CheckpointMetadata {
  /** The checkpoint directory. */
  path: string;
  /** The trainer that wrote it ("MAGRPO", …). */
  kind: string;
  /** Where training stood. */
  progress: TrainerState["progress"];
  /** The W&B run it logged to, if any. */
  wandb: WandbRunIdentity | null;
  /** When it was written (ISO time from its manifest). */
  createdAt: string;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** Reads trainer_state.json and checks the shape resume relies on: counters that are whole and not negative. */
function readState(dir: string): SavedTrainerState {
  const file = path.join(dir, TRAINER_STATE);
  if (!existsSync(file)) throw new CheckpointError(`checkpoint file ${file} is missing`);
  const saved = readCheckpointJson(file);
  const invalid = (field: string, value: unknown, expected: string) =>
    new CheckpointError(`${file}: ${field} is ${JSON.stringify(value) ?? String(value)}, expected ${expected} (the file is damaged or was edited)`);
  if (!isObject(saved)) throw invalid("the content", saved, "an object");
  if (typeof saved.kind !== "string") throw invalid("kind", saved.kind, "a trainer name");
  if (!isObject(saved.progress)) throw invalid("progress", saved.progress, "an object of counters");
  for (const counter of ["epoch", "itemIndex", "envStep"]) if (!(counter in saved.progress)) throw invalid(`progress.${counter}`, undefined, "a whole number ≥ 0");
  for (const [counter, value] of Object.entries(saved.progress)) {
    if (!Number.isSafeInteger(value) || (value as number) < 0) throw invalid(`progress.${counter}`, value, "a whole number ≥ 0");
  }
  if (saved.wandb !== null && saved.wandb !== undefined && !isObject(saved.wandb)) throw invalid("wandb", saved.wandb, "an object or null");
  if (saved.state !== undefined && !isObject(saved.state)) throw invalid("state", saved.state, "an object");
  const random = isObject(saved.state) ? saved.state.random : undefined;
  if (random !== undefined && !(Number.isInteger(random) && (random as number) >= 0 && (random as number) < 2 ** 32)) {
    throw invalid("state.random", random, "the sampler's state, a whole number in [0, 2^32)");
  }
  if (saved.components !== undefined && !Array.isArray(saved.components)) throw invalid("components", saved.components, "a list");
  return saved as unknown as SavedTrainerState;
}

/** Removes hidden half-written checkpoints left by processes that died while writing them. */
async function removeStaleTemporaries(root: string): Promise<void> {
  if (!existsSync(root)) return;
  for (const entry of await readdir(root)) {
    const pid = /^\.checkpoint-\d+\.(?:tmp|old)-(\d+)-[0-9a-f]+$/.exec(entry)?.[1];
    if (pid && Number(pid) !== process.pid && !processAlive(Number(pid))) await rm(path.join(root, entry), { recursive: true, force: true });
  }
}

/** Writes root/checkpoint-<n> atomically; `extra` may add trainer-specific files (preference pairs, replay). */
export async function saveCheckpoint(
  root: string,
  n: number,
  components: ComponentRegistry,
  trainer: TrainerState,
  extra?: (dir: string) => Promise<void>,
): Promise<string> {
  const dir = path.join(root, `checkpoint-${n}`);
  await removeStaleTemporaries(root);
  await writeDirAtomic(dir, async (tmp) => {
    // Secrets (the comparator's key, key headers, keys in URLs) never reach the disk; resuming does not read them back.
    const saved: SavedTrainerState = { format: 2, ...trainer, state: redactSecrets(trainer.state), components: await components.saveCheckpoint(tmp) };
    await extra?.(tmp);
    await writeFileChecked(path.join(tmp, TRAINER_STATE), `${JSON.stringify(saved, null, 2)}\n`);
    await writeManifest(tmp);
  });
  return dir;
}

/**
 * Verifies dir's manifest and that it fits this trainer (kind, components with their shapes, sharing and
 * optimizers, and whatever `fits` checks of its state), then loads every component's state. Returns the trainer
 * state to restore.
 */
export async function loadCheckpoint(dir: string, kind: string, components: ComponentRegistry, fits?: (saved: TrainerState) => void): Promise<TrainerState> {
  await verifyManifest(dir);
  const saved = readState(dir);
  if (saved.format !== 2) throw new CheckpointError(`${dir}: checkpoint format ${saved.format} is not readable by this version (format 2)`);
  if (saved.kind !== kind) throw new CheckpointError(`${dir}: it was written by a ${saved.kind} trainer, not ${kind}`);
  const problems = components.incompatibilities(saved.components);
  if (problems.length) throw new CheckpointError(`${dir}: ${problems.join("; ")}`);
  const restored = { kind: saved.kind, progress: saved.progress, wandb: saved.wandb, state: saved.state };
  fits?.(restored);
  await components.loadCheckpoint(dir);
  return restored;
}

/** Progress and W&B identity of a checkpoint, without loading it (merge `wandb` into wandbConfig to resume a run). */
export function readCheckpointMetadata(dir: string): CheckpointMetadata {
  const saved = readState(dir);
  const manifestFile = path.join(dir, MANIFEST);
  const createdAt = existsSync(manifestFile) ? String((readCheckpointJson(manifestFile) as { createdAt?: unknown }).createdAt ?? "") : "";
  return { path: dir, kind: saved.kind, progress: saved.progress, wandb: saved.wandb ?? null, createdAt };
}

async function checkpointsIn(root: string): Promise<Array<{ n: number; dir: string }>> {
  if (!existsSync(root)) return [];
  return (await readdir(root, { withFileTypes: true }))
    .flatMap((entry) => {
      const match = entry.isDirectory() ? NAME.exec(entry.name) : null;
      return match ? [{ n: Number(match[1]), dir: path.join(root, entry.name) }] : [];
    })
    .sort((a, b) => b.n - a.n);
}

/** "latest" → the newest complete checkpoint under root; anything else is taken as a checkpoint path. */
export async function resolveCheckpoint(spec: string, root: string | undefined): Promise<string> {
  if (spec !== "latest") {
    if (!existsSync(spec)) throw new CheckpointError(`checkpoint ${spec} does not exist`);
    return spec;
  }
  if (!root) throw new CheckpointError('resumeFromCheckpoint: "latest" needs checkpointDir to look in');
  const complete = (await checkpointsIn(root)).find((c) => existsSync(path.join(c.dir, MANIFEST)));
  if (!complete) throw new CheckpointError(`no complete checkpoint in ${root}`);
  return complete.dir;
}

/**
 * Moves the checkpoints under root numbered past `from` (the completed units a run starts at) into
 * root/superseded-<time>/: they belong to another timeline, and neither "latest" nor keepLast may take them for this
 * run's. Returns where they went, or null when there were none.
 */
export async function setAsideLaterCheckpoints(root: string, from: number): Promise<string | null> {
  const later = (await checkpointsIn(root)).filter((c) => c.n > from);
  if (later.length === 0) return null;
  const aside = path.join(root, `superseded-${new Date().toISOString().replace(/[:.]/g, "-")}`);
  await mkdir(aside);
  for (const c of later) await rename(c.dir, path.join(aside, path.basename(c.dir)));
  return aside;
}

/** Removes all but the newest keepLast checkpoints (called only after a new one is complete). */
export async function pruneCheckpoints(root: string, keepLast: number): Promise<void> {
  if (!Number.isInteger(keepLast) || keepLast < 1) throw new RangeError(`keepLast must be a positive integer, got ${keepLast}`);
  for (const old of (await checkpointsIn(root)).slice(keepLast)) await rm(old.dir, { recursive: true, force: true });
}
