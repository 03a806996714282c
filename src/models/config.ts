// Hugging Face config.json for the decoder family we run (Qwen2 / Qwen2.5, Qwen3, Llama), read into the one
// normalised shape the native decoder takes. Anything we would compute wrongly is refused, naming file and field.

export type ModelType = "qwen2" | "qwen3" | "llama";

/** The architecture as the native decoder needs it. */
export interface DecoderConfig {
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  ropeTheta: number;
  rmsNormEps: number;
  tieWordEmbeddings: boolean;
  qkvBias: boolean;
  oBias: boolean;
  mlpBias: boolean;
  qkNorm: boolean;
}

export interface ModelConfig extends DecoderConfig {
  modelType: ModelType;
  maxPositionEmbeddings: number;
  bosTokenId: number | null;
  eosTokenIds: number[];
  padTokenId: number | null;
  /** config.json as read (or as createTinyModel wrote it); saving keeps its other fields. */
  raw: Record<string, unknown>;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

const ARCHITECTURES: Record<ModelType, string> = {
  qwen2: "Qwen2ForCausalLM",
  qwen3: "Qwen3ForCausalLM",
  llama: "LlamaForCausalLM",
};

function tokenIds(value: unknown): number[] {
  if (value === null || value === undefined) return [];
  return (Array.isArray(value) ? value : [value]).filter((id): id is number => Number.isInteger(id));
}

/** Parses a config.json object; `file` names it in errors. */
export function parseModelConfig(raw: Record<string, unknown>, file = "config.json"): ModelConfig {
  const fail = (field: string, problem: string): never => {
    throw new ConfigError(`${file}: ${field} ${problem}`);
  };
  const modelType = raw.model_type;
  if (typeof modelType !== "string") fail("model_type", "is missing");
  if (!(modelType as string in ARCHITECTURES)) {
    fail("model_type", `"${modelType}" is not supported (supported: ${Object.keys(ARCHITECTURES).join(", ")})`);
  }
  const type = modelType as ModelType;
  const integer = (field: string, fallback?: number): number => {
    const value = raw[field] ?? fallback;
    if (value === undefined || value === null) return fail(field, "is missing");
    if (!Number.isInteger(value) || (value as number) <= 0) return fail(field, `must be a positive integer, got ${JSON.stringify(value)}`);
    return value as number;
  };
  const number = (field: string, fallback: number): number => {
    const value = raw[field] ?? fallback;
    if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) return fail(field, `must be a positive number, got ${JSON.stringify(value)}`);
    return value;
  };
  const flag = (field: string, fallback: boolean): boolean => {
    const value = raw[field] ?? fallback;
    if (typeof value !== "boolean") return fail(field, `must be true or false, got ${JSON.stringify(value)}`);
    return value;
  };

  const hiddenSize = integer("hidden_size");
  const numHeads = integer("num_attention_heads");
  const numKvHeads = integer("num_key_value_heads", numHeads);
  if (numHeads % numKvHeads !== 0) fail("num_key_value_heads", `(${numKvHeads}) must divide num_attention_heads (${numHeads})`);
  // Qwen3's head_dim defaults to 128 in transformers, independent of hidden_size; the others derive it.
  const headDim = integer("head_dim", type === "qwen3" ? 128 : hiddenSize / numHeads);
  if (raw.hidden_act !== undefined && raw.hidden_act !== "silu") fail("hidden_act", `"${raw.hidden_act}" is not supported (only silu)`);
  if (raw.rope_scaling !== undefined && raw.rope_scaling !== null) {
    fail("rope_scaling", `${JSON.stringify(raw.rope_scaling)} is not supported (only plain RoPE)`);
  }
  if (raw.use_sliding_window === true) fail("use_sliding_window", "true is not supported (full attention only)");
  const attentionBias = flag("attention_bias", false);

  const eosTokenIds = tokenIds(raw.eos_token_id);
  const pad = raw.pad_token_id;
  const bos = raw.bos_token_id;
  return {
    modelType: type,
    vocabSize: integer("vocab_size"),
    hiddenSize,
    intermediateSize: integer("intermediate_size"),
    numLayers: integer("num_hidden_layers"),
    numHeads,
    numKvHeads,
    headDim,
    ropeTheta: number("rope_theta", 10000),
    rmsNormEps: number("rms_norm_eps", 1e-6),
    tieWordEmbeddings: flag("tie_word_embeddings", false),
    // Qwen2 always has q/k/v biases and no o_proj bias; Llama and Qwen3 put attention_bias on all four.
    qkvBias: type === "qwen2" ? true : attentionBias,
    oBias: type === "qwen2" ? false : attentionBias,
    mlpBias: type === "llama" ? flag("mlp_bias", false) : false,
    qkNorm: type === "qwen3",
    maxPositionEmbeddings: integer("max_position_embeddings", 32768),
    bosTokenId: Number.isInteger(bos) ? (bos as number) : null,
    eosTokenIds,
    padTokenId: Number.isInteger(pad) ? (pad as number) : null,
    raw,
  };
}

export type DecoderShape = Omit<DecoderConfig, "qkvBias" | "oBias" | "mlpBias" | "qkNorm" | "headDim" | "numKvHeads"> & {
  headDim?: number;
  numKvHeads?: number;
};

/** A config.json object for a new model of the given family and shape, as transformers would write it. */
export function buildConfigJson(
  modelType: ModelType,
  shape: DecoderShape,
  tokens: { bosTokenId: number | null; eosTokenId: number; padTokenId?: number | null },
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const config: Record<string, unknown> = {
    architectures: [ARCHITECTURES[modelType]],
    model_type: modelType,
    vocab_size: shape.vocabSize,
    hidden_size: shape.hiddenSize,
    intermediate_size: shape.intermediateSize,
    num_hidden_layers: shape.numLayers,
    num_attention_heads: shape.numHeads,
    num_key_value_heads: shape.numKvHeads ?? shape.numHeads,
    hidden_act: "silu",
    max_position_embeddings: 4096,
    rms_norm_eps: shape.rmsNormEps,
    rope_theta: shape.ropeTheta,
    rope_scaling: null,
    tie_word_embeddings: shape.tieWordEmbeddings,
    bos_token_id: tokens.bosTokenId,
    eos_token_id: tokens.eosTokenId,
    torch_dtype: "float32",
    use_cache: true,
    ...extra,
  };
  if (tokens.padTokenId !== undefined && tokens.padTokenId !== null) config.pad_token_id = tokens.padTokenId;
  if (modelType === "qwen3" || shape.headDim !== undefined) config.head_dim = shape.headDim ?? shape.hiddenSize / shape.numHeads;
  if (modelType !== "qwen2") config.attention_bias = false;
  return config;
}

/** Just the fields the native decoder reads. */
export function decoderConfigOf(config: ModelConfig): DecoderConfig {
  const { vocabSize, hiddenSize, intermediateSize, numLayers, numHeads, numKvHeads, headDim, ropeTheta, rmsNormEps, tieWordEmbeddings, qkvBias, oBias, mlpBias, qkNorm } = config;
  return { vocabSize, hiddenSize, intermediateSize, numLayers, numHeads, numKvHeads, headDim, ropeTheta, rmsNormEps, tieWordEmbeddings, qkvBias, oBias, mlpBias, qkNorm };
}
