// What a run will hold in memory, estimated from the models' config.json files and the trainer config before any
// model is loaded: weights, and for trained models their gradients and AdamW's two moments; a frozen reference copy
// when the KL term is on; and the largest activations of a rollout (the KV cache of numGenerations completions of
// maxNewTokens, and their float32 logits over the vocabulary). Every term is a lower bound (prompts, hidden
// activations and the allocator's slack come on top), so a run refused here could not have fit; one let through may
// still not. The run is refused, naming the fields and numbers, when a device's share is over its memory: the
// machine's RAM for "cpu". CUDA devices are not checked here (runtimeInfo reports no per-GPU capacity yet).
// LifecycleOptions.memoryLimitBytes replaces the machine's figure (Infinity: no check) for users who know better.
import { existsSync, readFileSync, statSync } from "node:fs";
import { freemem, totalmem } from "node:os";
import path from "node:path";
import { ConfigError } from "./fields.js";
import { ggufModelConfig, isGgufPath, readGguf } from "../models/gguf.js";

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

export interface MemoryPlan {
  /** Each model the run loads, with its device, whether it is trained (gradients, AdamW) and whether it samples. */
  models: Array<{ shape: ModelShape; device: string; trained: boolean; loaded: boolean }>;
  /** Bytes per parameter of the models ("float32": 4, "bfloat16": 2). */
  parameterBytes: number;
  numGenerations: number;
  maxNewTokens: number;
}

const GB = 1e9;
const gb = (bytes: number) => `${(bytes / GB).toFixed(bytes < 10 * GB ? 2 : 1)} GB`;

interface DeviceShare {
  total: number;
  lines: string[];
}

/** Bytes each device would hold, with the terms that make them up (as lines naming fields and numbers). */
export function estimateMemory(plan: MemoryPlan): Map<string, DeviceShare> {
  const shares = new Map<string, DeviceShare>();
  const groups = new Map<string, { device: string; shape: ModelShape; trained: boolean; loaded: boolean; count: number }>();
  for (const model of plan.models) {
    const key = JSON.stringify([model.device, model.shape, model.trained, model.loaded]);
    const group = groups.get(key) ?? { ...model, count: 0 };
    group.count++;
    groups.set(key, group);
  }
  for (const { device, shape, trained, loaded, count } of groups.values()) {
    const share = shares.get(device) ?? { total: 0, lines: [] };
    const parameters = parameterCount(shape);
    // Weights (unless already loaded), then gradients and AdamW's exp_avg and exp_avg_sq for a trained model.
    const copies = (loaded ? 0 : 1) + (trained ? 3 : 0);
    const weights = count * parameters * plan.parameterBytes * copies;
    const role = trained ? "trained" : "frozen";
    share.lines.push(
      `${count} ${role} model${count > 1 ? "s" : ""} of ${(parameters / 1e9).toFixed(3)}B parameters (${shape.source}: hidden_size ${shape.hiddenSize}, ` +
        `num_hidden_layers ${shape.numLayers}, vocab_size ${shape.vocabSize}) × ${copies * plan.parameterBytes} bytes ` +
        `(${[loaded ? null : "weights", trained ? "gradients, AdamW's two moments" : null].filter(Boolean).join(", ")}) = ${gb(weights)}`,
    );
    share.total += weights;
    if (trained) {
      const cache = plan.numGenerations * plan.maxNewTokens * shape.numLayers * 2 * shape.numKvHeads * shape.headDim * plan.parameterBytes;
      const logits = plan.numGenerations * plan.maxNewTokens * shape.vocabSize * 4;
      share.lines.push(
        `${count} × rollout activations: numGenerations ${plan.numGenerations} × maxNewTokens ${plan.maxNewTokens} × ` +
          `(KV cache of ${shape.numLayers} layers + float32 logits over ${shape.vocabSize} tokens) = ${gb(count * (cache + logits))}`,
      );
      share.total += count * (cache + logits);
    }
    shares.set(device, share);
  }
  return shares;
}

/**
 * Refuses the plan when a CPU device's share is over `limitBytes` (default: the machine's RAM); CUDA devices are
 * not checked (see above). The error names every term, the limit, and how to override it.
 */
export function checkMemoryPlan(plan: MemoryPlan, limitBytes?: number): void {
  if (limitBytes !== undefined && !(limitBytes > 0)) throw new ConfigError(`memoryLimitBytes must be a positive number of bytes (Infinity: no check), got ${limitBytes}`, "memoryLimitBytes");
  for (const [device, share] of estimateMemory(plan)) {
    if (device !== "cpu") continue;
    const limit = limitBytes ?? totalmem();
    if (share.total <= limit) continue;
    const budget = limitBytes === undefined ? `this machine's ${gb(limit)} of memory (${gb(freemem())} free)` : `memoryLimitBytes ${gb(limit)}`;
    throw new MemoryEstimateError(
      `this run would hold at least ${gb(share.total)} on ${device}, more than ${budget}:\n  ${share.lines.join("\n  ")}\n` +
        `Use fewer or smaller agents, a smaller numGenerations or maxNewTokens, or bfloat16; if you know better, set the ` +
        `trainer option memoryLimitBytes to the bytes to allow (Infinity skips this check).`,
      "memoryLimitBytes",
    );
  }
}
