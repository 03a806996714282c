// The per-family key table (src/models/transformers-config-keys.ts, generated from transformers' source) is current,
// and every key transformers' code for a family reads is either implemented by comlrl's parser or refused by name
// when set otherwise than transformers' default; no such key is silently ignored.
//
// Current means: the data is what the generator wrote (its hash), the generator is the one that wrote it (the
// script's hash: editing the script without rerunning it fails here), it was read from the transformers version the
// project pins for its reference side (scripts/reference/requirements.txt: bumping the pin without regenerating fails
// here), and it covers exactly the families the parser supports (adding a family without regenerating fails here).
// None of that needs Python. Where a transformers source tree of the pinned version is at hand
// (COMLRL_TRANSFORMERS_SRC), the table is also regenerated and compared byte for byte.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { ConfigError } from "../../src/config/fields.js";
import { judgeConfigKeys } from "../../src/models/judge-config-keys.js";
import { parseModelConfig, SUPPORTED_MODEL_TYPES, type ModelConfig } from "../../src/models/config.js";
import { TRANSFORMERS_CONFIG_KEYS } from "../../src/models/transformers-config-keys.js";

const TABLE_FILE = path.resolve("src/models/transformers-config-keys.ts");
const GENERATOR = path.resolve("scripts/reference/make_config_keys.py");
const text = readFileSync(TABLE_FILE, "utf8");
const sha256 = (data: string | Buffer) => createHash("sha256").update(data).digest("hex");
const header = (name: string) => new RegExp(`^// ${name} sha256: ([0-9a-f]{64})$`, "m").exec(text)?.[1];

describe("the generated table is current", () => {
  it("its data is what the generator wrote (the table hash in its header)", () => {
    const data = text.slice(text.indexOf("= {") + 2, text.lastIndexOf(";"));
    expect(sha256(data)).toBe(header("table"));
    expect(JSON.parse(data)).toEqual(TRANSFORMERS_CONFIG_KEYS);
  });

  it("the generator is the one that wrote it (the generator hash in its header)", () => {
    expect(sha256(readFileSync(GENERATOR)), "scripts/reference/make_config_keys.py changed: rerun it").toBe(header("generator"));
  });

  it("it was read from the transformers version scripts/reference/requirements.txt pins", () => {
    const pin = /^transformers==(\S+)$/m.exec(readFileSync(path.resolve("scripts/reference/requirements.txt"), "utf8"))?.[1];
    expect(TRANSFORMERS_CONFIG_KEYS.transformers).toBe(pin);
  });

  it("it covers exactly the families the parser supports", () => {
    expect(Object.keys(TRANSFORMERS_CONFIG_KEYS.families).sort()).toEqual([...SUPPORTED_MODEL_TYPES].sort());
  });

  const source = process.env.COMLRL_TRANSFORMERS_SRC;
  it.skipIf(!source)("regenerated from COMLRL_TRANSFORMERS_SRC, it is byte for byte the committed one", () => {
    const out = path.join(mkdtempSync(path.join(tmpdir(), "comlrl-keys-")), "keys.ts");
    const run = spawnSync("python3", [GENERATOR, source!, out], { encoding: "utf8" });
    expect(run.status, run.stderr).toBe(0);
    expect(readFileSync(out, "utf8")).toBe(text);
  });
});

describe("the table's sizes", () => {
  it("every family reads its shape keys, and knows more keys than it reads", () => {
    for (const [family, keys] of Object.entries(TRANSFORMERS_CONFIG_KEYS.families)) {
      const shape = family === "gpt2" ? ["n_embd", "n_layer", "n_head", "vocab_size"] : ["hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"];
      for (const key of shape) expect(keys.reads, `${family}.${key}`).toHaveProperty(key);
      expect(Object.keys(keys.fields).length, family).toBeGreaterThan(Object.keys(keys.reads).length / 2);
    }
  });
});

// Keys transformers' family code reads that comlrl reads as metadata, and why they change nothing it computes.
const READ_AS_METADATA: Record<string, string> = {
  pad_token_id: "transformers passes it to nn.Embedding as padding_idx, which only zeroes that row's gradient in from-scratch training; a loaded row is used as stored",
  initializer_range: "read by _init_weights, which a pretrained checkpoint's weights replace",
  add_cross_attention: "GPT-2's cross-attention runs only on encoder states, which a causal LM never gets",
};

const GOLDEN = path.resolve("tests/golden");
const goldenConfig: Record<string, string> = {
  qwen2: "qwen2_t5_theta1e6", qwen3: "qwen3_moe", qwen3_moe: "qwen3_moe", llama: "llama3", mistral: "mistral", mixtral: "mixtral", gemma2: "gemma2",
  gemma3_text: "gemma3_text", phi3: "phi3", olmo2: "olmo2", smollm3: "smollm3", gpt2: "gpt2",
};
const familyConfig = (family: string): Record<string, unknown> => {
  const raw = JSON.parse(readFileSync(path.join(GOLDEN, goldenConfig[family], "config.json"), "utf8"));
  if (family === "qwen3") {
    // A dense Qwen3 file: the MoE golden's attention with its MoE keys removed.
    for (const key of ["num_experts", "num_local_experts", "moe_intermediate_size", "decoder_sparse_step", "mlp_only_layers", "norm_topk_prob",
      "num_experts_per_tok", "output_router_logits", "router_aux_loss_coef", "architectures"]) delete raw[key];
    raw.model_type = "qwen3";
  }
  return raw;
};

describe.each(Object.keys(TRANSFORMERS_CONFIG_KEYS.families))("every key transformers' %s code reads is implemented or refused", (family) => {
  const reads = TRANSFORMERS_CONFIG_KEYS.families[family].reads;
  const base = familyConfig(family);
  it.each(Object.keys(reads).filter((key) => !(key in READ_AS_METADATA)))("%s", (key) => {
    // transformers' default loads (where the parser accepts it: a null default is "absent").
    if (reads[key] !== null && !(key in base)) expect(() => parseModelConfig({ ...base, [key]: reads[key] })).not.toThrow();
    // A value no config holds is refused, by this key's name, or read into the config (so it is implemented).
    const sentinel = { unlikely: key };
    let refused: unknown = null;
    try {
      parseModelConfig({ ...base, [key]: sentinel });
    } catch (error) {
      refused = error;
    }
    expect(refused, `${family}: ${key} set to an object is neither refused nor implemented`).toBeInstanceOf(ConfigError);
    expect(String((refused as Error).message)).toContain(key);
  });
});

// For a key a file may leave out: what the parsed config holds, and what it should hold given transformers' default.
const ACTIVATION_OF: Record<string, string> = { silu: "silu", gelu_pytorch_tanh: "gelu_tanh", gelu_new: "gelu_tanh", gelu: "gelu" };
const DEFAULTED: Record<string, [(config: ModelConfig) => unknown, (byDefault: unknown) => unknown]> = {
  tie_word_embeddings: [(c) => c.tieWordEmbeddings, (d) => d],
  rms_norm_eps: [(c) => c.rmsNormEps, (d) => d],
  layer_norm_epsilon: [(c) => c.rmsNormEps, (d) => d],
  attention_bias: [(c) => c.oBias, (d) => d],
  mlp_bias: [(c) => c.mlpBias, (d) => d],
  hidden_act: [(c) => c.activation, (d) => ACTIVATION_OF[d as string]],
  hidden_activation: [(c) => c.activation, (d) => ACTIVATION_OF[d as string]],
  activation_function: [(c) => c.activation, (d) => ACTIVATION_OF[d as string]],
  query_pre_attn_scalar: [(c) => c.attentionScale, (d) => 1 / Math.sqrt(d as number)],
  attn_logit_softcapping: [(c) => c.attnSoftcap, (d) => d ?? 0],
  final_logit_softcapping: [(c) => c.finalSoftcap, (d) => d ?? 0],
  sliding_window: [(c) => Math.max(...c.layerWindow), (d) => d ?? 0],
  norm_topk_prob: [(c) => c.normTopkProb, (d) => d],
  num_experts_per_tok: [(c) => c.numExpertsPerTok, (d) => d],
  moe_intermediate_size: [(c) => c.moeIntermediateSize, (d) => d],
  num_local_experts: [(c) => c.numExperts, (d) => d],
  num_experts: [(c) => c.numExperts, (d) => d],
  attention_dropout: [(c) => c.attentionDropout, (d) => d],
  attn_pdrop: [(c) => c.attentionDropout, (d) => d],
  resid_pdrop: [(c) => c.residualDropout, (d) => d],
  embd_pdrop: [(c) => c.embeddingDropout, (d) => d],
};

describe.each(Object.keys(TRANSFORMERS_CONFIG_KEYS.families))("a key %s's file leaves out takes transformers' default", (family) => {
  const fields = TRANSFORMERS_CONFIG_KEYS.families[family].fields;
  const base = familyConfig(family);
  // Keys whose default says something (a null default of a count is "derived from another key", not a value).
  const keys = Object.keys(DEFAULTED).filter((key) => Object.hasOwn(fields, key) && DEFAULTED[key][1](fields[key]) != null);
  it.each(keys)("%s", (key) => {
    const without = { ...base };
    delete without[key];
    // Qwen3-MoE's and Mixtral's expert count has two names; the file must lose both.
    if (key === "num_experts" || key === "num_local_experts") delete without[key === "num_experts" ? "num_local_experts" : "num_experts"];
    // Qwen3-MoE routes to 8 experts by default: more than the tiny file has.
    if (key === "num_experts_per_tok") without.num_local_experts = 128;
    // Windows appear only where the family's layers slide: a Qwen2-style file needs use_sliding_window, and layers from
    // max_window_layers on rather than its own layer_types.
    if (key === "sliding_window" && "use_sliding_window" in without) {
      Object.assign(without, { use_sliding_window: true, max_window_layers: 0 });
      delete without.layer_types;
    }
    const [read, expected] = DEFAULTED[key];
    if (family === "phi3" && key === "embd_pdrop") return; // transformers 5's Phi-3 applies no embedding dropout
    expect(read(parseModelConfig(without))).toEqual(expected(fields[key]));
  });
});

describe("the keys real Hub files carry that transformers never reads", () => {
  // One per false alarm found in real files: each loads, and the model config is the one the file without it gives.
  const strays: [string, Record<string, unknown>][] = [
    ["qwen2", { use_mrope: false }],
    ["llama", { is_llama_config: true, rope_interleaved: false, "transformers.js_config": { dtype: "q4" } }],
    ["smollm3", { pretraining_tp: 2 }],
    ["phi3", { auto_map: { AutoConfig: "configuration_phi3.Phi3Config" }, attention_bias: false, full_attn_mod: 1, interpolate_factor: 1, lm_head_bias: false, mlp_bias: false }],
    ["mistral", { document_attention: false }],
    ["gpt2", { _num_labels: 1, gradient_checkpointing: false }],
    ["llama", { _model_name_or_path: "Smollm2 135M 8k Lc100K Mix1 Ep2", unk_token_id: 0 }],
  ];
  it.each(strays)("%s: %j", (family, keys) => {
    const base = familyConfig(family);
    const { raw: _raw, ...expected } = parseModelConfig(base);
    const { raw: _withKeys, ...loaded } = parseModelConfig({ ...base, ...keys });
    expect(loaded).toEqual(expected);
  });
});

describe.each(Object.keys(TRANSFORMERS_CONFIG_KEYS.families))("a key %s's file is warned about is ignored, as the warning says", (family) => {
  // Every key any family's file carries, with that file's value, set in this family's file.
  const base = familyConfig(family);
  const { raw: _raw, ...expected } = parseModelConfig(base);
  const others = Object.keys(TRANSFORMERS_CONFIG_KEYS.families).flatMap((other) => Object.entries(familyConfig(other)));
  const candidates = new Map(others.filter(([key, value]) => !(key in base) && value !== null));
  it.each([...candidates.keys()])("%s", (key) => {
    const warning = vi.spyOn(process, "emitWarning").mockImplementation(() => undefined);
    try {
      const { raw: _withKey, ...loaded } = parseModelConfig({ ...base, [key]: candidates.get(key) }, `${family}-${key}/config.json`);
      const warned = warning.mock.calls.some(([text]) => String(text).startsWith(`${family}-${key}/config.json: ${key} ignored`));
      if (warned) expect(loaded).toEqual(expected);
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
    } finally {
      warning.mockRestore();
    }
  });
});

describe("judgeConfigKeys", () => {
  const llama = familyConfig("llama");
  it("returns the keys transformers' config class does not know, and passes the ones it knows but never reads", () => {
    const handled = new Set(Object.keys(llama));
    expect(judgeConfigKeys({ ...llama, is_llama_config: true, "transformers.js_config": { dtype: "q4" }, pretraining_tp: 2 }, "llama", handled, "f")).toEqual([
      "is_llama_config", "transformers.js_config",
    ]);
  });

  it("refuses a read key set otherwise than transformers' default, naming the file, key, value and default", () => {
    expect(() => judgeConfigKeys({ ...llama, is_causal: false }, "llama", new Set(Object.keys(llama)), "dir/config.json")).toThrow(
      /^dir\/config\.json: is_causal false is not supported for model_type "llama" \(transformers 5\.24\.0's llama code reads it, default true/,
    );
    expect(judgeConfigKeys({ ...llama, is_causal: true }, "llama", new Set(Object.keys(llama)), "f")).toEqual([]);
  });

  it("Phi-3's bias keys load when false (Phi-4-mini) and are refused when true, which transformers would drop", () => {
    const phi3 = familyConfig("phi3");
    const handled = new Set(Object.keys(phi3));
    expect(judgeConfigKeys({ ...phi3, attention_bias: false, mlp_bias: false, lm_head_bias: false }, "phi3", handled, "f")).toEqual([]);
    for (const key of ["attention_bias", "mlp_bias", "lm_head_bias"]) {
      expect(() => judgeConfigKeys({ ...phi3, [key]: true }, "phi3", handled, "f")).toThrow(new RegExp(`${key} true is not supported for model_type "phi3" \\(transformers' Phi-3 has no`));
    }
    // Llama honours attention_bias and mlp_bias: the parser reads them into the decoder's biases.
    expect(parseModelConfig({ ...llama, mlp_bias: true }).mlpBias).toBe(true);
  });

  it("refuses every quantization_config, and a model_type with no table entry", () => {
    const handled = new Set(Object.keys(llama));
    expect(() => judgeConfigKeys({ ...llama, quantization_config: { quant_method: "fp8" } }, "llama", handled, "f")).toThrow(/quantization_config .*\(the weights are stored quantized/);
    expect(() => judgeConfigKeys({}, "falcon", new Set(), "f")).toThrow(/model_type "falcon" has no entry in transformers-config-keys\.ts/);
  });
});
