// A Hugging Face model directory (config.json, safetensors, tokenizer.json) as one GGUF file that llama.cpp runs, as
// llama.cpp's convert_hf_to_gguf.py writes it: the architecture's hyper-parameters under llama.cpp's key names, the
// tensors under llama.cpp's names (Llama's q/k rows permuted to its interleaved rotary layout), 1-D tensors in F32 and
// 2-D ones in the chosen type, the byte-level BPE tokenizer as tokenizer.ggml.* and the chat template.
import { closeSync, openSync, readFileSync, readSync } from "node:fs";
import path from "node:path";
import { parseModelConfig, type ModelConfig, type ModelType } from "../config.js";
import { ComlrlTokenizer } from "../tokenizer.js";
import { readSafetensorsHeader, type HeaderTensor } from "../weights-check.js";
import { weightFiles } from "../model-files.js";
import { encodeTensor } from "./encode.js";
import { GGML_QUANTIZATION_VERSION, GGUF_GLOBAL_TENSORS, GGUF_LAYER_MODULES, GgufTokenType, LlamaFileType, Q8_0_BLOCK, type GgmlTypeName } from "./format.js";
import { writeGguf, type GgufTensor, type GgufValue } from "./writer.js";

/** The type of a GGUF file's 2-D weights (1-D norms and biases stay F32, as llama.cpp keeps them). */
import type { GgufDtype } from "../../components/registry.js";

export type { GgufDtype };

/** How exportGguf writes the file. */
export interface GgufExportOptions {
  /** The 2-D weights' type (default "f16"); q8_0 leaves a weight whose rows are not a multiple of 32 in F16, as llama.cpp's converter does. */
  dtype?: GgufDtype;
  /** general.name (default: the file's name without .gguf). */
  name?: string;
}

/** A model that cannot be written as GGUF (a family, setting or tokenizer llama.cpp would run differently). */
export class GgufExportError extends Error {
  /** Always "GgufExportError". */
  override name = "GgufExportError";
}

/** The families exportGguf writes, with llama.cpp's architecture name for each. */
export const GGUF_EXPORT_ARCHITECTURES: Readonly<Partial<Record<ModelType, string>>> = {
  qwen2: "qwen2",
  qwen3: "qwen3",
  llama: "llama",
  mistral: "llama",
};

/** llama.cpp's llama architecture applies rotary embeddings to interleaved pairs; convert_hf_to_gguf.py permutes HF's
 * half-split q and k rows into that order. Its other architectures here rotate halves as HF does. */
const PERMUTED_ARCHITECTURES = new Set(["llama"]);

const DTYPE_TYPES: Record<GgufDtype, GgmlTypeName> = { f16: "F16", bf16: "BF16", q8_0: "Q8_0" };
const FILE_TYPES: Record<GgufDtype, number> = { f16: LlamaFileType.MOSTLY_F16, bf16: LlamaFileType.MOSTLY_BF16, q8_0: LlamaFileType.MOSTLY_Q8_0 };

const uint32 = (value: number): GgufValue => ({ type: "uint32", value });
const float32 = (value: number): GgufValue => ({ type: "float32", value });
const text = (value: string): GgufValue => ({ type: "string", value });

function readJsonFile(file: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new GgufExportError(`${file}: cannot read it as JSON (${(error as Error).message})`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new GgufExportError(`${file}: not a JSON object`);
  return parsed as Record<string, unknown>;
}

/** rope_theta as transformers 5 (rope_parameters) or 4.x (rope_theta) writes it. */
function ropeTheta(raw: Record<string, unknown>): number {
  const parameters = raw.rope_parameters as Record<string, unknown> | undefined;
  const theta = parameters?.rope_theta ?? raw.rope_theta ?? 10000;
  return theta as number;
}

/** Refuses what llama.cpp's architecture for this family would compute otherwise, naming the config field. */
function checkExportable(config: ModelConfig, configFile: string): string {
  const architecture = GGUF_EXPORT_ARCHITECTURES[config.modelType];
  const refuse = (what: string): never => {
    throw new GgufExportError(`${configFile}: ${what}, which the GGUF export does not write (llama.cpp's ${architecture ?? config.modelType} would run it differently)`);
  };
  if (architecture === undefined) {
    throw new GgufExportError(`${configFile}: model_type "${config.modelType}" has no GGUF export (supported: ${Object.keys(GGUF_EXPORT_ARCHITECTURES).join(", ")})`);
  }
  if (config.layerWindow.some((window) => window > 0)) refuse("sliding_window attention is on");
  if (config.numExperts > 0) refuse("it has mixture-of-experts layers");
  if (config.oBias || config.mlpBias) refuse("attention output or MLP biases are set (attention_bias / mlp_bias)");
  if (config.modelType === "qwen2" && !config.qkvBias) refuse("qwen2 without q/k/v biases");
  const theta = ropeTheta(config.raw);
  const invFreq = config.ropeInvFreq[0] ?? [];
  const rotaryDims = invFreq.length * 2;
  const plainRope =
    config.ropeInvFreq.length === 1 &&
    config.ropeAttentionScaling[0] === 1 &&
    rotaryDims === config.headDim &&
    invFreq.every((f, i) => Math.abs(f - 1 / theta ** ((2 * i) / rotaryDims)) <= 1e-6 * f);
  if (!plainRope) refuse("its rotary embedding is scaled or partial (rope_scaling / rope_parameters / partial_rotary_factor)");
  return architecture;
}

/** The architecture's hyper-parameters under llama.cpp's key names (LLM_KV_* in llama-arch.cpp). */
function architectureMetadata(architecture: string, config: ModelConfig): [string, GgufValue][] {
  const key = (name: string) => `${architecture}.${name}`;
  return [
    [key("vocab_size"), uint32(config.vocabSize)],
    [key("context_length"), uint32(config.maxPositionEmbeddings)],
    [key("embedding_length"), uint32(config.hiddenSize)],
    [key("block_count"), uint32(config.numLayers)],
    [key("feed_forward_length"), uint32(config.intermediateSize)],
    [key("attention.head_count"), uint32(config.numHeads)],
    [key("attention.head_count_kv"), uint32(config.numKvHeads)],
    [key("attention.key_length"), uint32(config.headDim)],
    [key("attention.value_length"), uint32(config.headDim)],
    [key("attention.layer_norm_rms_epsilon"), float32(config.rmsNormEps)],
    [key("rope.dimension_count"), uint32(config.headDim)],
    [key("rope.freq_base"), float32(ropeTheta(config.raw))],
  ];
}

/**
 * llama.cpp's pre-tokenizer name (tokenizer.ggml.pre) for the split a byte-level BPE tokenizer.json does before its
 * merges: the patterns its LLAMA_VOCAB_PRE_TYPE_* entries reproduce.
 */
const SPLIT_PATTERNS: Record<string, string> = {
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "qwen2",
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "llama-bpe",
};

function preTokenizerName(preTokenizer: unknown, where: string): string {
  const node = (preTokenizer ?? {}) as Record<string, unknown>;
  const byteLevel = (step: unknown, useRegex: boolean) => {
    const s = step as Record<string, unknown> | undefined;
    return s?.type === "ByteLevel" && s.add_prefix_space !== true && (s.use_regex ?? true) === useRegex;
  };
  // GPT-2's own regex, built into the ByteLevel step.
  if (byteLevel(node, true)) return "gpt-2";
  const steps = node.type === "Sequence" && Array.isArray(node.pretokenizers) ? (node.pretokenizers as Record<string, unknown>[]) : [];
  if (steps.length === 2 && steps[0]?.type === "Digits" && steps[0].individual_digits === true && byteLevel(steps[1], true)) return "smollm";
  const split = steps[0];
  const pattern = (split?.pattern as Record<string, unknown> | undefined)?.Regex;
  if (steps.length === 2 && split?.type === "Split" && split.behavior === "Isolated" && typeof pattern === "string" && byteLevel(steps[1], false)) {
    const name = SPLIT_PATTERNS[pattern];
    if (name !== undefined) return name;
  }
  throw new GgufExportError(
    `${where}: pre_tokenizer ${JSON.stringify(preTokenizer).slice(0, 200)} is not one llama.cpp reproduces here (GPT-2's ByteLevel, SmolLM's digits + ByteLevel, or Qwen2's / Llama 3's split)`,
  );
}

/** tokenizer.ggml.* and the chat template for a byte-level BPE tokenizer.json, over the model's vocab_size ids. */
async function tokenizerMetadata(dir: string, vocabSize: number): Promise<[string, GgufValue][]> {
  const tokenizerFile = path.join(dir, "tokenizer.json");
  const tokenizerJson = readJsonFile(tokenizerFile);
  const model = (tokenizerJson.model ?? {}) as Record<string, unknown>;
  if (model.type !== "BPE" || (tokenizerJson.decoder as Record<string, unknown> | null)?.type !== "ByteLevel") {
    throw new GgufExportError(`${tokenizerFile}: only byte-level BPE tokenizers (model.type "BPE", a ByteLevel decoder) are written as GGUF, this one is model.type ${JSON.stringify(model.type)}`);
  }
  const pre = preTokenizerName(tokenizerJson.pre_tokenizer, tokenizerFile);
  const tokens = new Array<string | undefined>(vocabSize);
  const types = new Int32Array(vocabSize);
  const place = (id: unknown, token: string, type: number, what: string) => {
    if (!Number.isInteger(id) || (id as number) < 0 || (id as number) >= vocabSize) {
      throw new GgufExportError(`${tokenizerFile}: ${what} ${JSON.stringify(token)} has id ${JSON.stringify(id)}, outside the model's ${vocabSize} embedding rows`);
    }
    tokens[id as number] = token;
    types[id as number] = type;
  };
  for (const [token, id] of Object.entries((model.vocab ?? {}) as Record<string, unknown>)) place(id, token, GgufTokenType.NORMAL, "token");
  for (const added of (tokenizerJson.added_tokens ?? []) as Record<string, unknown>[]) {
    place(added.id, String(added.content), added.special === true ? GgufTokenType.CONTROL : GgufTokenType.USER_DEFINED, "added token");
  }
  // Embedding rows past the tokenizer (Qwen pads its table) get placeholder tokens, as convert_hf_to_gguf.py names them.
  for (let id = 0; id < vocabSize; id++) {
    if (tokens[id] === undefined) {
      tokens[id] = `[PAD${id}]`;
      types[id] = GgufTokenType.UNUSED;
    }
  }
  const merges = ((model.merges ?? []) as unknown[]).map((merge) => (Array.isArray(merge) ? merge.join(" ") : String(merge)));
  const tokenizer = await ComlrlTokenizer.fromDirectory(dir);
  const probe = tokenizer.encode("a", { addSpecialTokens: true });
  const addsBos = tokenizer.bosTokenId !== null && probe[0] === tokenizer.bosTokenId;
  const metadata: [string, GgufValue][] = [
    ["tokenizer.ggml.model", text("gpt2")],
    ["tokenizer.ggml.pre", text(pre)],
    ["tokenizer.ggml.tokens", { type: "string[]", value: tokens as string[] }],
    ["tokenizer.ggml.token_type", { type: "int32[]", value: types }],
    ["tokenizer.ggml.merges", { type: "string[]", value: merges }],
  ];
  if (tokenizer.bosTokenId !== null) metadata.push(["tokenizer.ggml.bos_token_id", uint32(tokenizer.bosTokenId)]);
  if (tokenizer.eosTokenIds[0] !== undefined) metadata.push(["tokenizer.ggml.eos_token_id", uint32(tokenizer.eosTokenIds[0])]);
  metadata.push(["tokenizer.ggml.padding_token_id", uint32(tokenizer.padTokenId)]);
  metadata.push(["tokenizer.ggml.add_bos_token", { type: "bool", value: addsBos }]);
  if (tokenizer.chatTemplateSource !== null) metadata.push(["tokenizer.chat_template", text(tokenizer.chatTemplateSource)]);
  return metadata;
}

/** transformers' module inside a decoder layer → llama.cpp's name, for the llama family the export writes. */
const LAYER_NAMES: Record<string, string> = Object.fromEntries(
  Object.entries({ ...GGUF_LAYER_MODULES, ffn_norm: "post_attention_layernorm", ffn_up: "mlp.up_proj" }).map(([gguf, hf]) => [hf, gguf]),
);
/** Only the q, k and v projections may carry a bias llama.cpp reads. */
const BIASED_MODULES = new Set(["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"]);
const OUTER_NAMES: Record<string, string> = Object.fromEntries(Object.entries(GGUF_GLOBAL_TENSORS).map(([gguf, hf]) => [hf, gguf]));

/** llama.cpp's name for an HF tensor, or null for one it has no use for (a tied LM head). */
function ggufTensorName(name: string, config: ModelConfig, file: string): string | null {
  if (name === "lm_head.weight" && config.tieWordEmbeddings) return null;
  const outer = OUTER_NAMES[name];
  if (outer !== undefined) return outer;
  const layer = /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/.exec(name);
  const inner = layer ? LAYER_NAMES[layer[2]!] : undefined;
  if (layer && inner !== undefined && (layer[3] === "weight" || BIASED_MODULES.has(layer[2]!))) return `blk.${layer[1]}.${inner}.${layer[3]}`;
  throw new GgufExportError(`${file}: tensor ${name} has no llama.cpp name in the GGUF export`);
}

/** A safetensors tensor's values as float32. */
function readFloat32(file: string, tensor: HeaderTensor, name: string): Float32Array {
  if (!["F32", "F16", "BF16"].includes(tensor.dtype)) throw new GgufExportError(`${file}: tensor ${name} is ${tensor.dtype}; the GGUF export reads F32, F16 and BF16 weights`);
  // Buffer.alloc never hands out a slice of its shared pool, so the typed views below start aligned.
  const bytes = Buffer.alloc(tensor.bytes);
  const fd = openSync(file, "r");
  try {
    if (readSync(fd, bytes, 0, bytes.length, tensor.fileOffset) !== bytes.length) throw new GgufExportError(`${file}: tensor ${name} could not be read whole`);
  } finally {
    closeSync(fd);
  }
  if (tensor.dtype === "F32") return new Float32Array(bytes.buffer, bytes.byteOffset, tensor.bytes / 4);
  const halves = new Uint16Array(bytes.buffer, bytes.byteOffset, tensor.bytes / 2);
  const out = new Float32Array(halves.length);
  if (tensor.dtype === "BF16") {
    const widened = new Uint32Array(out.buffer);
    for (let i = 0; i < halves.length; i++) widened[i] = halves[i]! << 16;
  } else {
    for (let i = 0; i < halves.length; i++) out[i] = float16Value(halves[i]!);
  }
  return out;
}

function float16Value(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa === 0 ? sign * Infinity : Number.NaN;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/**
 * convert_hf_to_gguf.py's LlamaModel.permute: within each of `heads` heads, row i·(d/2) + j (i ∈ {0, 1}) moves to
 * row 2j + i, turning HF's rotate-halves layout into llama.cpp's interleaved pairs. Works on weights and biases.
 */
export function permuteRotaryRows(values: Float32Array, rows: number, heads: number): Float32Array {
  const columns = values.length / rows;
  const headRows = rows / heads;
  const half = headRows / 2;
  const out = new Float32Array(values.length);
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < 2; i++) {
      for (let j = 0; j < half; j++) {
        const from = (h * headRows + i * half + j) * columns;
        const to = (h * headRows + 2 * j + i) * columns;
        out.set(values.subarray(from, from + columns), to);
      }
    }
  }
  return out;
}

/** What exportGguf wrote. */
export interface GgufExportSummary {
  /** The file written. */
  file: string;
  /** llama.cpp's architecture name (general.architecture). */
  architecture: string;
  /** Each tensor's GGUF name and type, in file order. */
  tensors: {
    /** llama.cpp's name (blk.0.attn_q.weight). */
    name: string;
    /** The ggml type it is stored in. */
    type: GgmlTypeName;
    /** Its shape as torch gives it (outermost first). */
    shape: number[];
  }[];
}

/** Writes the HF model directory `dir` as the GGUF file `file` (atomically: complete or absent), for llama.cpp. */
export async function exportGguf(dir: string, file: string, options: GgufExportOptions = {}): Promise<GgufExportSummary> {
  const dtype = options.dtype ?? "f16";
  if (!Object.hasOwn(DTYPE_TYPES, dtype)) throw new GgufExportError(`GGUF dtype must be one of ${Object.keys(DTYPE_TYPES).join(", ")}, got ${JSON.stringify(dtype)}`);
  const configFile = path.join(dir, "config.json");
  const config = parseModelConfig(readJsonFile(configFile), configFile);
  const architecture = checkExportable(config, configFile);
  const permuted = PERMUTED_ARCHITECTURES.has(architecture);

  const tensors: GgufTensor[] = [];
  for (const weights of weightFiles(dir)) {
    for (const [name, header] of readSafetensorsHeader(weights).tensors) {
      const ggufName = ggufTensorName(name, config, weights);
      if (ggufName === null) continue;
      const shape = header.shape;
      const rowLength = shape[shape.length - 1]!;
      const type: GgmlTypeName = shape.length < 2 ? "F32" : dtype === "q8_0" && rowLength % Q8_0_BLOCK !== 0 ? "F16" : DTYPE_TYPES[dtype];
      const heads = ggufName.includes(".attn_q.") ? config.numHeads : ggufName.includes(".attn_k.") ? config.numKvHeads : 0;
      tensors.push({
        name: ggufName,
        shape,
        type,
        data: async () => {
          const values = readFloat32(weights, header, name);
          return encodeTensor(permuted && heads > 0 ? permuteRotaryRows(values, shape[0]!, heads) : values, type);
        },
      });
    }
  }
  // The order of llama.cpp's own files: the embedding, the layers in order, then the final norm and the LM head.
  const rank = (name: string) => (name.startsWith("token_embd") ? -1 : name.startsWith("blk.") ? Number(name.split(".")[1]) : config.numLayers + (name.startsWith("output.") ? 1 : 0));
  tensors.sort((a, b) => rank(a.name) - rank(b.name) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

  const metadata: [string, GgufValue][] = [
    ["general.architecture", text(architecture)],
    ["general.type", text("model")],
    ["general.name", text(options.name ?? path.basename(file).replace(/\.gguf$/i, ""))],
    ["general.file_type", uint32(FILE_TYPES[dtype])],
    ["general.quantization_version", uint32(GGML_QUANTIZATION_VERSION)],
    ...architectureMetadata(architecture, config),
    ...(await tokenizerMetadata(dir, config.vocabSize)),
  ];
  await writeGguf(file, metadata, tensors);
  return { file, architecture, tensors: tensors.map(({ name, type, shape }) => ({ name, type, shape: [...shape] })) };
}
