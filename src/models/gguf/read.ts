// GGUF files (llama.cpp's format) as model sources: the Hugging Face config, the weight plan and the tokenizer files a
// GGUF file's metadata and tensor table describe, built as transformers' own GGUF loading builds them
// (transformers/integrations/gguf, modeling_gguf_pytorch_utils.py). The file is read and dequantized natively
// (native/io/gguf.h); this side decides what each tensor is.
import type { GgufContents, GgufTensorSource, GgufValue } from "../../native/binding.js";
import { addon } from "../../native/loader.js";
import { byteAlphabet } from "../byte-alphabet.js";
import { ModelLoadError } from "../weights-check.js";
import { GGUF_GLOBAL_TENSORS, GGUF_LAYER_MODULES, GgufTokenType } from "./format.js";

/** Whether a model source names a GGUF file (by its extension, as llama.cpp and transformers tell them). */
export function isGgufPath(source: string): boolean {
  return source.toLowerCase().endsWith(".gguf");
}

/** A GGUF file's metadata and tensor table; a corrupt file is a ModelLoadError naming it and the key or tensor. */
export function readGguf(file: string): GgufContents {
  try {
    return addon().readGguf(file);
  } catch (error) {
    throw new ModelLoadError((error as Error).message, { cause: error });
  }
}

// How each architecture llama.cpp writes maps to a transformers model type: those transformers' GGUF loading reads
// too, so that each is checked against it (Mistral and SmolLM2 files are written as "llama"). `ffnNorm` is what llama.cpp's ffn_norm
// is in transformers' names; `permuteQK`: llama.cpp's converter permuted q/k rows (LlamaModel and its subclasses,
// reversed by transformers for "llama" files); `normOffset`: the converter stored norms as 1 + w (Gemma).
interface Architecture {
  modelType: string;
  hfClass: string;
  ffnNorm: "post_attention_layernorm" | "pre_feedforward_layernorm";
  permuteQK?: boolean;
  normOffset?: number;
  /** Config fields of this architecture's own, from its metadata. */
  extra?: (key: (name: string) => GgufValue | undefined) => Record<string, unknown>;
}

const gemmaExtra = (key: (name: string) => GgufValue | undefined) => ({
  hidden_activation: "gelu_pytorch_tanh",
  ...(key("attention.sliding_window") === undefined ? {} : { sliding_window: key("attention.sliding_window") }),
  ...(key("attn_logit_softcapping") === undefined ? {} : { attn_logit_softcapping: key("attn_logit_softcapping") }),
  ...(key("final_logit_softcapping") === undefined ? {} : { final_logit_softcapping: key("final_logit_softcapping") }),
});

const ARCHITECTURES: Record<string, Architecture> = {
  llama: { modelType: "llama", hfClass: "LlamaForCausalLM", ffnNorm: "post_attention_layernorm", permuteQK: true },
  qwen2: { modelType: "qwen2", hfClass: "Qwen2ForCausalLM", ffnNorm: "post_attention_layernorm" },
  qwen3: { modelType: "qwen3", hfClass: "Qwen3ForCausalLM", ffnNorm: "post_attention_layernorm" },
  phi3: { modelType: "phi3", hfClass: "Phi3ForCausalLM", ffnNorm: "post_attention_layernorm" },
  gemma2: { modelType: "gemma2", hfClass: "Gemma2ForCausalLM", ffnNorm: "pre_feedforward_layernorm", normOffset: -1, extra: gemmaExtra },
  // llama.cpp writes Gemma 3's global rotary base only; its sliding layers' base is fixed at 10000 there, as in
  // transformers' Gemma3TextConfig.
  gemma3: {
    modelType: "gemma3_text",
    hfClass: "Gemma3ForCausalLM",
    ffnNorm: "pre_feedforward_layernorm",
    normOffset: -1,
    extra: (key) => ({ ...gemmaExtra(key), rope_local_base_freq: 10000 }),
  },
};

/** The GGUF architectures comlrl loads. */
export const GGUF_ARCHITECTURES = Object.keys(ARCHITECTURES);

function architectureOf(gguf: GgufContents, file: string): [string, Architecture] {
  const name = gguf.metadata["general.architecture"];
  if (typeof name !== "string") throw new ModelLoadError(`${file}: metadata "general.architecture" is missing or not a string`);
  const architecture = ARCHITECTURES[name];
  if (architecture === undefined) {
    throw new ModelLoadError(`${file}: general.architecture "${name}" is not one comlrl loads from GGUF (${GGUF_ARCHITECTURES.join(", ")})`);
  }
  return [name, architecture];
}

function tensorShape(gguf: GgufContents, name: string): number[] | undefined {
  return gguf.tensors.find((t) => t.name === name)?.shape;
}

/** config.json as transformers rebuilds it from the metadata (the keys the config parser reads). */
export function ggufModelConfig(gguf: GgufContents, file: string): Record<string, unknown> {
  const [name, architecture] = architectureOf(gguf, file);
  const key = (suffix: string): GgufValue | undefined => gguf.metadata[`${name}.${suffix}`];
  const required = (suffix: string): number => {
    const value = key(suffix);
    if (typeof value !== "number") throw new ModelLoadError(`${file}: metadata "${name}.${suffix}" is missing or not a number`);
    return value;
  };
  const optional = (field: string, value: GgufValue | undefined) => (value === undefined ? {} : { [field]: value });
  if (key("rope.scaling.type") !== undefined && key("rope.scaling.type") !== "none") {
    throw new ModelLoadError(`${file}: metadata "${name}.rope.scaling.type" is "${String(key("rope.scaling.type"))}"; comlrl reads GGUF files without rope scaling only`);
  }
  for (const scaled of ["rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight"]) {
    if (tensorShape(gguf, scaled)) throw new ModelLoadError(`${file}: tensor "${scaled}" (rope scaling factors) is not supported in a GGUF file`);
  }
  const embedding = tensorShape(gguf, "token_embd.weight");
  if (embedding === undefined) throw new ModelLoadError(`${file}: has no tensor "token_embd.weight"`);
  const tokenId = (suffix: string) => gguf.metadata[`tokenizer.ggml.${suffix}`];
  return {
    architectures: [architecture.hfClass],
    model_type: architecture.modelType,
    hidden_size: required("embedding_length"),
    intermediate_size: required("feed_forward_length"),
    num_hidden_layers: required("block_count"),
    num_attention_heads: required("attention.head_count"),
    num_key_value_heads: key("attention.head_count_kv") ?? required("attention.head_count"),
    max_position_embeddings: required("context_length"),
    rms_norm_eps: required("attention.layer_norm_rms_epsilon"),
    rope_theta: key("rope.freq_base") ?? 10000,
    // llama.cpp writes a llama head's size as its rotary width (transformers reads it so), other families' as key_length.
    ...optional("head_dim", key("attention.key_length") ?? (name === "llama" ? key("rope.dimension_count") : undefined)),
    vocab_size: embedding[0],
    tie_word_embeddings: tensorShape(gguf, "output.weight") === undefined,
    ...(name === "llama" || name === "qwen3" ? { attention_bias: tensorShape(gguf, "blk.0.attn_q.bias") !== undefined } : {}),
    bos_token_id: tokenId("bos_token_id") ?? null,
    eos_token_id: tokenId("eos_token_id") ?? null,
    pad_token_id: tokenId("padding_token_id") ?? null,
    ...architecture.extra?.(key),
  };
}

// Per layer, beside the names every family shares: Phi-3's fused q/k/v and Gemma's extra norms.
const LAYER_TENSORS: Record<string, string> = {
  ...GGUF_LAYER_MODULES,
  attn_qkv: "self_attn.qkv_proj",
  post_attention_norm: "post_attention_layernorm",
  post_ffw_norm: "post_feedforward_layernorm",
};

/** Which GGUF tensor fills which parameter; a tensor with no place in the architecture is an error naming it. */
export function ggufWeightPlan(gguf: GgufContents, config: Record<string, unknown>, file: string): GgufTensorSource[] {
  const [name, architecture] = architectureOf(gguf, file);
  // Phi-3 keeps gate and up fused, as llama.cpp does.
  const layerTensors: Record<string, string> = { ...LAYER_TENSORS, ffn_norm: architecture.ffnNorm, ffn_up: name === "phi3" ? "mlp.gate_up_proj" : "mlp.up_proj" };
  return gguf.tensors.map(({ name: tensor }) => {
    let parameter = GGUF_GLOBAL_TENSORS[tensor];
    const layer = /^blk\.(\d+)\.([a-z_]+)\.(weight|bias)$/.exec(tensor);
    if (layer && layerTensors[layer[2]!] !== undefined) parameter = `model.layers.${layer[1]}.${layerTensors[layer[2]!]}.${layer[3]}`;
    if (parameter === undefined) throw new ModelLoadError(`${file}: tensor "${tensor}" has no place in a ${architecture.hfClass}`);
    const source: GgufTensorSource = { parameter, tensor };
    if (architecture.permuteQK && layer && (layer[2] === "attn_q" || layer[2] === "attn_k")) {
      source.permuteHeads = (layer[2] === "attn_q" ? config.num_attention_heads : config.num_key_value_heads) as number;
    }
    if (architecture.normOffset !== undefined && /norm\.weight$/.test(tensor)) source.offset = architecture.normOffset;
    return source;
  });
}

// Byte-level vocabularies' pre-tokenizer split for the llama.cpp pre-tokenizer names transformers knows the regex
// of (integrations/gguf/gguf_tokenizer_mapping.py); any other name keeps GPT-2's ByteLevel split.
const LLAMA3_SPLIT =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_SPLIT =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const PRE_TOKENIZER_SPLITS: Record<string, string> = {
  llama3: LLAMA3_SPLIT,
  "llama-v3": LLAMA3_SPLIT,
  "llama-bpe": LLAMA3_SPLIT,
  "smaug-bpe": LLAMA3_SPLIT,
  dbrx: LLAMA3_SPLIT,
  qwen2: QWEN2_SPLIT,
  "deepseek-r1-qwen": QWEN2_SPLIT,
};

function stringList(gguf: GgufContents, key: string, file: string, optional = false): string[] | undefined {
  const value = gguf.metadata[key];
  if (value === undefined && optional) return undefined;
  if (!Array.isArray(value) || value.some((v) => typeof v !== "string")) throw new ModelLoadError(`${file}: metadata "${key}" is missing or not a list of strings`);
  return value as string[];
}

function numberList(gguf: GgufContents, key: string, file: string): number[] | undefined {
  const value = gguf.metadata[key];
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.some((v) => typeof v !== "number")) throw new ModelLoadError(`${file}: metadata "${key}" is not a list of numbers`);
  return value as number[];
}

/** A vocabulary's BPE model, pre-tokenizer and decoder, as transformers' tokenizer class for it builds them. */
interface VocabularyModel {
  model: Record<string, unknown>;
  preTokenizer: Record<string, unknown>;
  decoder: Record<string, unknown>;
  /** Whether a token the file marks as control may be added as special (byte-level: only if spelled in its alphabet). */
  specialAllowed: (token: string) => boolean;
}

/** Byte-level BPE ("gpt2" vocabularies) as transformers' GPT2Tokenizer, with the pre-tokenizer split of `tokenizer.ggml.pre`. */
function byteLevelModel(gguf: GgufContents, tokens: string[], file: string): VocabularyModel {
  const { byteToChar } = byteAlphabet();
  const alphabet = new Set(byteToChar);
  const spelled = (token: string) => [...token].every((c) => alphabet.has(c));
  const encoder = new TextEncoder();
  const vocab: Record<string, number> = {};
  tokens.forEach((token, id) => {
    vocab[spelled(token) ? token : Array.from(encoder.encode(token), (b) => byteToChar[b]).join("")] = id;
  });
  const split = PRE_TOKENIZER_SPLITS[String(gguf.metadata["tokenizer.ggml.pre"])];
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: split === undefined };
  return {
    model: {
      type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, ignore_merges: false,
      vocab,
      merges: stringList(gguf, "tokenizer.ggml.merges", file, true) ?? [],
    },
    preTokenizer: split === undefined ? byteLevel : { type: "Sequence", pretokenizers: [{ type: "Split", pattern: { Regex: split }, behavior: "Isolated", invert: false }, byteLevel] },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    // A control token outside the byte alphabet is a llama.cpp mislabel that transformers skips.
    specialAllowed: spelled,
  };
}

/**
 * The merges a SentencePiece vocabulary implies, as transformers' generate_merges derives them from the scores: every
 * split of a piece into two pieces of the vocabulary (by the pieces' ids), all ordered by the whole piece's score,
 * then the lengths of its parts, highest first; ties keep that order.
 */
function mergesFromScores(tokens: string[], scores: number[]): [string, string][] {
  const vocab = new Map<string, number>();
  const scoreOf = new Map<string, number>();
  tokens.forEach((token, id) => {
    vocab.set(token, id);
    scoreOf.set(token, scores[id]!);
  });
  const merges: { left: string; right: string; score: number }[] = [];
  for (const [merge, score] of scoreOf) {
    const chars = Array.from(merge);
    const local: { left: string; right: string; score: number }[] = [];
    for (let i = 1; i < chars.length; i++) {
      const left = chars.slice(0, i).join("");
      const right = chars.slice(i).join("");
      if (vocab.has(left) && vocab.has(right)) local.push({ left, right, score });
    }
    local.sort((a, b) => vocab.get(a.left)! - vocab.get(b.left)! || vocab.get(a.right)! - vocab.get(b.right)!);
    merges.push(...local);
  }
  const length = (text: string) => Array.from(text).length;
  merges.sort((a, b) => b.score - a.score || length(b.left) - length(a.left) || length(b.right) - length(a.right));
  return merges.map(({ left, right }) => [left, right]);
}

/** SentencePiece BPE ("llama" vocabularies: Llama 2, Mistral v0.1) as transformers' LlamaTokenizer: ▁ for spaces, byte fallback. */
function sentencePieceModel(gguf: GgufContents, tokens: string[], file: string): VocabularyModel {
  const architecture = String(gguf.metadata["general.architecture"]);
  // transformers builds Gemma's and Phi-3's SentencePiece vocabularies otherwise (respelled pieces, a normalizer).
  if (["gemma", "gemma2", "gemma3", "phi3"].includes(architecture)) {
    throw new ModelLoadError(`${file}: the SentencePiece tokenizer of a ${architecture} GGUF file is not built yet; load the tokenizer from the model's Hugging Face repository`);
  }
  const merges = stringList(gguf, "tokenizer.ggml.merges", file, true)?.map((merge) => merge.split(" ") as [string, string]);
  const scores = numberList(gguf, "tokenizer.ggml.scores", file);
  if (merges === undefined && (scores === undefined || scores.length !== tokens.length)) {
    throw new ModelLoadError(`${file}: a SentencePiece vocabulary needs tokenizer.ggml.merges, or tokenizer.ggml.scores with one score per token`);
  }
  return {
    model: {
      type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false,
      vocab: Object.fromEntries(tokens.map((token, id) => [token, id])),
      merges: merges ?? mergesFromScores(tokens, scores!),
    },
    preTokenizer: { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: false },
    decoder: {
      type: "Sequence",
      decoders: [{ type: "Replace", pattern: { String: "\u2581" }, content: " " }, { type: "ByteFallback" }, { type: "Fuse" }, { type: "Strip", content: " ", start: 1, stop: 0 }],
    },
    specialAllowed: () => true,
  };
}

/**
 * tokenizer.json and tokenizer_config.json as transformers builds them from the file's `tokenizer.ggml.*` metadata
 * and `tokenizer.chat_template`: byte-level BPE ("gpt2" vocabularies) with the file's merges, or SentencePiece BPE
 * ("llama" vocabularies) with its merges or those its scores imply; its control tokens and the BOS / EOS / unknown /
 * pad tokens it names special, its user-defined tokens added, and BOS / EOS added as add_bos_token / add_eos_token
 * say (BOS by default for SentencePiece, as llama.cpp does).
 */
export function ggufTokenizerFiles(gguf: GgufContents, file: string): { tokenizerJson: Record<string, unknown>; tokenizerConfig: Record<string, unknown> } {
  const kind = gguf.metadata["tokenizer.ggml.model"];
  if (kind !== "gpt2" && kind !== "llama") {
    throw new ModelLoadError(`${file}: tokenizer.ggml.model "${String(kind)}" is not supported; comlrl builds byte-level BPE ("gpt2") and SentencePiece ("llama") tokenizers from GGUF files`);
  }
  const tokens = stringList(gguf, "tokenizer.ggml.tokens", file)!;
  const vocabulary = kind === "gpt2" ? byteLevelModel(gguf, tokens, file) : sentencePieceModel(gguf, tokens, file);
  const tokenTypes = numberList(gguf, "tokenizer.ggml.token_type", file) ?? [];
  const tokenById = (key: string): string | null => {
    const id = gguf.metadata[`tokenizer.ggml.${key}`];
    if (id === undefined) return null;
    if (typeof id !== "number" || tokens[id] === undefined) throw new ModelLoadError(`${file}: metadata "tokenizer.ggml.${key}" = ${JSON.stringify(id)} is not a token id`);
    return tokens[id]!;
  };
  const roles = { bos_token: tokenById("bos_token_id"), eos_token: tokenById("eos_token_id"), unk_token: tokenById("unknown_token_id"), pad_token: tokenById("padding_token_id") };
  const named = new Set(Object.values(roles).filter((token): token is string => token !== null));
  const added: Record<string, unknown>[] = [];
  tokens.forEach((token, id) => {
    const special = (tokenTypes[id] === GgufTokenType.CONTROL && vocabulary.specialAllowed(token)) || named.has(token);
    if (special || tokenTypes[id] === GgufTokenType.USER_DEFINED) added.push({ id, content: token, single_word: false, lstrip: false, rstrip: false, normalized: false, special });
  });
  const flag = (key: string, fallback: boolean) => (typeof gguf.metadata[key] === "boolean" ? (gguf.metadata[key] as boolean) : fallback);
  const addBos = flag("tokenizer.ggml.add_bos_token", kind === "llama") && roles.bos_token !== null;
  const addEos = flag("tokenizer.ggml.add_eos_token", false) && roles.eos_token !== null;
  const tokenIds = (token: string) => ({ id: token, ids: [tokens.indexOf(token)], tokens: [token] });
  const special = (token: string | null, typeId: number) => (token === null ? [] : [{ SpecialToken: { id: token, type_id: typeId } }]);
  const bos = addBos ? roles.bos_token : null;
  const eos = addEos ? roles.eos_token : null;
  const tokenizerJson = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: vocabulary.preTokenizer,
    post_processor: {
      type: "TemplateProcessing",
      single: [...special(bos, 0), { Sequence: { id: "A", type_id: 0 } }, ...special(eos, 0)],
      pair: [...special(bos, 0), { Sequence: { id: "A", type_id: 0 } }, ...special(eos, 0), ...special(bos, 1), { Sequence: { id: "B", type_id: 1 } }, ...special(eos, 1)],
      special_tokens: Object.fromEntries([bos, eos].filter((token): token is string => token !== null).map((token) => [token, tokenIds(token)])),
    },
    decoder: vocabulary.decoder,
    model: vocabulary.model,
  };
  const chatTemplate = gguf.metadata["tokenizer.chat_template"];
  const tokenizerConfig: Record<string, unknown> = {
    ...roles,
    add_bos_token: addBos,
    add_eos_token: addEos,
    ...(typeof chatTemplate === "string" ? { chat_template: chatTemplate } : {}),
  };
  return { tokenizerJson, tokenizerConfig };
}
