// The model shapes the suite measures, built in memory with random weights (nothing is read from disk): a tiny model
// like the demo's, the 12M shape the peer figures were measured on, a ~20M one, Qwen2.5-0.5B's shape, two families
// whose work differs from a dense decoder's (a sparse mixture of experts, a sliding-window model), and every rotary
// family the loader knows at the 12M shape, so each family's train step is read against the same ceiling.
import { CausalLM } from "../models/causal-lm.js";
import { buildConfigJson, type DecoderShape, type RotaryModelType } from "../models/config.js";
import { SeededRandom } from "../util/random.js";
import { TORCH_DTYPE, type BenchDtype, type BenchModelName } from "./types.js";

export interface BenchModel {
  label: string;
  shape: DecoderShape & { numKvHeads: number };
  /** The family and its config fields beyond the shape; absent: Qwen2. */
  family?: { modelType: RotaryModelType; fields: Record<string, unknown> };
  /** Parameters a token does not use: the experts its router does not pick (MoE). */
  idleParameters?: number;
  /** Built with this LoadOptions.routerAuxLossCoef: the policy loss adds the router's load-balancing term (MoE). */
  routerAuxLossCoef?: number;
}

// The 12M shape with 8 SwiGLU experts of 256 per layer, 2 chosen per token (Qwen3-MoE routing, renormalised).
const MOE = { experts: 8, perToken: 2, width: 256, hidden: 256, layers: 4 };

const common = { rmsNormEps: 1e-6, tieWordEmbeddings: true } as const;
const SHAPE_12M = { vocabSize: 32000, hiddenSize: 256, intermediateSize: 1024, numLayers: 4, numHeads: 4, numKvHeads: 2, ropeTheta: 10000, ...common };
const MOE_IDLE_PARAMETERS = MOE.layers * (MOE.experts - MOE.perToken) * 3 * MOE.hidden * MOE.width;

/** The families at the 12M shape; the two MoE families with the moe model's experts (their MLP width is an expert's). */
export const FAMILY_TYPES: RotaryModelType[] = ["qwen2", "qwen3", "llama", "mistral", "gemma2", "gemma3_text", "phi3", "olmo2", "smollm3", "qwen3_moe", "mixtral"];
const EXPERT_FIELDS: Partial<Record<RotaryModelType, Record<string, unknown>>> = {
  qwen3_moe: { num_experts: MOE.experts, num_experts_per_tok: MOE.perToken, moe_intermediate_size: MOE.width, norm_topk_prob: true },
  mixtral: { num_local_experts: MOE.experts, num_experts_per_tok: MOE.perToken },
};

function familyModel(modelType: RotaryModelType): BenchModel {
  const experts = EXPERT_FIELDS[modelType];
  return {
    label: `${modelType} at 12M's shape${experts ? `, ${MOE.experts} experts of ${MOE.width} (top ${MOE.perToken})` : ""}`,
    shape: { ...SHAPE_12M, ...(modelType === "mixtral" ? { intermediateSize: MOE.width } : {}) },
    family: { modelType, fields: experts ?? {} },
    idleParameters: experts ? MOE_IDLE_PARAMETERS : undefined,
  };
}

const moe: BenchModel = {
  label: `Qwen3-MoE, 12M's attention, ${MOE.experts} experts of ${MOE.width} (top ${MOE.perToken})`,
  shape: { ...SHAPE_12M, headDim: 64, ropeTheta: 1e6 },
  family: { modelType: "qwen3_moe", fields: EXPERT_FIELDS.qwen3_moe! },
  idleParameters: MOE_IDLE_PARAMETERS,
};

export const BENCH_MODELS: Record<BenchModelName, BenchModel> = {
  tiny: {
    label: "tiny (64 hidden, 2 layers)",
    shape: { vocabSize: 512, hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, ropeTheta: 10000, ...common },
  },
  "12m": { label: "12M (peer's shape)", shape: SHAPE_12M },
  "20m": {
    label: "21M",
    shape: { vocabSize: 32000, hiddenSize: 384, intermediateSize: 1536, numLayers: 4, numHeads: 6, numKvHeads: 2, ropeTheta: 10000, ...common },
  },
  "0.5b": {
    label: "Qwen2.5-0.5B shape",
    shape: { vocabSize: 151936, hiddenSize: 896, intermediateSize: 4864, numLayers: 24, numHeads: 14, numKvHeads: 2, ropeTheta: 1e6, ...common },
  },
  moe,
  // The same model whose policy loss adds the router's auxiliary loss (Qwen3-MoE's default coefficient): its cost.
  "moe-aux": { ...moe, label: `${moe.label}, + router aux loss`, routerAuxLossCoef: 0.001 },
  sliding: {
    label: "Mistral, 12M's shape, sliding window 32",
    shape: SHAPE_12M,
    family: { modelType: "mistral", fields: { sliding_window: 32 } },
  },
  ...(Object.fromEntries(FAMILY_TYPES.map((modelType) => [`family-${modelType}`, familyModel(modelType)])) as Record<`family-${RotaryModelType}`, BenchModel>),
};

export function headDim(shape: DecoderShape): number {
  return shape.headDim ?? shape.hiddenSize / shape.numHeads;
}

/** Parameters of a Qwen2 model of this shape (q/k/v biases, tied or untied head), without building it. */
export function parameterCount(shape: BenchModel["shape"]): number {
  const { vocabSize: v, hiddenSize: h, intermediateSize: i, numLayers, numHeads, numKvHeads } = shape;
  const d = headDim(shape);
  const attention = h * numHeads * d + numHeads * d + 2 * (h * numKvHeads * d + numKvHeads * d) + numHeads * d * h;
  const layer = attention + 3 * h * i + 2 * h;
  return v * h * (shape.tieWordEmbeddings ? 1 : 2) + numLayers * layer + h;
}

/** Bytes of K and V one decode step reads for `rows` sequences holding `context` positions each (a sliding-window
 * layer keeps only its window). */
export function kvCacheBytes(model: BenchModel, rows: number, context: number, bytesPerElement: number): number {
  const { shape } = model;
  const window = model.family?.fields.sliding_window as number | undefined;
  const positions = window ? Math.min(context, window) : context;
  return 2 * shape.numLayers * shape.numKvHeads * headDim(shape) * positions * rows * bytesPerElement;
}

export function buildBenchModel(name: BenchModelName, dtype: BenchDtype, device: string): CausalLM {
  const { shape, family, routerAuxLossCoef } = BENCH_MODELS[name];
  // The last id is EOS; the benchmarks pass no stop ids, so every row generates exactly the tokens asked for.
  const config = buildConfigJson(family?.modelType ?? "qwen2", shape, { bosTokenId: null, eosTokenId: shape.vocabSize - 1 }, family?.fields);
  return CausalLM.create(config, { dtype: TORCH_DTYPE[dtype], device, seed: 0, routerAuxLossCoef });
}

/** `rows` rows of `length` token ids drawn uniformly from the vocabulary, the same for a given seed. */
export function randomTokens(rows: number, length: number, vocabSize: number, seed: number): Int32Array[] {
  const random = new SeededRandom(seed);
  return Array.from({ length: rows }, () => Int32Array.from({ length }, () => Math.floor(random.next() * (vocabSize - 1))));
}
