// Hugging Face config.json, as transformers 4.x or 5.x writes it, read into the one normalised shape the native
// decoder takes: which norm, activation, positions, attention form and window each layer uses. Every key comlrl reads
// is validated here; every other key is judged by what transformers' code for the family computes (config-keys.ts):
// refused by name when it would change the numbers, loaded (and named in a warning when unknown) when it would not.
import { ConfigError } from "../config/fields.js";
import { judgeConfigKeys, warnUnknownConfigKeys } from "./judge-config-keys.js";
import { ropeTables } from "./rope.js";

/** A supported architecture family: config.json's model_type. */
export type ModelType =
  | "qwen2" | "qwen3" | "llama" | "mistral" | "gemma2" | "gemma3_text" | "phi3" | "olmo2" | "smollm3" | "qwen3_moe" | "mixtral"
  | "gpt2";

/** Normalisation: x/rms(x)·w, Gemma's x/rms(x)·(1 + w), or LayerNorm with bias (GPT-2). */
export type NormKind = "rms" | "rms_one_plus" | "layer";
/** Where the norms sit: before each block (Llama), before and after (Gemma 2/3), after only (OLMo 2). */
export type NormPlacement = "pre" | "sandwich" | "post";
/** SiLU, GELU's tanh approximation, or exact (erf) GELU. */
export type Activation = "silu" | "gelu_tanh" | "gelu";
/** Per-head q/k RMSNorm (Qwen3, Gemma 3) or one over the whole projection (OLMo 2). */
export type QkNorm = "none" | "head" | "full";

/** The architecture as the native decoder needs it. */
export interface DecoderConfig {
  /** Rows of the embedding (config.json vocab_size). */
  vocabSize: number;
  /** Width of the residual stream. */
  hiddenSize: number;
  /** Width of a dense MLP's hidden layer. */
  intermediateSize: number;
  /** Decoder layers. */
  numLayers: number;
  /** Query heads. */
  numHeads: number;
  /** Key/value heads (fewer than numHeads: grouped-query attention). */
  numKvHeads: number;
  /** Width of one attention head. */
  headDim: number;
  /** Every norm's epsilon (LayerNorm's too). */
  rmsNormEps: number;
  /** The LM head reuses the embedding matrix. */
  tieWordEmbeddings: boolean;
  /** Biases on the q/k/v projections. */
  qkvBias: boolean;
  /** A bias on the attention output projection. */
  oBias: boolean;
  /** Biases on the MLP projections. */
  mlpBias: boolean;
  /** Norm on queries and keys. */
  qkNorm: QkNorm;
  /** The norm's form. */
  norm: NormKind;
  /** Where the norms sit around each block. */
  normPlacement: NormPlacement;
  /** The MLP's activation. */
  activation: Activation;
  /** Phi-3 stores q/k/v as one qkv_proj and gate/up as one gate_up_proj; GPT-2 q/k/v as one c_attn. */
  fusedProjections: boolean;
  /** act(gate)·up MLPs; false: act(up) alone (GPT-2). */
  gatedMlp: boolean;
  /** GPT-2's module names (transformer.h.N.attn.c_attn) and Conv1D weights stored [in, out]. */
  gpt2Layout: boolean;
  /** Rows of a learned absolute position embedding (GPT-2's wpe, n_positions); 0: none. */
  learnedPositions: number;
  /** Positions at or past this are refused (0: none), the error saying positionLimitReason. */
  positionLimit: number;
  /** Why positions stop at positionLimit (named in the error). */
  positionLimitReason: string;
  /** Multiply the embeddings by √hidden_size (Gemma). */
  embedScale: boolean;
  /** Attention scores are q·k × this (1/√head_dim, or Gemma's 1/√query_pre_attn_scalar). */
  attentionScale: number;
  /** tanh soft-capping of attention scores and of the final logits; 0 = none. */
  attnSoftcap: number;
  /** tanh soft-capping of the final logits; 0 = none. */
  finalSoftcap: number;
  /** The attention kernel: libtorch's scaled_dot_product_attention on CUDA and ours on a CPU (auto), ours (eager),
   * or libtorch's wherever it can run (sdpa: libtorch ≥ 2.5, no soft-capping). The numbers agree within rounding. */
  attention: AttentionKernel;
  /** Rotary tables (inverse frequencies and the cos/sin factor) the layers choose from; none with learned positions. */
  ropeInvFreq: number[][]; // [tables][rotaryDim/2]
  /** Per rotary table, the factor its cos/sin are scaled by (YaRN, LongRoPE). */
  ropeAttentionScaling: number[]; // [tables]
  /** Per layer: its rotary table (-1: no rotary embedding, SmolLM3's NoPE layers) and attention window (0: full). */
  layerRope: number[];
  /** Per layer, its sliding attention window (0: full attention). */
  layerWindow: number[];
  /** Sparse mixture-of-experts MLPs (0 experts: dense model); layerSparse[i] = 1 where layer i has one. */
  numExperts: number;
  /** Experts each token is routed to (top k). */
  numExpertsPerTok: number;
  /** Width of one expert's hidden layer. */
  moeIntermediateSize: number;
  /** Renormalise the top-k routing weights to sum to 1. */
  normTopkProb: boolean;
  /** Mixtral's checkpoint names (block_sparse_moe.experts.E.w1/w3/w2). */
  mixtralNames: boolean;
  /** Per layer, 1 where its MLP is a mixture of experts. */
  layerSparse: number[];
  /**
   * Coefficients of the router's auxiliary load-balancing loss (transformers' load_balancing_loss_func), 0 where it
   * is not added: to the causal-LM loss (config.json's output_router_logits, as transformers adds it to the loss of
   * a forward given labels), and to the policy losses (policy-gradient, actor-critic; only by LoadOptions'
   * routerAuxLossCoef, since CoMLRL computes those losses from logits and never adds it).
   */
  lmRouterAuxCoef: number;
  /** The router loss coefficient of the policy losses (0 unless LoadOptions.routerAuxLossCoef). */
  policyRouterAuxCoef: number;
  /**
   * Dropout rates, acting only while the model is in training mode (CausalLM.train()) and only in forwards that
   * record gradients, where transformers places them: on the attention probabilities (attention_dropout, GPT-2's
   * attn_pdrop), on each attention and MLP output before it joins the residual stream (GPT-2's and Phi-3's
   * resid_pdrop), on the embeddings (GPT-2's embd_pdrop).
   */
  attentionDropout: number;
  /** See attentionDropout. */
  residualDropout: number;
  /** See attentionDropout. */
  embeddingDropout: number;
}

type Moe = Pick<DecoderConfig, "numExperts" | "numExpertsPerTok" | "moeIntermediateSize" | "normTopkProb" | "mixtralNames" | "layerSparse">;

/** A weight dtype a config.json can declare (torch_dtype / dtype). */
export type ModelDtype = "float32" | "bfloat16" | "float16";

/** A model's config.json, read into the native decoder's settings plus the ids and metadata around them (parseModelConfig). */
export interface ModelConfig extends DecoderConfig {
  /** config.json model_type. */
  modelType: ModelType;
  /** Positions the model was trained for (config.json max_position_embeddings). */
  maxPositionEmbeddings: number;
  /** Beginning-of-sequence id, if the config names one. */
  bosTokenId: number | null;
  /** End-of-sequence ids (config.json may give one or several). */
  eosTokenIds: number[];
  /** Padding id, if the config names one. */
  padTokenId: number | null;
  /** The checkpoint's storage dtype (transformers 5 `dtype`, 4.x `torch_dtype`). */
  dtype: ModelDtype;
  /** The attention implementation the file asks for (all compute the same numbers; ours is chosen natively). */
  attnImplementation: string | null;
  /** config.json as read (or as createTinyModel wrote it); saving keeps its other fields. */
  raw: Record<string, unknown>;
}

const ARCHITECTURES: Record<ModelType, string> = {
  qwen2: "Qwen2ForCausalLM",
  qwen3_moe: "Qwen3MoeForCausalLM",
  mixtral: "MixtralForCausalLM",
  qwen3: "Qwen3ForCausalLM",
  llama: "LlamaForCausalLM",
  mistral: "MistralForCausalLM",
  gemma2: "Gemma2ForCausalLM",
  gemma3_text: "Gemma3ForCausalLM",
  phi3: "Phi3ForCausalLM",
  olmo2: "Olmo2ForCausalLM",
  smollm3: "SmolLM3ForCausalLM",
  gpt2: "GPT2LMHeadModel",
};

/** Every model_type comlrl runs. */
export const SUPPORTED_MODEL_TYPES = Object.keys(ARCHITECTURES) as ModelType[];

// Fields that never change what the model computes: bookkeeping, token ids (read below), generation defaults.
const METADATA = new Set([
  "architectures", "model_type", "transformers_version", "_name_or_path", "_attn_implementation_autoset", "use_cache",
  "initializer_range", "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype", "attn_implementation",
  "_attn_implementation", "max_position_embeddings", "tokenizer_class", "id2label", "label2id", "return_dict",
  "output_attentions", "output_hidden_states", "problem_type", "is_decoder", "is_encoder_decoder", "add_cross_attention",
  "tie_encoder_decoder", "chunk_size_feed_forward", "cache_implementation", "sep_token_id", "decoder_start_token_id",
  "torchscript", "use_bfloat16", "prefix", "task_specific_params", "finetuning_task", "pruned_heads", "tf_legacy_loss",
]);

// Fields every family below reads (under its own names where it has aliases).
const SHAPE = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "tie_word_embeddings"];
// ...and every rotary family.
const ROTARY = [
  "num_key_value_heads", "head_dim", "rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor", "layer_types",
  "attention_dropout", "original_max_position_embeddings",
];

interface Family {
  /** Fields this family honours beyond SHAPE (and ROTARY). */
  fields: string[];
  /** The file's names for SHAPE fields and max_position_embeddings, where they differ (GPT-2's n_embd, ...). */
  aliases?: Record<string, string>;
  norm: NormKind;
  normPlacement: NormPlacement;
  normEpsField: string;
  activationField: string;
  qkNorm: QkNorm;
  /** Biases given the file's attention_bias / mlp_bias. */
  biases(flag: (field: string, fallback: boolean) => boolean): { qkvBias: boolean; oBias: boolean; mlpBias: boolean };
  defaultHeadDim?: number;
  /** RoPE's base when the file gives none; absent for a family with learned absolute positions (GPT-2). */
  defaultRopeTheta?: number;
  /** transformers' defaults for fields the file may leave out, where they differ from the Llama-like ones below. */
  defaults?: Record<string, unknown>;
  /** Layer kinds when the file has no layer_types (transformers 4.x files). */
  layerKinds(raw: Record<string, unknown>, layers: number): LayerKind[];
  moe?(read: Readers, layers: number): Moe;
}

interface Readers {
  integer(field: string, fallback?: number): number;
  flag(field: string, fallback: boolean): boolean;
  fail(field: string, problem: string): never;
  raw: Record<string, unknown>;
}

const MOE_FIELDS = ["num_local_experts", "num_experts_per_tok", "output_router_logits", "router_aux_loss_coef"];

type LayerKind = "full_attention" | "sliding_attention";
const LAYER_KINDS = new Set<string>(["full_attention", "sliding_attention"]);

const allFull = (_raw: Record<string, unknown>, layers: number): LayerKind[] => Array(layers).fill("full_attention");
const attentionBias = (flag: (field: string, fallback: boolean) => boolean) => {
  const bias = flag("attention_bias", false);
  return { qkvBias: bias, oBias: bias, mlpBias: false };
};
const llamaLike = {
  norm: "rms",
  normPlacement: "pre",
  normEpsField: "rms_norm_eps",
  activationField: "hidden_act",
  qkNorm: "none",
  defaultRopeTheta: 10000,
} as const;

const FAMILIES: Record<ModelType, Family> = {
  // Qwen2 always has q/k/v biases and no o_proj bias; sliding windows on layers ≥ max_window_layers.
  qwen2: {
    ...llamaLike,
    fields: ["use_sliding_window", "sliding_window", "max_window_layers"],
    defaults: { sliding_window: 4096 },
    biases: () => ({ qkvBias: true, oBias: false, mlpBias: false }),
    layerKinds: (raw, layers) =>
      Array.from({ length: layers }, (_, i) =>
        raw.use_sliding_window === true && i >= ((raw.max_window_layers as number | undefined) ?? 28) ? "sliding_attention" : "full_attention",
      ),
  },
  // Qwen3's head_dim defaults to 128 in transformers, independent of hidden_size.
  qwen3: {
    ...llamaLike,
    fields: ["attention_bias", "use_sliding_window", "sliding_window", "max_window_layers"],
    qkNorm: "head",
    defaultHeadDim: 128,
    biases: attentionBias,
    defaults: { sliding_window: 4096 },
    layerKinds: (raw, layers) => FAMILIES.qwen2.layerKinds(raw, layers),
  },
  llama: {
    ...llamaLike,
    fields: ["attention_bias", "mlp_bias"],
    biases: (flag) => ({ ...attentionBias(flag), mlpBias: flag("mlp_bias", false) }),
    layerKinds: allFull,
  },
  mistral: {
    ...llamaLike,
    fields: ["sliding_window"],
    biases: () => ({ qkvBias: false, oBias: false, mlpBias: false }),
    defaults: { sliding_window: 4096 },
    layerKinds: (raw, layers) => Array(layers).fill(raw.sliding_window ? "sliding_attention" : "full_attention"),
  },
  // Gemma 2: (1 + w) norms around both blocks, √hidden embeddings, soft-capping, even layers local.
  gemma2: {
    fields: ["sliding_window", "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping", "hidden_activation",
      "attention_bias", "use_bidirectional_attention"],
    norm: "rms_one_plus",
    normPlacement: "sandwich",
    normEpsField: "rms_norm_eps",
    activationField: "hidden_activation",
    qkNorm: "none",
    biases: attentionBias,
    defaultHeadDim: 256,
    defaultRopeTheta: 10000,
    defaults: { hidden_activation: "gelu_pytorch_tanh", attn_logit_softcapping: 50.0, final_logit_softcapping: 30.0, sliding_window: 4096 },
    layerKinds: (_raw, layers) => Array.from({ length: layers }, (_, i) => (i % 2 === 0 ? "sliding_attention" : "full_attention")),
  },
  // Gemma 3 (text): Gemma 2's layout plus per-head (1 + w) q/k norms, a local rotary base on the sliding layers.
  gemma3_text: {
    fields: ["sliding_window", "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping", "hidden_activation",
      "attention_bias", "sliding_window_pattern", "_sliding_window_pattern", "rope_local_base_freq", "use_bidirectional_attention"],
    norm: "rms_one_plus",
    normPlacement: "sandwich",
    normEpsField: "rms_norm_eps",
    activationField: "hidden_activation",
    qkNorm: "head",
    biases: attentionBias,
    defaultHeadDim: 256,
    defaultRopeTheta: 1e6,
    defaults: { hidden_activation: "gelu_pytorch_tanh", sliding_window: 4096 },
    layerKinds: (raw, layers) => {
      const pattern = ((raw.sliding_window_pattern ?? raw._sliding_window_pattern) as number | undefined) ?? 6;
      return Array.from({ length: layers }, (_, i) => ((i + 1) % pattern !== 0 ? "sliding_attention" : "full_attention"));
    },
  },
  phi3: {
    ...llamaLike,
    fields: ["sliding_window", "resid_pdrop", "embd_pdrop"],
    biases: () => ({ qkvBias: false, oBias: false, mlpBias: false }),
    defaults: { rms_norm_eps: 1e-5 },
    layerKinds: (raw, layers) => Array(layers).fill(raw.sliding_window ? "sliding_attention" : "full_attention"),
  },
  olmo2: {
    ...llamaLike,
    fields: ["attention_bias"],
    normPlacement: "post",
    qkNorm: "full",
    biases: attentionBias,
    defaults: { rms_norm_eps: 1e-5 },
    layerKinds: allFull,
  },
  // Qwen3 attention; sparse MLPs except on mlp_only_layers and off the decoder_sparse_step grid.
  qwen3_moe: {
    ...llamaLike,
    fields: ["attention_bias", "use_sliding_window", "sliding_window", "max_window_layers", "num_experts", "moe_intermediate_size",
      "decoder_sparse_step", "mlp_only_layers", "norm_topk_prob", ...MOE_FIELDS],
    qkNorm: "head",
    defaultHeadDim: 128,
    biases: attentionBias,
    defaults: { sliding_window: 4096 },
    layerKinds: (raw, layers) => FAMILIES.qwen2.layerKinds(raw, layers),
    moe: ({ integer, flag, fail, raw }, layers) => {
      // transformers 5 writes num_local_experts, 4.x num_experts.
      const numExperts = raw.num_local_experts !== undefined ? integer("num_local_experts") : integer("num_experts", 128);
      const step = integer("decoder_sparse_step", 1);
      const dense = (raw.mlp_only_layers ?? []) as number[];
      if (!Array.isArray(dense) || dense.some((i) => !Number.isInteger(i))) fail("mlp_only_layers", "must list layer indices");
      return {
        numExperts,
        numExpertsPerTok: integer("num_experts_per_tok", 8),
        moeIntermediateSize: integer("moe_intermediate_size", 768),
        normTopkProb: flag("norm_topk_prob", false),
        mixtralNames: false,
        layerSparse: Array.from({ length: layers }, (_, i) => Number(!dense.includes(i) && (i + 1) % step === 0)),
      };
    },
  },
  // Mistral attention, every MLP sparse over experts of intermediate_size, top-k renormalised.
  mixtral: {
    ...llamaLike,
    fields: ["sliding_window", "router_jitter_noise", ...MOE_FIELDS],
    biases: () => ({ qkvBias: false, oBias: false, mlpBias: false }),
    defaults: { rms_norm_eps: 1e-5 },
    layerKinds: (raw, layers) => FAMILIES.mistral.layerKinds(raw, layers),
    moe: ({ integer }, layers) => ({
      numExperts: integer("num_local_experts", 8),
      numExpertsPerTok: integer("num_experts_per_tok", 2),
      moeIntermediateSize: integer("intermediate_size"),
      normTopkProb: true,
      mixtralNames: true,
      layerSparse: Array(layers).fill(1),
    }),
  },
  smollm3: {
    ...llamaLike,
    fields: ["attention_bias", "mlp_bias", "use_sliding_window", "sliding_window", "max_window_layers", "no_rope_layers",
      "no_rope_layer_interval"],
    biases: (flag) => ({ ...attentionBias(flag), mlpBias: flag("mlp_bias", false) }),
    defaultRopeTheta: 2e6,
    // SmolLM3Config ties the head by default: SmolLM3-3B's file leaves the key out and its checkpoint has no lm_head.
    defaults: { tie_word_embeddings: true },
    layerKinds: (raw, layers) => FAMILIES.qwen2.layerKinds(raw, layers),
  },
  // GPT-2: learned positions, LayerNorm with bias before each block, fused c_attn, a plain GELU MLP, biases on every
  // projection. The summary_* fields configure GPT2DoubleHeadsModel's multiple-choice head, not the LM; n_ctx is
  // an old alias transformers no longer reads.
  gpt2: {
    fields: ["n_positions", "n_inner", "attn_pdrop", "resid_pdrop", "embd_pdrop", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
      "reorder_and_upcast_attn", "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
      "summary_first_dropout", "n_ctx"],
    aliases: { hidden_size: "n_embd", num_hidden_layers: "n_layer", num_attention_heads: "n_head", intermediate_size: "n_inner",
      max_position_embeddings: "n_positions" },
    norm: "layer",
    normPlacement: "pre",
    normEpsField: "layer_norm_epsilon",
    activationField: "activation_function",
    qkNorm: "none",
    biases: () => ({ qkvBias: true, oBias: true, mlpBias: true }),
    layerKinds: allFull,
    defaults: { activation_function: "gelu_new", layer_norm_epsilon: 1e-5, n_positions: 1024, tie_word_embeddings: true, attn_pdrop: 0.1,
      resid_pdrop: 0.1, embd_pdrop: 0.1 },
  },
};

// transformers' ACT2FN names, each computing what ours computes: torch's tanh GELU or its Python formula (gelu_new,
// gelu_accurate, gelu_python_tanh), torch's erf GELU or its Python formula (gelu_python). Others (gelu_fast's
// truncated constant, gelu_10's clipping, quick_gelu, relu, ...) are refused by name.
const ACTIVATIONS: Record<string, Activation> = {
  silu: "silu", swish: "silu", gelu_pytorch_tanh: "gelu_tanh", gelu_new: "gelu_tanh", gelu_accurate: "gelu_tanh",
  gelu_python_tanh: "gelu_tanh", gelu: "gelu", gelu_python: "gelu",
};
const DTYPES = new Set<string>(["float32", "bfloat16", "float16"]);
/** The attention kernel: ours ("eager"), libtorch's scaled_dot_product_attention ("sdpa"), or libtorch's on CUDA and ours on a CPU ("auto"). */
export type AttentionKernel = "auto" | "eager" | "sdpa";
// transformers' attn_implementation names: the flash and flex kernels are libtorch's SDPA here, which picks a flash
// kernel itself where the device and shapes allow one.
const ATTENTION_KERNELS: Record<string, AttentionKernel> = {
  eager: "eager", sdpa: "sdpa", flash_attention_2: "sdpa", flash_attention_3: "sdpa", flex_attention: "sdpa",
};

// The most any field that sizes a tensor or a per-layer table may say: several times what the largest published
// models use (126 layers, hidden 16384, 262144 tokens, 512 experts), so only a corrupt or hostile config.json is
// refused, by field, before anything is sized by it.
const SIZE_LIMITS: Record<string, number> = {
  vocab_size: 2 ** 24,
  hidden_size: 2 ** 16,
  intermediate_size: 2 ** 18,
  moe_intermediate_size: 2 ** 18,
  num_hidden_layers: 1024,
  num_attention_heads: 1024,
  num_key_value_heads: 1024,
  head_dim: 4096,
  max_position_embeddings: 2 ** 27,
  num_experts: 4096,
  num_local_experts: 4096,
  num_experts_per_tok: 4096,
};

// transformers' Phi-3 reads rope type "su" and "yarn", the names Phi-3's 128k checkpoints were published with, as
// "longrope" (the same scaling under its later name).
function withPhi3RopeNames(raw: Record<string, unknown>): Record<string, unknown> {
  const renamed = { ...raw };
  for (const key of ["rope_scaling", "rope_parameters"]) {
    const dict = raw[key] as Record<string, unknown> | null | undefined;
    if (dict === null || typeof dict !== "object" || Array.isArray(dict)) continue;
    const typeKey = "rope_type" in dict ? "rope_type" : "type";
    if (dict[typeKey] === "su" || dict[typeKey] === "yarn") renamed[key] = { ...dict, [typeKey]: "longrope" };
  }
  return renamed;
}

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
    fail("model_type", `"${modelType}" is not supported (supported: ${SUPPORTED_MODEL_TYPES.join(", ")})`);
  }
  const type = modelType as ModelType;
  const family = FAMILIES[type];
  const gpt2 = type === "gpt2";
  const rotary = family.defaultRopeTheta !== undefined;
  const named = (field: string): string => family.aliases?.[field] ?? field;
  const honoured = new Set([...METADATA, ...SHAPE.map(named), ...(rotary ? ROTARY : []), ...family.fields, family.normEpsField, family.activationField]);
  warnUnknownConfigKeys(file, type, judgeConfigKeys(raw, type, honoured, file));
  // The keys this family reads: any other key has been judged to change nothing, and is read by nothing below.
  const own = Object.fromEntries(Object.entries(raw).filter(([key]) => honoured.has(key)));
  // The file's name for a field, and its value there or transformers' default for the family.
  const given = (field: string): unknown => own[named(field)] ?? family.defaults?.[named(field)];
  // The same where an explicit null means "none" rather than "the default" (sliding_window, the soft-capping values).
  const fileOrDefault = (field: string): unknown => (Object.hasOwn(own, field) ? own[field] : family.defaults?.[field]);
  const integer = (field: string, fallback?: number): number => {
    const value = given(field) ?? fallback;
    if (value === undefined || value === null) return fail(named(field), "is missing");
    if (!Number.isInteger(value) || (value as number) <= 0) return fail(named(field), `must be a positive integer, got ${JSON.stringify(value)}`);
    const limit = SIZE_LIMITS[field];
    if (limit !== undefined && (value as number) > limit) {
      return fail(named(field), `is ${value}, past the ${limit} any real model needs (a corrupt or hostile config.json?)`);
    }
    return value as number;
  };
  const number = (field: string, fallback: number): number => {
    const value = given(field) ?? fallback;
    if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) return fail(named(field), `must be a positive number, got ${JSON.stringify(value)}`);
    return value;
  };
  const flag = (field: string, fallback: boolean): boolean => {
    const value = given(field) ?? fallback;
    if (typeof value !== "boolean") return fail(named(field), `must be true or false, got ${JSON.stringify(value)}`);
    return value;
  };
  // A dropout rate of the file's (0: none); torch's nn.Dropout refuses a rate outside [0, 1], and 1 drops everything.
  const dropoutRate = (field: string): number => {
    const value = given(field) ?? 0;
    if (typeof value !== "number" || !(value >= 0 && value < 1)) return fail(field, `must be a number in [0, 1), got ${JSON.stringify(value)}`);
    return value;
  };
  if (raw.use_bidirectional_attention === true) fail("use_bidirectional_attention", "true is not supported (causal attention only)");
  if (raw.router_jitter_noise !== undefined && raw.router_jitter_noise !== 0) {
    fail("router_jitter_noise", `${JSON.stringify(raw.router_jitter_noise)} is not supported (must be 0)`);
  }
  // GPT-2's variants: scores divided by the layer number (Mistral's GPT-2 runs), and scores upcast to float32 before
  // scaling, which changes bf16 rounding.
  for (const field of ["scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"]) {
    if (flag(field, false)) fail(field, "true is not supported");
  }
  // Keys read only in some files (max_window_layers where there are no layer_types, the interval where there are no
  // no_rope_layers, ...) are checked wherever they appear: a wrong one never lies dormant.
  for (const field of ["use_sliding_window", "use_bidirectional_attention"]) if (own[field] != null) flag(field, false);
  for (const field of ["no_rope_layer_interval", "original_max_position_embeddings", "sliding_window_pattern", "_sliding_window_pattern"]) {
    if (own[field] != null) integer(field);
  }
  for (const field of ["rope_theta", "rope_local_base_freq", "partial_rotary_factor"]) if (own[field] != null) number(field, 1);
  if (own.max_window_layers != null && !(Number.isInteger(own.max_window_layers) && (own.max_window_layers as number) >= 0)) {
    fail("max_window_layers", `must be a non-negative integer, got ${JSON.stringify(own.max_window_layers)}`);
  }

  const hiddenSize = integer("hidden_size");
  const numHeads = integer("num_attention_heads");
  const numKvHeads = integer("num_key_value_heads", numHeads);
  if (numHeads % numKvHeads !== 0) fail("num_key_value_heads", `(${numKvHeads}) must divide num_attention_heads (${numHeads})`);
  if ((own.head_dim ?? null) === null && family.defaultHeadDim === undefined && hiddenSize % numHeads !== 0) {
    fail(named("num_attention_heads"), `(${numHeads}) must divide ${named("hidden_size")} (${hiddenSize}) when head_dim is not given`);
  }
  const headDim = integer("head_dim", family.defaultHeadDim ?? hiddenSize / numHeads);
  const numLayers = integer("num_hidden_layers");
  const maxPositionEmbeddings = integer("max_position_embeddings", 32768);

  const activationName = given(family.activationField) ?? "silu";
  const activation = ACTIVATIONS[activationName as string];
  if (!activation) fail(family.activationField, `"${activationName}" is not supported (supported: ${Object.keys(ACTIVATIONS).join(", ")})`);

  const dtypeField = raw.dtype !== undefined ? "dtype" : "torch_dtype";
  const dtype = raw[dtypeField] ?? "float32";
  if (!DTYPES.has(dtype as string)) fail(dtypeField, `${JSON.stringify(dtype)} is not supported (supported: ${[...DTYPES].join(", ")})`);
  const implementation = raw.attn_implementation ?? raw._attn_implementation ?? null;
  if (implementation !== null && !Object.hasOwn(ATTENTION_KERNELS, implementation as string)) {
    fail("attn_implementation", `${JSON.stringify(implementation)} is not supported (supported: ${Object.keys(ATTENTION_KERNELS).join(", ")})`);
  }

  // Layer kinds: transformers 5 writes them; 4.x files imply them from the family's own fields.
  let kinds: LayerKind[];
  if (raw.layer_types !== undefined && raw.layer_types !== null) {
    const listed = raw.layer_types;
    if (!Array.isArray(listed) || listed.length !== numLayers) fail("layer_types", `must list one kind per layer (num_hidden_layers = ${numLayers})`);
    for (const kind of listed as unknown[]) {
      if (!LAYER_KINDS.has(kind as string)) fail("layer_types", `holds "${kind}", which is not supported (supported: ${[...LAYER_KINDS].join(", ")})`);
    }
    kinds = listed as LayerKind[];
  } else {
    kinds = family.layerKinds({ ...family.defaults, ...own }, numLayers);
  }
  // A family whose transformers code has no windows (Llama, OLMo 2) ignores the key, and so do we.
  const slidingWindow = family.fields.includes("sliding_window") ? (fileOrDefault("sliding_window") ?? null) : null;
  if (slidingWindow !== null && (!Number.isInteger(slidingWindow) || (slidingWindow as number) <= 0)) {
    fail("sliding_window", `must be a positive integer or null, got ${JSON.stringify(slidingWindow)}`);
  }
  // Qwen2 / Qwen3 / SmolLM3 window only when use_sliding_window is set, whatever layer_types says.
  const windowed = !family.fields.includes("use_sliding_window") || flag("use_sliding_window", false);
  const layerWindow = kinds.map((kind) => (kind === "sliding_attention" && windowed && slidingWindow !== null ? (slidingWindow as number) : 0));

  const rope = rotary
    ? ropeTables(type === "phi3" ? withPhi3RopeNames(own) : own, { fail, headDim, maxPositionEmbeddings, defaultTheta: family.defaultRopeTheta!, kinds })
    : { invFreq: [], attentionScaling: [], layerTable: Array<number>(numLayers).fill(-1), positionLimit: 0, positionLimitReason: "" };
  const layerRope = rope.layerTable.slice();
  if (type === "smollm3") {
    // no_rope_layers[i] = 1 where layer i uses rotary embeddings (transformers derives it from the interval).
    const interval = (raw.no_rope_layer_interval as number | undefined) ?? 4;
    const uses = (raw.no_rope_layers as number[] | undefined) ?? Array.from({ length: numLayers }, (_, i) => Number((i + 1) % interval !== 0));
    if (!Array.isArray(uses) || uses.length !== numLayers) fail("no_rope_layers", `must list one 0/1 per layer (${numLayers})`);
    uses.forEach((use, i) => {
      if (!use) layerRope[i] = -1;
    });
  }
  const scalar = (field: string): number => {
    const value = fileOrDefault(field);
    if (value === undefined || value === null) return 0;
    if (typeof value !== "number" || !(value > 0)) return fail(field, `must be a positive number or null, got ${JSON.stringify(value)}`);
    return value;
  };
  const gemma = type === "gemma2" || type === "gemma3_text";
  const queryScalar = gemma ? number("query_pre_attn_scalar", 256) : headDim;
  // GPT-2's scale_attn_weights: false leaves q·k unscaled.
  const attentionScale = gpt2 && !flag("scale_attn_weights", true) ? 1 : 1 / Math.sqrt(queryScalar);

  const moe: Moe = family.moe
    ? family.moe({ integer, flag, fail, raw }, numLayers)
    : { numExperts: 0, numExpertsPerTok: 0, moeIntermediateSize: 0, normTopkProb: false, mixtralNames: false, layerSparse: Array(numLayers).fill(0) };
  if (moe.numExpertsPerTok > moe.numExperts) fail("num_experts_per_tok", `(${moe.numExpertsPerTok}) exceeds the number of experts (${moe.numExperts})`);
  // With output_router_logits, transformers adds router_aux_loss_coef × the load-balancing loss to the LM loss.
  let lmRouterAuxCoef = 0;
  if (family.moe) {
    const coef = raw.router_aux_loss_coef ?? 0.001;
    if (typeof coef !== "number" || !Number.isFinite(coef) || coef < 0) fail("router_aux_loss_coef", `must be a non-negative number, got ${JSON.stringify(coef)}`);
    if (flag("output_router_logits", false)) {
      if (!moe.layerSparse.includes(1)) fail("output_router_logits", "is true but no layer is sparse: there is no router loss to add");
      lmRouterAuxCoef = coef as number;
    }
  }

  // transformers 5's Phi-3 reads resid_pdrop but not embd_pdrop (its model applies no embedding dropout), so that
  // field is validated and otherwise left unused, as there.
  const attentionDropout = dropoutRate(gpt2 ? "attn_pdrop" : "attention_dropout");
  const residualDropout = gpt2 || type === "phi3" ? dropoutRate("resid_pdrop") : 0;
  if (type === "phi3") dropoutRate("embd_pdrop");
  const embeddingDropout = gpt2 ? dropoutRate("embd_pdrop") : 0;

  const eosTokenIds = tokenIds(raw.eos_token_id);
  const pad = raw.pad_token_id;
  const bos = raw.bos_token_id;
  return {
    modelType: type,
    vocabSize: integer("vocab_size"),
    hiddenSize,
    intermediateSize: integer("intermediate_size", gpt2 ? 4 * hiddenSize : undefined),
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    rmsNormEps: number(family.normEpsField, 1e-6),
    tieWordEmbeddings: flag("tie_word_embeddings", gemma),
    ...family.biases(flag),
    qkNorm: family.qkNorm,
    norm: family.norm,
    normPlacement: family.normPlacement,
    activation: activation as Activation,
    fusedProjections: type === "phi3" || gpt2,
    gatedMlp: !gpt2,
    gpt2Layout: gpt2,
    learnedPositions: gpt2 ? maxPositionEmbeddings : 0,
    ...(gpt2
      ? { positionLimit: maxPositionEmbeddings, positionLimitReason: "n_positions, where GPT-2's learned position table ends" }
      : { positionLimit: rope.positionLimit, positionLimitReason: rope.positionLimitReason }),
    embedScale: gemma,
    attentionScale,
    attnSoftcap: scalar("attn_logit_softcapping"),
    finalSoftcap: scalar("final_logit_softcapping"),
    attention: implementation === null ? "auto" : ATTENTION_KERNELS[implementation as string],
    ropeInvFreq: rope.invFreq,
    ropeAttentionScaling: rope.attentionScaling,
    layerRope,
    layerWindow,
    ...moe,
    lmRouterAuxCoef,
    policyRouterAuxCoef: 0,
    attentionDropout,
    residualDropout,
    embeddingDropout,
    maxPositionEmbeddings,
    bosTokenId: Number.isInteger(bos) ? (bos as number) : null,
    eosTokenIds,
    padTokenId: Number.isInteger(pad) ? (pad as number) : null,
    dtype: dtype as ModelDtype,
    attnImplementation: implementation as string | null,
    raw,
  };
}

export interface DecoderShape {
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads?: number;
  headDim?: number;
  ropeTheta: number;
  rmsNormEps: number;
  tieWordEmbeddings: boolean;
}

/** The families whose configs buildConfigJson writes (GPT-2's fields have other names and no RoPE). */
export type RotaryModelType = Exclude<ModelType, "gpt2">;

/** A config.json object for a new model of the given family and shape, in transformers 5's layout. */
export function buildConfigJson(
  modelType: RotaryModelType,
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
    [FAMILIES[modelType].activationField]: FAMILIES[modelType].activationField === "hidden_activation" ? "gelu_pytorch_tanh" : "silu",
    max_position_embeddings: 4096,
    rms_norm_eps: shape.rmsNormEps,
    rope_parameters: { rope_type: "default", rope_theta: shape.ropeTheta },
    tie_word_embeddings: shape.tieWordEmbeddings,
    bos_token_id: tokens.bosTokenId,
    eos_token_id: tokens.eosTokenId,
    dtype: "float32",
    use_cache: true,
    ...extra,
  };
  if (tokens.padTokenId !== undefined && tokens.padTokenId !== null) config.pad_token_id = tokens.padTokenId;
  if (FAMILIES[modelType].defaultHeadDim !== undefined || shape.headDim !== undefined) {
    config.head_dim = shape.headDim ?? shape.hiddenSize / shape.numHeads;
  }
  if (FAMILIES[modelType].fields.includes("attention_bias")) config.attention_bias = false;
  return config;
}

/** Just the fields the native decoder reads: the config less the ids and metadata ModelConfig adds. */
export function decoderConfigOf(config: ModelConfig): DecoderConfig {
  const {
    modelType: _modelType, maxPositionEmbeddings: _maxPositionEmbeddings, bosTokenId: _bosTokenId, eosTokenIds: _eosTokenIds,
    padTokenId: _padTokenId, dtype: _dtype, attnImplementation: _attnImplementation, raw: _raw, ...decoder
  } = config;
  // Fails to compile when ModelConfig gains a field not left out above, which would otherwise reach the decoder.
  const nothingElse: Record<Exclude<keyof typeof decoder, keyof DecoderConfig>, never> = {};
  void nothingElse;
  return decoder;
}
