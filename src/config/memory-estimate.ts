// What a run will hold in memory, estimated from the models' config.json files and the trainer config before any
// model is loaded: weights, and for trained models (actors, critics, a reward model) their gradients and AdamW's two
// moments; a frozen reference copy when the KL term is on; and for each actor the larger of a rollout's two phases, per row (numGenerations rows of the longest
// prompt seen plus maxNewTokens): generation (the KV cache of every row's prompt and completion, one layer of it
// twice while a step appends to it, and the float32 logits of the completions) and the update (each layer's input kept for the backward, and the completions' float32
// logits). On top comes what the process holds already (Node.js, libtorch, the datasets). Every term is a lower bound
// (the attention and MLP activations and the allocator's slack come on top), so a run refused here could not have
// fit; one let through may still not. The run is refused, naming the fields and numbers, when a device's share is
// over its memory: for "cpu", the machine's RAM or the container's cgroup limit, whichever is smaller. CUDA devices
// are not checked here (runtimeInfo reports no per-GPU capacity yet). LifecycleOptions.memoryLimitBytes replaces
// that figure (Infinity: no check) for users who know better.
import { existsSync, readFileSync, statSync } from "node:fs";
import { freemem, totalmem } from "node:os";
import path from "node:path";
import { cgroupMemoryLimit } from "../util/cgroup-memory.js";
import { ConfigError } from "./fields.js";
import { resolvePrecision, trainingBytes, type Precision } from "./precision.js";
import { ggufModelConfig, isGgufPath, readGguf } from "../models/gguf/read.js";

export class MemoryEstimateError extends ConfigError {
  override name = "MemoryEstimateError";
}

/** The shape fields of a config.json the estimate reads (GPT-2's names as aliases). */
export interface ModelShape {
  source: string;
  vocabSize: number;
  hiddenSize: number;
  numLayers: number;
  intermediateSize: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  numExperts: number;
  moeIntermediateSize: number;
  tied: boolean;
  /** max_position_embeddings (GPT-2's n_positions), when the config gives it. */
  maxPositions: number | null;
}

const CONFIG_BYTES_LIMIT = 16 * 2 ** 20;

function number(raw: Record<string, unknown>, names: string[]): number | undefined {
  for (const name of names) if (typeof raw[name] === "number" && Number.isFinite(raw[name])) return raw[name] as number;
  return undefined;
}

/** The shape a config.json describes; null when it lacks the fields (loading reports what is wrong with it). */
export function modelShape(raw: Record<string, unknown>, source: string): ModelShape | null {
  const hiddenSize = number(raw, ["hidden_size", "n_embd"]);
  const numLayers = number(raw, ["num_hidden_layers", "n_layer"]);
  const vocabSize = number(raw, ["vocab_size"]);
  const numHeads = number(raw, ["num_attention_heads", "n_head"]);
  if (!hiddenSize || !numLayers || !vocabSize || !numHeads) return null;
  const intermediateSize = number(raw, ["intermediate_size", "n_inner"]) ?? 4 * hiddenSize;
  const numExperts = number(raw, ["num_local_experts", "num_experts"]) ?? 0;
  return {
    source,
    vocabSize,
    hiddenSize,
    numLayers,
    intermediateSize,
    numHeads,
    numKvHeads: number(raw, ["num_key_value_heads"]) ?? numHeads,
    headDim: number(raw, ["head_dim"]) ?? hiddenSize / numHeads,
    numExperts,
    moeIntermediateSize: number(raw, ["moe_intermediate_size"]) ?? intermediateSize,
    // transformers' PretrainedConfig default; counting one matrix where there are two keeps the estimate a lower bound.
    tied: raw.tie_word_embeddings !== false,
    maxPositions: number(raw, ["max_position_embeddings", "n_positions"]) ?? null,
  };
}

/** Parameters of the decoder a shape describes: embeddings (and an untied head), attention and MLP (or experts). */
export function parameterCount(shape: ModelShape): number {
  const { hiddenSize: h, numHeads, numKvHeads, headDim, numLayers, intermediateSize, numExperts, moeIntermediateSize, vocabSize } = shape;
  const attention = 2 * h * numHeads * headDim + 2 * h * numKvHeads * headDim;
  const mlp = numExperts > 0 ? numExperts * 3 * h * moeIntermediateSize + h * numExperts : 3 * h * intermediateSize;
  return vocabSize * h * (shape.tied ? 1 : 2) + numLayers * (attention + mlp);
}

/** A local model directory's config.json, read when it is a small regular file, or a .gguf file's metadata; null for anything else. */
export function localModelShape(dir: string): ModelShape | null {
  if (isGgufPath(dir) && existsSync(dir)) {
    try {
      return modelShape(ggufModelConfig(readGguf(dir), dir), dir);
    } catch {
      return null;
    }
  }
  const file = path.join(dir, "config.json");
  if (!existsSync(file)) return null;
  const stats = statSync(file);
  if (!stats.isFile() || stats.size > CONFIG_BYTES_LIMIT) return null;
  try {
    const raw = JSON.parse(readFileSync(file, "utf8")) as unknown;
    return typeof raw === "object" && raw !== null && !Array.isArray(raw) ? modelShape(raw as Record<string, unknown>, file) : null;
  } catch {
    return null;
  }
}

/**
 * What a model is to the run: an actor samples the rollouts (its cache and logits counted), a reference scores them
 * frozen, a critic and a reward model are trained on rows but never sample (their activations are left out: the
 * estimate stays a lower bound).
 */
export type ModelRole = "actor" | "reference" | "critic" | "reward model";

/** One model a run loads, as the estimate counts it. */
export interface PlannedModel {
  shape: ModelShape;
  device: string;
  role: ModelRole;
  /** Whether its weights train (gradients, AdamW); false for references and a reward model's frozen backbone. */
  trained: boolean;
  /** Whether it is a model object the caller loaded already (its weights are not counted). */
  loaded: boolean;
}

export interface MemoryPlan {
  /** Each model the run loads, on the device its placement gives it. */
  models: PlannedModel[];
  /** The models' dtype. */
  dtype: string;
  /** How trained bf16 models step: bf16-mixed adds a float32 master and float32 moments (see precision.ts). */
  precision: Precision;
  numGenerations: number;
  maxNewTokens: number;
  /** Tokens of the longest prompt seen (0 when none could be read). */
  promptTokens: number;
  /** Bytes the process holds before any model loads. */
  processBytes: number;
}

const GB = 1e9;
const gb = (bytes: number) => `${(bytes / GB).toFixed(bytes < 10 * GB ? 2 : 1)} GB`;

interface DeviceShare {
  total: number;
  lines: string[];
}

function roleName(role: ModelRole, trained: boolean, count: number): string {
  const plural = count > 1 ? "s" : "";
  if (role === "actor" || role === "reference") return `${trained ? "trained" : "frozen"} model${plural}`;
  return `${role}${plural}${trained ? "" : " with a frozen backbone"}`;
}

/** Bytes each device would hold, with the terms that make them up (as lines naming fields and numbers). */
export function estimateMemory(plan: MemoryPlan): Map<string, DeviceShare> {
  const shares = new Map<string, DeviceShare>();
  const groups = new Map<string, PlannedModel & { count: number }>();
  for (const model of plan.models) {
    const key = JSON.stringify([model.device, model.shape, model.role, model.trained, model.loaded]);
    const group = groups.get(key) ?? { ...model, count: 0 };
    group.count++;
    groups.set(key, group);
  }
  for (const { device, shape, role, trained, loaded, count } of groups.values()) {
    const share = shares.get(device) ?? { total: 0, lines: [] };
    const parameters = parameterCount(shape);
    const precision = resolvePrecision(plan.precision, plan.dtype, device);
    const bytes = trainingBytes(precision);
    // Weights (unless already loaded), then gradients, AdamW's exp_avg and exp_avg_sq, and any master for a trained model.
    const perParameter = (loaded ? 0 : bytes.weight) + (trained ? bytes.gradient + bytes.moments + bytes.master : 0);
    const weights = count * parameters * perParameter;
    const held = [loaded ? null : "weights", trained ? "gradients, AdamW's two moments" : null, trained && bytes.master > 0 ? `${precision}'s float32 master weights` : null];
    share.lines.push(
      `${count} ${roleName(role, trained, count)} of ${(parameters / 1e9).toFixed(3)}B parameters (${shape.source}: hidden_size ${shape.hiddenSize}, ` +
        `num_hidden_layers ${shape.numLayers}, vocab_size ${shape.vocabSize}) × ${perParameter} bytes ` +
        `(${held.filter(Boolean).join(", ")}) = ${gb(weights)}`,
    );
    share.total += weights;
    if (role === "actor") {
      const { numGenerations, maxNewTokens, promptTokens } = plan;
      const rowTokens = numGenerations * (promptTokens + maxNewTokens);
      const logits = numGenerations * maxNewTokens * shape.vocabSize * 4;
      // Each decoding step appends to one layer's cache at a time by copying it: that layer's old and new copies meet.
      const cache = rowTokens * (shape.numLayers + 1) * 2 * shape.numKvHeads * shape.headDim * bytes.weight;
      const layerInputs = rowTokens * shape.numLayers * shape.hiddenSize * bytes.weight;
      const generation = cache + logits;
      const update = layerInputs + logits;
      const rows = `numGenerations ${numGenerations} × (prompt ${promptTokens} + maxNewTokens ${maxNewTokens} tokens)`;
      share.lines.push(
        generation >= update
          ? `${count} × rollout generation: ${rows} × KV cache of ${shape.numLayers} layers (and one layer's copy while it grows), + float32 logits over ${shape.vocabSize} tokens = ${gb(count * generation)}`
          : `${count} × rollout update: ${rows} × ${shape.numLayers} layer inputs of ${shape.hiddenSize}, + float32 logits over ${shape.vocabSize} tokens = ${gb(count * update)}`,
      );
      share.total += count * Math.max(generation, update);
    }
    shares.set(device, share);
  }
  return shares;
}

/** The memory this process may use: the machine's RAM, or its container's cgroup limit when that is smaller. */
export function availableMemory(cgroupRoot = "/"): { bytes: number; what: string } {
  const machine = { bytes: totalmem(), what: `this machine's ${gb(totalmem())} of memory (${gb(freemem())} free)` };
  const cgroup = cgroupMemoryLimit(cgroupRoot);
  return cgroup !== null && cgroup.bytes < machine.bytes ? { bytes: cgroup.bytes, what: `this container's memory limit of ${gb(cgroup.bytes)} (${cgroup.file})` } : machine;
}

/**
 * Refuses the plan when a CPU device's share is over `limitBytes` (default: availableMemory()); CUDA devices are
 * not checked (see above). The error names every term, the limit, and how to override it.
 */
export function checkMemoryPlan(plan: MemoryPlan, limitBytes?: number, available: () => { bytes: number; what: string } = availableMemory): void {
  if (limitBytes !== undefined && !(limitBytes > 0)) throw new ConfigError(`memoryLimitBytes must be a positive number of bytes (Infinity: no check), got ${limitBytes}`, "memoryLimitBytes");
  for (const [device, share] of estimateMemory(plan)) {
    if (device !== "cpu") continue;
    const total = share.total + plan.processBytes;
    const machine = limitBytes === undefined ? available() : { bytes: limitBytes, what: `memoryLimitBytes ${gb(limitBytes)}` };
    if (total <= machine.bytes) continue;
    const lines = [...share.lines, `this process before loading (Node.js, libtorch, the datasets) = ${gb(plan.processBytes)}`];
    throw new MemoryEstimateError(
      `this run would hold at least ${gb(total)} on ${device}, more than ${machine.what}:\n  ${lines.join("\n  ")}\n` +
        `Use fewer or smaller agents, a smaller numGenerations or maxNewTokens, or bfloat16; if you know better, set the ` +
        `trainer option memoryLimitBytes to the bytes to allow (Infinity skips this check).`,
      "memoryLimitBytes",
    );
  }
}
