// Training checkpoints (REQUIREMENTS "Saving and continuing"): checkpoint-<n>/ holds every agent in Hugging Face
// layout with its optimizer and sampling-generator state, references that cannot be reloaded from an id, the
// trainer's own state (progress, RNG, logger, config, stateful datasets/callbacks) and a manifest of checksums.
// A checkpoint appears complete or not at all: it is built in a hidden temporary directory, fsynced, then renamed.
import { existsSync, readFileSync } from "node:fs";
import { readdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import type { NativeOptimizer } from "../native/binding.js";
import { decoderConfigOf } from "../models/config.js";
import { weightFiles, type CausalLM } from "../models/causal-lm.js";
import type { ComlrlTokenizer } from "../models/tokenizer.js";
import type { WandbRunIdentity } from "../logging/wandb.js";
import { writeDirAtomic, writeFileAtomic } from "../util/atomic.js";
import { CheckpointError, MANIFEST, verifyManifest, writeManifest } from "./manifest.js";

export { CheckpointError };

const TRAINER_STATE = "trainer_state.json";
const NAME = /^checkpoint-(\d+)$/;

/** What a checkpoint needs of each agent. */
export interface CheckpointAgent {
  model: CausalLM;
  tokenizer: ComlrlTokenizer;
  optimizer: NativeOptimizer;
  reference: CausalLM | null;
  /** The id/dir the reference was loaded from (reloaded on resume), or null when it is a copy saved with the checkpoint. */
  referenceSource: string | null;
}

export interface TrainerState {
  kind: string;
  progress: { epoch: number; itemIndex: number; envStep: number; [key: string]: number };
  wandb: WandbRunIdentity | null;
  /** Everything else the trainer restores (RNG, logger, config snapshot, datasets' and callbacks' state dicts). */
  state: Record<string, unknown>;
}

interface SavedTrainerState extends TrainerState {
  format: 1;
  agents: Array<{ architecture: Record<string, unknown>; vocabSize: number; referenceSource: string | null; sharedWith: number | null }>;
}

export interface CheckpointMetadata {
  path: string;
  kind: string;
  progress: TrainerState["progress"];
  wandb: WandbRunIdentity | null;
  createdAt: string;
}

function readState(dir: string): SavedTrainerState {
  const file = path.join(dir, TRAINER_STATE);
  if (!existsSync(file)) throw new CheckpointError(`checkpoint file ${file} is missing`);
  try {
    return JSON.parse(readFileSync(file, "utf8")) as SavedTrainerState;
  } catch (error) {
    throw new CheckpointError(`${file}: malformed JSON (${(error as Error).message})`);
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Removes hidden half-written checkpoints left by processes that died while writing them. */
async function removeStaleTemporaries(root: string): Promise<void> {
  if (!existsSync(root)) return;
  for (const entry of await readdir(root)) {
    const pid = /^\.checkpoint-\d+\.(?:tmp|old)-(\d+)-[0-9a-f]+$/.exec(entry)?.[1];
    if (pid && Number(pid) !== process.pid && !processAlive(Number(pid))) await rm(path.join(root, entry), { recursive: true, force: true });
  }
}

/** Writes root/checkpoint-<n> atomically; `extra` may add trainer-specific files (value heads, replay data). */
export async function saveCheckpoint(
  root: string,
  n: number,
  agents: CheckpointAgent[],
  trainer: TrainerState,
  extra?: (dir: string) => Promise<void>,
): Promise<string> {
  const dir = path.join(root, `checkpoint-${n}`);
  await removeStaleTemporaries(root);
  await writeDirAtomic(dir, async (tmp) => {
    const saved: SavedTrainerState = { format: 1, ...trainer, agents: [] };
    for (const [i, agent] of agents.entries()) {
      const agentDir = path.join(tmp, `agent_${i}`);
      await agent.model.save(agentDir, { tokenizer: agent.tokenizer });
      await agent.optimizer.save(path.join(agentDir, "optimizer.pt"));
      await writeFile(path.join(agentDir, "generator.bin"), agent.model.native.getGeneratorState());
      if (agent.reference && agent.referenceSource === null) await agent.reference.save(path.join(tmp, `reference_${i}`));
      const shared = agents.findIndex((other) => other.model === agent.model);
      saved.agents.push({
        architecture: { ...decoderConfigOf(agent.model.config) },
        vocabSize: agent.tokenizer.vocabSize,
        referenceSource: agent.referenceSource,
        sharedWith: shared < i ? shared : null,
      });
    }
    await extra?.(tmp);
    await writeFileAtomic(path.join(tmp, TRAINER_STATE), `${JSON.stringify(saved, null, 2)}\n`);
    await writeManifest(tmp);
  });
  return dir;
}

/**
 * Verifies dir's manifest and that it fits these agents (count, architectures, vocabularies, trainer kind), then
 * loads weights, optimizer and generator states into them. Returns the trainer state to restore.
 */
export async function loadCheckpoint(dir: string, kind: string, agents: CheckpointAgent[]): Promise<TrainerState> {
  await verifyManifest(dir);
  const saved = readState(dir);
  const fail = (message: string): never => {
    throw new CheckpointError(`${dir}: ${message}`);
  };
  if (saved.kind !== kind) fail(`it was written by a ${saved.kind} trainer, not ${kind}`);
  if (saved.agents.length !== agents.length) fail(`it holds ${saved.agents.length} agents, this trainer has ${agents.length}`);
  agents.forEach((agent, i) => {
    const architecture = JSON.stringify({ ...decoderConfigOf(agent.model.config) });
    if (JSON.stringify(saved.agents[i].architecture) !== architecture) {
      fail(`agent ${i}'s architecture differs: checkpoint ${JSON.stringify(saved.agents[i].architecture)}, trainer ${architecture}`);
    }
    if (saved.agents[i].vocabSize !== agent.tokenizer.vocabSize) {
      fail(`agent ${i}'s tokenizer has ${agent.tokenizer.vocabSize} tokens, the checkpoint's ${saved.agents[i].vocabSize}`);
    }
    if (Boolean(agent.reference) !== (saved.agents[i].referenceSource !== null || existsSync(path.join(dir, `reference_${i}`)))) {
      fail(`agent ${i}: reference KL is ${agent.reference ? "on" : "off"} here but ${agent.reference ? "off" : "on"} in the checkpoint`);
    }
  });
  for (const [i, agent] of agents.entries()) {
    const agentDir = path.join(dir, `agent_${i}`);
    await agent.model.native.loadWeights(weightFiles(agentDir));
    await agent.optimizer.load(path.join(agentDir, "optimizer.pt"));
    agent.model.native.setGeneratorState(new Uint8Array(readFileSync(path.join(agentDir, "generator.bin"))));
    const referenceDir = path.join(dir, `reference_${i}`);
    if (agent.reference && existsSync(referenceDir)) await agent.reference.native.loadWeights(weightFiles(referenceDir));
  }
  return { kind: saved.kind, progress: saved.progress, wandb: saved.wandb, state: saved.state };
}

/** Progress and W&B identity of a checkpoint, without loading it (merge `wandb` into wandbConfig to resume a run). */
export function readCheckpointMetadata(dir: string): CheckpointMetadata {
  const saved = readState(dir);
  const manifestFile = path.join(dir, MANIFEST);
  const createdAt = existsSync(manifestFile) ? (JSON.parse(readFileSync(manifestFile, "utf8")) as { createdAt: string }).createdAt : "";
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

/** Removes all but the newest keepLast checkpoints (called only after a new one is complete). */
export async function pruneCheckpoints(root: string, keepLast: number): Promise<void> {
  for (const old of (await checkpointsIn(root)).slice(keepLast)) await rm(old.dir, { recursive: true, force: true });
}
