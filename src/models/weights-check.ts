// A config.json checked against its weights before anything is allocated for it: every tensor the config implies
// must be in the safetensors headers with that shape and a floating-point dtype, the headers must fit their files,
// and a model built from a config alone must fit the machine. Only the headers are read (8-byte length, bounded JSON),
// so a config that describes gigabytes over a file of kilobytes fails by name in milliseconds.
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { totalmem } from "node:os";
import type { ModelConfig } from "./config.js";

/** A model directory that cannot be loaded: the message names the file (and tensor or field) at fault. */
export class ModelLoadError extends Error {
  /** Always "ModelLoadError". */
  override name = "ModelLoadError";
}

/** The Python safetensors library's limit on a header: a longer one is refused there too. */
const SAFETENSORS_MAX_HEADER_BYTES = 100_000_000;
/** A header nests three deep (tensor → entry → shape); past this it is not a safetensors header. */
const MAX_HEADER_DEPTH = 16;
/** config.json nests at most a few levels (rope_parameters by layer kind); past this it is not a model's. */
export const MAX_JSON_DEPTH = 64;

const ELEMENT_BYTES: Record<string, number> = { BOOL: 1, U8: 1, I8: 1, I16: 2, F16: 2, BF16: 2, I32: 4, F32: 4, F64: 8, I64: 8 };
const FLOAT_DTYPES = new Set(["F16", "BF16", "F32", "F64"]);

export interface HeaderTensor {
  dtype: string;
  shape: number[];
  /** Bytes in the data section. */
  bytes: number;
  /** Where its data starts, in bytes from the start of the file. */
  fileOffset: number;
}

export interface SafetensorsHeader {
  file: string;
  tensors: Map<string, HeaderTensor>;
}

/** How a value of a hostile header is shown in a message: never more than a short excerpt. */
function excerpt(value: unknown): string {
  const text = typeof value === "string" ? JSON.stringify(value) : Array.isArray(value) ? `[${value.slice(0, 8).map((v) => (typeof v === "number" ? v : typeof v)).join(", ")}${value.length > 8 ? ", …" : ""}]` : typeof value;
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

/** The deepest nesting of JSON brackets outside strings, stopping once past `limit`. */
export function nestingDepth(text: string, limit: number): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}

/** A safetensors file's header, validated against the file's size: every tensor's bytes lie inside it. */
export function readSafetensorsHeader(file: string): SafetensorsHeader {
  const fail = (problem: string): never => {
    throw new ModelLoadError(`${file}: ${problem}`);
  };
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (error) {
    return fail(`cannot open (${(error as Error).message})`);
  }
  let text: string;
  let dataBytes: number;
  let dataStart: number;
  try {
    const size = fstatSync(fd).size;
    if (size < 8) fail(`truncated: ${size} bytes, shorter than the 8-byte header length`);
    const prefix = Buffer.alloc(8);
    readSync(fd, prefix, 0, 8, 0);
    const length = prefix.readBigUInt64LE(0);
    if (length > BigInt(size - 8)) fail(`truncated or corrupt: the header claims ${length} bytes but the file has ${size - 8} after the length`);
    if (length > BigInt(SAFETENSORS_MAX_HEADER_BYTES)) fail(`the header claims ${length} bytes, past the ${SAFETENSORS_MAX_HEADER_BYTES} the safetensors format allows`);
    const header = Buffer.alloc(Number(length));
    if (readSync(fd, header, 0, header.length, 8) !== header.length) fail("the header could not be read whole");
    text = header.toString("utf8");
    dataStart = 8 + header.length;
    dataBytes = size - dataStart;
  } finally {
    closeSync(fd);
  }
  if (nestingDepth(text, MAX_HEADER_DEPTH) > MAX_HEADER_DEPTH) fail(`the header nests deeper than ${MAX_HEADER_DEPTH} levels: not a safetensors header`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return fail(`the header is not valid JSON (${(error as Error).message})`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return fail("the header is not a JSON object");
  const tensors = new Map<string, HeaderTensor>();
  let claimed = 0;
  for (const [name, entry] of Object.entries(parsed as Record<string, unknown>)) {
    if (name === "__metadata__") continue;
    const where = `tensor ${excerpt(name)}`;
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) return fail(`${where} is not an object`);
    const { dtype, shape, data_offsets: offsets } = entry as Record<string, unknown>;
    if (typeof dtype !== "string" || !Object.hasOwn(ELEMENT_BYTES, dtype)) return fail(`${where} has an unsupported dtype ${excerpt(dtype)}`);
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) return fail(`${where} has an invalid shape ${excerpt(shape)}`);
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((o) => Number.isSafeInteger(o) && o >= 0) || offsets[1] < offsets[0]) {
      return fail(`${where} has invalid data_offsets ${excerpt(offsets)}`);
    }
    const bytes = offsets[1] - offsets[0];
    // Multiplied in BigInt: a hostile shape's product may pass 2^53.
    const expected = (shape as number[]).reduce((n, d) => n * BigInt(d), BigInt(ELEMENT_BYTES[dtype]!));
    if (BigInt(bytes) !== expected) return fail(`${where} data_offsets [${offsets[0]}, ${offsets[1]}] do not match its shape and dtype (${expected} bytes)`);
    if (offsets[1] > dataBytes) return fail(`truncated: ${where} ends at byte ${offsets[1]} of the data section, which has ${dataBytes}`);
    claimed += bytes;
    tensors.set(name, { dtype, shape: shape as number[], bytes, fileOffset: dataStart + offsets[0] });
  }
  // Tensors may not share bytes, so together they fit the data section (the native reader names the overlapping pair).
  if (claimed > dataBytes) fail(`its tensors claim ${claimed} bytes together but the data section has ${dataBytes}: tensors overlap`);
  return { file, tensors };
}

/** One tensor the config implies: its name, shape, and which config.json fields give each dimension. */
interface ExpectedTensor {
  name: string;
  shape: number[];
  dims: string[];
  /** The config.json field that makes this tensor exist, for a missing one (a layer or an expert). */
  because?: string;
}

type Dim = [size: number, field: string];

/** The config.json name of a field in this model's file (GPT-2 calls hidden_size n_embd, ...). */
function fieldNames(config: ModelConfig) {
  const gpt2 = config.gpt2Layout;
  const raw = config.raw;
  const experts = config.mixtralNames || raw.num_local_experts !== undefined ? "num_local_experts" : "num_experts";
  return {
    vocab: "vocab_size",
    hidden: gpt2 ? "n_embd" : "hidden_size",
    layers: gpt2 ? "n_layer" : "num_hidden_layers",
    inner: gpt2 ? "n_inner" : "intermediate_size",
    moeInner: config.mixtralNames ? "intermediate_size" : "moe_intermediate_size",
    experts,
    positions: gpt2 ? "n_positions" : "max_position_embeddings",
    q: `${gpt2 ? "n_head" : "num_attention_heads"} × head_dim`,
    kv: "num_key_value_heads × head_dim",
    headDim: "head_dim",
  };
}

/** The tensors of one dense layer (transformers' Linear, or GPT-2's Conv1D stored [in, out]). */
function dense(name: string, input: Dim, output: Dim, bias: boolean, conv1d = false): ExpectedTensor[] {
  const [first, second] = conv1d ? [input, output] : [output, input];
  const tensors = [{ name: `${name}.weight`, shape: [first[0], second[0]], dims: [first[1], second[1]] }];
  if (bias) tensors.push({ name: `${name}.bias`, shape: [output[0]], dims: [output[1]] });
  return tensors;
}

function norm(config: ModelConfig, name: string, dim: Dim): ExpectedTensor[] {
  const tensors = [{ name: `${name}.weight`, shape: [dim[0]], dims: [dim[1]] }];
  if (config.norm === "layer") tensors.push({ name: `${name}.bias`, shape: [dim[0]], dims: [dim[1]] });
  return tensors;
}

function mlp(config: ModelConfig, prefix: string, inner: Dim, names: readonly [string, string, string]): ExpectedTensor[] {
  const hidden: Dim = [config.hiddenSize, fieldNames(config).hidden];
  const conv1d = config.gpt2Layout;
  const bias = config.mlpBias;
  const input = !config.gatedMlp
    ? dense(`${prefix}.${names[1]}`, hidden, inner, bias, conv1d)
    : config.fusedProjections
      ? dense(`${prefix}.gate_up_proj`, hidden, [2 * inner[0], `2 × ${inner[1]}`], bias)
      : [...dense(`${prefix}.${names[0]}`, hidden, inner, bias), ...dense(`${prefix}.${names[1]}`, hidden, inner, bias)];
  return [...input, ...dense(`${prefix}.${names[2]}`, inner, hidden, bias, conv1d)];
}

const MLP_NAMES = ["gate_proj", "up_proj", "down_proj"] as const;
const MIXTRAL_EXPERT_NAMES = ["w1", "w3", "w2"] as const;
const GPT2_MLP_NAMES = ["", "c_fc", "c_proj"] as const;

/** Layer i's tensors but its experts'. */
function layerTensors(config: ModelConfig, i: number): ExpectedTensor[] {
  const f = fieldNames(config);
  const gpt2 = config.gpt2Layout;
  const prefix = layerPrefix(config, i);
  const hidden: Dim = [config.hiddenSize, f.hidden];
  const q: Dim = [config.numHeads * config.headDim, f.q];
  const kv: Dim = [config.numKvHeads * config.headDim, f.kv];
  const attn = `${prefix}.${gpt2 ? "attn" : "self_attn"}`;
  const tensors = config.fusedProjections
    ? dense(`${attn}.${gpt2 ? "c_attn" : "qkv_proj"}`, hidden, [q[0] + 2 * kv[0], `${f.q} + 2 × ${f.kv}`], config.qkvBias, gpt2)
    : [...dense(`${attn}.q_proj`, hidden, q, config.qkvBias), ...dense(`${attn}.k_proj`, hidden, kv, config.qkvBias), ...dense(`${attn}.v_proj`, hidden, kv, config.qkvBias)];
  tensors.push(...dense(`${attn}.${gpt2 ? "c_proj" : "o_proj"}`, q, hidden, config.oBias, gpt2));
  if (config.qkNorm !== "none") {
    const perHead: Dim = [config.headDim, f.headDim];
    tensors.push(...norm(config, `${attn}.q_norm`, config.qkNorm === "head" ? perHead : q), ...norm(config, `${attn}.k_norm`, config.qkNorm === "head" ? perHead : kv));
  }
  if (config.layerSparse[i]) tensors.push(...dense(`${moePrefix(config, i)}.gate`, hidden, [config.numExperts, f.experts], false));
  else tensors.push(...mlp(config, `${prefix}.mlp`, [config.intermediateSize, f.inner], gpt2 ? GPT2_MLP_NAMES : MLP_NAMES));
  if (config.normPlacement !== "post") tensors.push(...norm(config, `${prefix}.${gpt2 ? "ln_1" : "input_layernorm"}`, hidden));
  tensors.push(...norm(config, `${prefix}.${gpt2 ? "ln_2" : "post_attention_layernorm"}`, hidden));
  if (config.normPlacement === "sandwich") tensors.push(...norm(config, `${prefix}.pre_feedforward_layernorm`, hidden));
  if (config.normPlacement !== "pre") tensors.push(...norm(config, `${prefix}.post_feedforward_layernorm`, hidden));
  return tensors.map((t) => ({ ...t, because: `${f.layers} = ${config.numLayers}` }));
}

const layerPrefix = (config: ModelConfig, i: number) => (config.gpt2Layout ? `transformer.h.${i}` : `model.layers.${i}`);
const moePrefix = (config: ModelConfig, i: number) => `${layerPrefix(config, i)}.${config.mixtralNames ? "block_sparse_moe" : "mlp"}`;

/** Expert e of sparse layer i. */
function expertTensors(config: ModelConfig, i: number, e: number): ExpectedTensor[] {
  const f = fieldNames(config);
  const names = config.mixtralNames ? MIXTRAL_EXPERT_NAMES : MLP_NAMES;
  return mlp(config, `${moePrefix(config, i)}.experts.${e}`, [config.moeIntermediateSize, f.moeInner], names).map((t) => ({ ...t, because: `${f.experts} = ${config.numExperts}` }));
}

/** The tensors outside the layers: embeddings, final norm, an untied head. */
function outerTensors(config: ModelConfig): ExpectedTensor[] {
  const f = fieldNames(config);
  const gpt2 = config.gpt2Layout;
  const hidden: Dim = [config.hiddenSize, f.hidden];
  const vocab: Dim = [config.vocabSize, f.vocab];
  const tensors: ExpectedTensor[] = [{ name: gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight", shape: [vocab[0], hidden[0]], dims: [vocab[1], hidden[1]] }];
  if (config.learnedPositions > 0) tensors.push({ name: "transformer.wpe.weight", shape: [config.learnedPositions, hidden[0]], dims: [f.positions, hidden[1]] });
  tensors.push(...norm(config, gpt2 ? "transformer.ln_f" : "model.norm", hidden));
  if (!config.tieWordEmbeddings) tensors.push(...dense("lm_head", hidden, vocab, false));
  return tensors;
}

/** Every tensor the config implies, in order, one at a time (a hostile config may imply millions). */
function* expectedTensors(config: ModelConfig): Generator<ExpectedTensor> {
  yield* outerTensors(config);
  for (let i = 0; i < config.numLayers; i++) {
    yield* layerTensors(config, i);
    if (config.layerSparse[i]) for (let e = 0; e < config.numExperts; e++) yield* expertTensors(config, i, e);
  }
}

const elements = (tensors: ExpectedTensor[]) => tensors.reduce((n, t) => n + t.shape.reduce((m, d) => m * d, 1), 0);

/** Parameters of a model of this config, counted without listing every expert's tensors. */
export function parameterCount(config: ModelConfig): number {
  let count = elements(outerTensors(config));
  for (let i = 0; i < config.numLayers; i++) {
    count += elements(layerTensors(config, i));
    if (config.layerSparse[i]) count += config.numExperts * elements(expertTensors(config, i, 0));
  }
  return count;
}

/** The fields a model's size grows with, as config.json names them, for a message. */
function sizeFields(config: ModelConfig): string {
  const f = fieldNames(config);
  const fields: Array<[string, number]> = [[f.vocab, config.vocabSize], [f.hidden, config.hiddenSize], [f.inner, config.intermediateSize], [f.layers, config.numLayers]];
  if (config.numExperts > 0) fields.push([f.experts, config.numExperts], [f.moeInner, config.moeIntermediateSize]);
  return fields.map(([name, value]) => `${name} = ${value}`).join(", ");
}

const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(1)} GiB`;

/**
 * Refuses a model built from a config alone (CausalLM.create) whose weights cannot fit this machine: it is initialised
 * in float32 on the CPU whatever its device, so its parameters × 4 bytes must fit the machine's memory.
 */
export function checkModelFits(config: ModelConfig, file: string, memoryBytes = totalmem()): void {
  const parameters = parameterCount(config);
  const bytes = parameters * 4;
  if (bytes > memoryBytes) {
    throw new ModelLoadError(
      `${file}: ${sizeFields(config)} make ${parameters.toExponential(3)} parameters, ${gib(bytes)} in float32, more than this machine's ${gib(memoryBytes)} of memory`,
    );
  }
}

/** transformers ignores these in a checkpoint: rotary caches, a tied head, GPT-2's causal-mask buffers. */
function ignorable(config: ModelConfig, name: string): boolean {
  return (
    name.includes("rotary_emb.inv_freq") ||
    (name === "lm_head.weight" && config.tieWordEmbeddings) ||
    (config.gpt2Layout && (name.endsWith(".attn.bias") || name.endsWith(".attn.masked_bias")))
  );
}

/**
 * Checks config.json against the safetensors headers of its weight files before the model is allocated: every tensor
 * the config implies is present with its shape and a floating-point dtype, and no file holds a tensor the
 * architecture lacks. Errors name the tensor, the file and the config.json fields that give the expected shape.
 */
export function checkWeightsAgainstConfig(config: ModelConfig, configFile: string, files: string[]): void {
  const owner = new Map<string, { header: SafetensorsHeader; tensor: HeaderTensor }>();
  for (const file of files) {
    const header = readSafetensorsHeader(file);
    for (const [name, tensor] of header.tensors) owner.set(name, { header, tensor });
  }
  const where = files.length === 1 ? files[0] : "every shard";
  const used = new Set<string>();
  for (const expected of expectedTensors(config)) {
    // GPT-2 checkpoints saved from the base model name tensors without "transformer.".
    const stripped = config.gpt2Layout && expected.name.startsWith("transformer.") ? expected.name.slice("transformer.".length) : null;
    const name = owner.has(expected.name) || stripped === null ? expected.name : stripped;
    const found = owner.get(name);
    if (!found) {
      throw new ModelLoadError(`weights: tensor "${expected.name}" is missing from ${where}${expected.because ? ` (${configFile} says ${expected.because})` : ""}`);
    }
    const { header, tensor } = found;
    if (tensor.shape.length !== expected.shape.length || tensor.shape.some((d, k) => d !== expected.shape[k])) {
      const implied = expected.shape.map((d, k) => `${d} (${expected.dims[k]})`).join(", ");
      throw new ModelLoadError(`weights: tensor "${name}" in ${header.file} has shape [${tensor.shape.join(", ")}], ${configFile} implies [${implied}]`);
    }
    if (!FLOAT_DTYPES.has(tensor.dtype)) {
      throw new ModelLoadError(`weights: tensor "${name}" in ${header.file} is ${tensor.dtype}; weights must be F16, BF16, F32 or F64`);
    }
    used.add(name);
  }
  for (const [name, { header }] of owner) {
    if (!used.has(name) && !ignorable(config, name)) {
      throw new ModelLoadError(`weights: ${header.file} holds tensor "${name}", which this architecture does not have (${configFile}: model_type ${config.modelType})`);
    }
  }
}
