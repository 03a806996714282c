// config.json → decoder config: both transformers layouts (4.x top-level rope_theta / rope_scaling / torch_dtype,
// 5.x rope_parameters / dtype / layer_types), and the rule that every field which changes the computation is either
// honoured or refused by name, checked by changing each field of every committed family config in turn.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { ConfigError } from "../../src/config/fields.js";
import { decoderConfigOf, parseModelConfig } from "../../src/models/config.js";

const GOLDEN = path.resolve(__dirname, "..", "golden");
const FAMILIES = ["qwen2_t5_theta1e6", "llama3", "mistral", "qwen2_sliding", "gemma2", "gemma3_text", "phi3", "olmo2", "smollm3", "qwen3_moe", "mixtral", "gpt2"];
const read = (family: string): Record<string, any> => JSON.parse(readFileSync(path.join(GOLDEN, family, "config.json"), "utf8"));
const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value));
const decoder = (raw: Record<string, unknown>) => decoderConfigOf(parseModelConfig(raw));

describe("transformers 5 layout", () => {
  it("rope_parameters.rope_theta is honoured: θ = 1e6 gives 1e6's frequencies, the same as 4.x's top-level rope_theta", () => {
    const v5 = read("qwen2_t5_theta1e6");
    const tables = decoder(v5).ropeInvFreq;
    expect(tables).toHaveLength(1);
    tables[0].forEach((f, i) => expect(f).toBeCloseTo(1 / 1e6 ** ((2 * i) / 8), 12));
    const v4 = clone(v5);
    delete v4.rope_parameters;
    v4.rope_theta = 1e6;
    expect(decoder(v4).ropeInvFreq).toEqual(tables);
    delete v4.rope_theta;
    expect(decoder(v4).ropeInvFreq).not.toEqual(tables); // the 1e4 default: what the old parser computed
  });

  it("llama3 scaling reads the same from 5.x rope_parameters and 4.x rope_scaling, and is not plain RoPE", () => {
    const v5 = read("llama3");
    const v4 = clone(v5);
    const { rope_theta, ...scaling } = v4.rope_parameters;
    delete v4.rope_parameters;
    Object.assign(v4, { rope_theta, rope_scaling: scaling });
    expect(decoder(v4).ropeInvFreq).toEqual(decoder(v5).ropeInvFreq);
    const plain = clone(v5);
    plain.rope_parameters = { rope_type: "default", rope_theta };
    expect(decoder(plain).ropeInvFreq).not.toEqual(decoder(v5).ropeInvFreq);
  });

  it("dtype (5.x) and torch_dtype (4.x) are read; layer_types sets each layer's window", () => {
    expect(parseModelConfig(read("qwen2_t5_theta1e6")).dtype).toBe("float32");
    const v4 = { ...read("qwen2_t5_theta1e6"), dtype: undefined, torch_dtype: "bfloat16" };
    delete v4.dtype;
    expect(parseModelConfig(v4).dtype).toBe("bfloat16");
    expect(decoder(read("qwen2_sliding")).layerWindow).toEqual([0, 5, 5]);
    expect(decoder(read("gemma3_text")).layerWindow).toEqual([5, 0, 5]);
    expect(decoder(read("gemma3_text")).layerRope).toEqual([1, 0, 1]);
    expect(decoder(read("smollm3")).layerRope).toEqual([0, -1, 0, -1]);
  });

  it("dynamic: plain RoPE up to max_position_embeddings, where transformers starts rescaling per call; positions from there are refused", () => {
    const raw = { ...read("llama3"), rope_parameters: { rope_type: "dynamic", rope_theta: 500000.0, factor: 8.0 } };
    const config = decoder(raw);
    expect(config.ropeInvFreq).toEqual(decoder({ ...raw, rope_parameters: { rope_type: "default", rope_theta: 500000.0 } }).ropeInvFreq);
    expect(config.positionLimit).toBe(128);
    expect(config.positionLimitReason).toMatch(/rope_parameters\.rope_type "dynamic"/);
  });

  it("longrope: short factors and transformers' attention factor below original_max_position_embeddings (values from transformers 5.24)", () => {
    const raw = {
      ...read("phi3"),
      original_max_position_embeddings: 32,
      rope_parameters: { rope_type: "longrope", rope_theta: 1e4, partial_rotary_factor: 0.5, short_factor: [1.0, 1.5], long_factor: [2.0, 4.0] },
    };
    const config = decoder(raw);
    // ROPE_INIT_FUNCTIONS["longrope"](Phi3Config(**raw)): inv_freq [1.0, 0.006666666828095913], attention 1.1832159566199232.
    expect(config.ropeInvFreq[0][0]).toBe(1);
    expect(config.ropeInvFreq[0][1]).toBeCloseTo(0.006666666828095913, 8);
    expect(config.ropeAttentionScaling[0]).toBeCloseTo(1.1832159566199232, 14);
    expect(config.positionLimit).toBe(32);
    expect(config.positionLimitReason).toMatch(/"longrope"/);
  });

  it("GPT-2 reads its own field names and transformers' defaults for the ones a file leaves out", () => {
    const raw = read("gpt2");
    const config = decoder(raw);
    expect(config).toMatchObject({ hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 4, headDim: 8, intermediateSize: 32, norm: "layer",
      activation: "gelu_tanh", gatedMlp: false, gpt2Layout: true, fusedProjections: true, learnedPositions: 32, positionLimit: 32,
      tieWordEmbeddings: true, qkvBias: true, oBias: true, mlpBias: true, ropeInvFreq: [], layerRope: [-1, -1] });
    expect(config.attentionScale).toBeCloseTo(1 / Math.sqrt(8), 15);
    const bare = clone(raw);
    for (const field of ["n_inner", "activation_function", "layer_norm_epsilon", "n_positions", "tie_word_embeddings", "scale_attn_weights"]) delete bare[field];
    expect(decoder(bare)).toMatchObject({ intermediateSize: 128, activation: "gelu_tanh", rmsNormEps: 1e-5, learnedPositions: 1024, tieWordEmbeddings: true });
    expect(decoder({ ...raw, scale_attn_weights: false }).attentionScale).toBe(1);
    delete bare.n_embd;
    expect(() => parseModelConfig(bare)).toThrow(/n_embd is missing/);
    // transformers' GPT-2 has learned positions and never reads a rotary key: one in the file loads, named in a warning.
    const warning = vi.spyOn(process, "emitWarning").mockImplementation(() => undefined);
    expect(decoder({ ...raw, rope_theta: 1e4 })).toEqual(config);
    expect(String(warning.mock.calls[0]?.[0])).toMatch(/config\.json: rope_theta ignored: transformers' gpt2 code never reads it/);
    warning.mockRestore();
    // The Hub's GPT-2 files ship dropouts of 0.1: read as the rates training mode applies.
    expect(decoder({ ...raw, attn_pdrop: 0.1, resid_pdrop: 0.2, embd_pdrop: 0.3 })).toMatchObject({ attentionDropout: 0.1, residualDropout: 0.2, embeddingDropout: 0.3 });
    expect(decoder(raw)).toMatchObject({ attentionDropout: 0, residualDropout: 0, embeddingDropout: 0 });
    expect(() => parseModelConfig({ ...raw, attn_pdrop: 1 })).toThrow(/attn_pdrop must be a number in \[0, 1\), got 1/);
    expect(() => parseModelConfig({ ...raw, resid_pdrop: "0.1" })).toThrow(/resid_pdrop must be a number in \[0, 1\), got "0.1"/);
    expect(() => parseModelConfig({ ...raw, embd_pdrop: -0.1 })).toThrow(/embd_pdrop must be a number in \[0, 1\)/);
  });

  it("dropout rates where transformers applies them: attention_dropout (rotary families), Phi-3's resid_pdrop; Phi-3's embd_pdrop unused, as in transformers 5", () => {
    expect(decoder({ ...read("llama3"), attention_dropout: 0.1 })).toMatchObject({ attentionDropout: 0.1, residualDropout: 0, embeddingDropout: 0 });
    expect(decoder({ ...read("phi3"), attention_dropout: 0.1, resid_pdrop: 0.2, embd_pdrop: 0.3 })).toMatchObject({ attentionDropout: 0.1, residualDropout: 0.2, embeddingDropout: 0 });
    expect(() => decoder({ ...read("phi3"), embd_pdrop: 1.5 })).toThrow(/embd_pdrop must be a number in \[0, 1\)/);
  });

  it("output_router_logits: router_aux_loss_coef (transformers' default 0.001) on the causal-LM loss only; false: none", () => {
    expect(decoder(read("qwen3_moe"))).toMatchObject({ lmRouterAuxCoef: 0, policyRouterAuxCoef: 0 });
    expect(decoder({ ...read("qwen3_moe"), output_router_logits: true })).toMatchObject({ lmRouterAuxCoef: 0.001, policyRouterAuxCoef: 0 });
    const mixtral: Record<string, unknown> = { ...read("mixtral"), output_router_logits: true, router_aux_loss_coef: 0.02 };
    expect(decoder(mixtral)).toMatchObject({ lmRouterAuxCoef: 0.02, policyRouterAuxCoef: 0 });
    delete mixtral.router_aux_loss_coef;
    expect(decoder(mixtral).lmRouterAuxCoef).toBe(0.001);
    expect(() => decoder({ ...mixtral, router_aux_loss_coef: -1 })).toThrow(/router_aux_loss_coef must be a non-negative number, got -1/);
    expect(() => decoder({ ...read("qwen3_moe"), output_router_logits: true, mlp_only_layers: [0, 1] })).toThrow(/output_router_logits is true but no layer is sparse/);
  });

  it("activations by transformers' ACT2FN name: erf GELU (gelu, gelu_python), tanh GELU (gelu_new, ...), SiLU (silu, swish)", () => {
    const gpt2 = read("gpt2");
    for (const [name, activation] of [["gelu", "gelu"], ["gelu_python", "gelu"], ["gelu_new", "gelu_tanh"], ["gelu_pytorch_tanh", "gelu_tanh"],
      ["gelu_accurate", "gelu_tanh"], ["gelu_python_tanh", "gelu_tanh"]]) {
      expect(decoder({ ...gpt2, activation_function: name }).activation, name).toBe(activation);
    }
    expect(decoder({ ...read("llama3"), hidden_act: "gelu" }).activation).toBe("gelu");
    expect(decoder({ ...read("llama3"), hidden_act: "swish" }).activation).toBe("silu");
    expect(decoder({ ...read("gemma2"), hidden_activation: "gelu" }).activation).toBe("gelu");
    // Close to one of ours but not the same numbers: refused by name.
    for (const name of ["gelu_fast", "gelu_10", "quick_gelu"]) {
      expect(() => decoder({ ...gpt2, activation_function: name }), name).toThrow(new RegExp(`activation_function "${name}" is not supported`));
    }
  });

  it("sliding_window in a family whose transformers code has no windows (Llama) is ignored, as there", () => {
    const raw = { ...read("llama3"), layer_types: ["sliding_attention", "full_attention"], sliding_window: 4 };
    const warning = vi.spyOn(process, "emitWarning").mockImplementation(() => undefined);
    expect(decoder(raw).layerWindow).toEqual([0, 0]);
    expect(String(warning.mock.calls[0]?.[0])).toMatch(/sliding_window ignored: transformers' llama code never reads it/);
    warning.mockRestore();
  });

  it("attn_implementation picks the attention kernel (every one computes the same numbers); an unknown one is refused", () => {
    expect(parseModelConfig({ ...read("mistral"), attn_implementation: "sdpa" }).attnImplementation).toBe("sdpa");
    const kernel = (name?: string) => decoder({ ...read("mistral"), attn_implementation: name }).attention;
    expect([kernel(undefined), kernel("eager"), kernel("sdpa"), kernel("flash_attention_2"), kernel("flex_attention")]).toEqual(["auto", "eager", "sdpa", "sdpa", "sdpa"]);
    expect(() => parseModelConfig({ ...read("mistral"), attn_implementation: "paged" })).toThrow(/attn_implementation "paged"/);
  });
});

describe("refused by name", () => {
  const cases: [string, (raw: Record<string, any>) => void, RegExp][] = [
    ["quantized weights", (r) => (r.quantization_config = { quant_method: "gptq" }), /quantization_config \{"quant_method":"gptq"\} is not supported for model_type "qwen2" \(the weights are stored quantized/],
    ["a key transformers' qwen2 code reads at a value comlrl does not implement", (r) => (r.is_causal = false),
      /is_causal false is not supported for model_type "qwen2" \(transformers 5\.24\.0's qwen2 code reads it, default true, and it changes the computation/],
    ["an unknown family", (r) => (r.model_type = "gpt_neox"), /model_type "gpt_neox" is not supported/],
    ["longrope factors of the wrong length", (r) => (r.rope_parameters = { rope_type: "longrope", rope_theta: 1e4, short_factor: [1], long_factor: [1] }), /rope_parameters\.short_factor must list 4 numbers/],
    ["a rope key its type does not read", (r) => (r.rope_parameters = { rope_type: "linear", rope_theta: 1e4, factor: 2, beta_fast: 3 }), /rope_parameters\.beta_fast is not read by rope_type "linear"/],
    ["rope_scaling beside a different rope_parameters", (r) => (r.rope_scaling = { rope_type: "linear", factor: 2 }), /rope_scaling and rope_parameters are both set and differ/],
    ["a layer kind we do not run", (r) => (r.layer_types = ["chunked_attention", "full_attention"]), /layer_types holds "chunked_attention"/],
    ["layer_types of the wrong length", (r) => (r.layer_types = ["full_attention"]), /layer_types must list one kind per layer/],
    ["a dtype we do not load", (r) => (r.dtype = "float64"), /dtype "float64" is not supported/],
    ["a dropout rate outside [0, 1)", (r) => (r.attention_dropout = 1), /attention_dropout must be a number in \[0, 1\), got 1/],
    ["an activation", (r) => (r.hidden_act = "relu"), /hidden_act "relu" is not supported/],
  ];
  for (const [what, change, message] of cases) {
    it(what, () => {
      const raw = read("qwen2_t5_theta1e6");
      change(raw);
      expect(() => parseModelConfig(raw)).toThrow(ConfigError);
      expect(() => parseModelConfig(raw)).toThrow(message);
    });
  }
});

// Fields whose change leaves these particular files' numbers alone, and why (each is honoured where it matters).
const DORMANT: Record<string, string> = {
  "qwen2_t5_theta1e6.use_sliding_window": "sliding_window is null",
  "qwen2_t5_theta1e6.max_window_layers": "layer_types are given and sliding_window is null",
  "qwen2_sliding.max_window_layers": "layer_types are given (transformers 5 derives them from it on save)",
  "smollm3.max_window_layers": "layer_types are given",
  "smollm3.use_sliding_window": "sliding_window is null",
  "smollm3.layer_types": "sliding_window is null",
  "qwen3_moe.use_sliding_window": "sliding_window is null",
  "qwen3_moe.router_aux_loss_coef": "read only with output_router_logits, false in this file",
  "mixtral.router_aux_loss_coef": "read only with output_router_logits, false in this file",
  "smollm3.no_rope_layer_interval": "no_rope_layers are given",
  "gemma3_text.sliding_window_pattern": "layer_types are given",
  "gemma3_text._sliding_window_pattern": "layer_types are given",
  "qwen2_t5_theta1e6.layer_types": "sliding_window is null",
  "phi3.original_max_position_embeddings": "read only by llama3 / yarn / longrope rotary",
  "phi3.partial_rotary_factor": "rope_parameters.partial_rotary_factor is given and wins, as in transformers",
  "gpt2.add_cross_attention": "cross-attention runs only on encoder states, which a causal LM never gets (its weights are refused on load)",
  "gpt2.summary_type": "configures GPT2DoubleHeadsModel's multiple-choice head, not the LM",
  "gpt2.summary_use_proj": "configures GPT2DoubleHeadsModel's multiple-choice head, not the LM",
  "gpt2.summary_proj_to_labels": "configures GPT2DoubleHeadsModel's multiple-choice head, not the LM",
  "gpt2.summary_first_dropout": "configures GPT2DoubleHeadsModel's multiple-choice head, not the LM",
  "phi3.embd_pdrop": "transformers 5's Phi-3 applies no embedding dropout",
  "llama3.pretraining_tp": "transformers 5 reads it nowhere (4.x split the projections into that many slices: the same sums)",
  "gemma2.hidden_act": "transformers 5's Gemma 2 reads hidden_activation only",
  "gemma3_text.hidden_act": "transformers 5's Gemma 3 reads hidden_activation only",
};

function mutations(value: unknown): unknown[] {
  // Two sizes of change: a small one (a scale the tiny models' rounding may absorb, e.g. yarn's ramp) and a large one.
  if (typeof value === "number") return value === 0 ? [0.1] : Number.isInteger(value) ? [value * 2, value * 100] : [value * 3];
  if (typeof value === "boolean") return [!value];
  if (typeof value === "string") return ["bogus"];
  if (Array.isArray(value)) {
    if (value.every((v) => v === 0 || v === 1)) return [value.map((v) => 1 - v)];
    return [value.map((v) => (v === "full_attention" ? "sliding_attention" : "full_attention"))];
  }
  return [];
}

describe.each(FAMILIES)("every field of %s is honoured or refused", (family) => {
  const base = read(family);
  const before = JSON.stringify(decoder(base));
  const METADATA_CHECKED = new Set(["architectures", "model_type", "transformers_version", "use_cache", "initializer_range", "bos_token_id", "eos_token_id", "pad_token_id", "dtype", "max_position_embeddings"]);
  const paths: string[][] = [];
  for (const [key, value] of Object.entries(base)) {
    if (METADATA_CHECKED.has(key) || value === null) continue;
    if (typeof value === "object" && !Array.isArray(value)) {
      for (const [inner, innerValue] of Object.entries(value as Record<string, unknown>)) {
        if (typeof innerValue === "object" && innerValue !== null && !Array.isArray(innerValue)) {
          for (const deep of Object.keys(innerValue)) paths.push([key, inner, deep]);
        } else {
          paths.push([key, inner]);
        }
      }
    } else {
      paths.push([key]);
    }
  }
  it.each(paths.map((p) => [p.join("."), p]))("%s", (_name, fieldPath) => {
    const field = (fieldPath as string[]).join(".");
    let holder: Record<string, unknown> = base;
    for (const key of (fieldPath as string[]).slice(0, -1)) holder = holder[key] as Record<string, unknown>;
    const last = (fieldPath as string[]).at(-1)!;
    let changedAny = false;
    for (const changed of mutations(holder[last])) {
      const raw = clone(base);
      let target: Record<string, unknown> = raw;
      for (const key of (fieldPath as string[]).slice(0, -1)) target = target[key] as Record<string, unknown>;
      target[last] = changed;
      let after: string;
      try {
        after = JSON.stringify(decoder(raw));
      } catch (error) {
        expect(error, field).toBeInstanceOf(ConfigError);
        expect(String((error as Error).message), field).toContain(`${fieldPath[0]}`);
        changedAny = true;
        continue;
      }
      changedAny ||= after !== before;
    }
    if (!DORMANT[`${family}.${field}`]) expect(changedAny, `changing ${field} changed nothing`).toBe(true);
  });
});
