// Real config.json files of the models people post-train (tests/fixtures/hub-configs: 48 copied byte for byte from
// the public copies SOURCES names, one written by transformers from a GGUF) through the configuration half of
// CausalLM.fromDirectory. Every file of a supported
// family builds the model config transformers builds from it (tests/golden/hub-configs.json, written by transformers
// itself: the shape, each layer's attention window, each rotary table), or is refused for a key that changes the
// computation, named below; files of other families are refused with the list of supported ones.
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ConfigError } from "../../src/config/fields.js";
import { readModelDirectoryConfig } from "../../src/models/causal-lm.js";
import { SUPPORTED_MODEL_TYPES } from "../../src/models/config.js";

const FIXTURES = path.resolve("tests/fixtures/hub-configs");
const golden: { transformers: string; configs: Record<string, any> } = JSON.parse(readFileSync(path.resolve("tests/golden/hub-configs.json"), "utf8"));
const models = readdirSync(FIXTURES).filter((name) => !name.includes("SOURCES"));
const rawConfig = (model: string) => JSON.parse(readFileSync(path.join(FIXTURES, model, "config.json"), "utf8"));

// Refused, and the key that changes the computation (transformers' AutoConfig reads both; its FP8 quantizer then runs
// the checkpoint's FP8 weights, which comlrl does not load).
const REFUSED: Record<string, RegExp> = {
  "Qwen__Qwen3-30B-A3B-FP8": /config\.json: quantization_config \{"activation_scheme":"dynamic",.*\.\.\. is not supported for model_type "qwen3_moe" \(the weights are stored quantized/,
  "Qwen__Qwen3-32B-FP8": /config\.json: quantization_config \{"activation_scheme":"dynamic","fmt":"e4m3",.* is not supported for model_type "qwen3" \(the weights are stored quantized/,
};
// The keys each file's warning names: neither comlrl nor transformers' config class for the family reads them.
const WARNED: Record<string, string[]> = {
  "Qwen__Qwen2.5-0.5B": ["use_mrope"],
  "Qwen__Qwen2.5-3B": ["use_mrope"],
  "Qwen__Qwen2.5-7B": ["use_mrope"],
  "HuggingFaceTB__SmolLM2-135M": ["is_llama_config", "rope_interleaved"],
  "HuggingFaceTB__SmolLM2-135M-hub": ["is_llama_config", "rope_interleaved"],
  "microsoft__Phi-3-mini-4k-instruct": ["auto_map"],
  "microsoft__Phi-3-mini-128k-instruct": ["auto_map"],
  "microsoft__Phi-3-medium-4k-instruct": ["auto_map"],
  "microsoft__Phi-3-medium-128k-instruct": ["auto_map"],
  "microsoft__Phi-4-mini-instruct": ["auto_map", "full_attn_mod", "interpolate_factor"],
  "haihua_2021__gpt2-chinese-dump": ["gradient_checkpointing", "output_past"],
  "HuggingFaceTB__SmolLM3-3B": ["pretraining_tp"],
  "transformers-from-gguf__SmolLM2-135M-Instruct": ["_model_name_or_path", "unk_token_id"],
};

const warnings: string[] = [];
const captureWarnings = () => vi.spyOn(process, "emitWarning").mockImplementation((warning) => void warnings.push(String(warning)));
afterEach(() => {
  vi.restoreAllMocks();
  warnings.length = 0;
});

describe("the test set", () => {
  it("SOURCES names every fixture file with a repository, path and commit, and every file it names is there", () => {
    const listed = readFileSync(path.join(FIXTURES, "SOURCES"), "utf8").split("\n").filter((line) => line && !line.startsWith("#")).map((line) => line.split("\t"));
    for (const row of listed) {
      expect(row, row[0]).toHaveLength(4);
      expect(existsSync(path.join(FIXTURES, row[0])), row[0]).toBe(true);
    }
    const files = models.flatMap((model) => readdirSync(path.join(FIXTURES, model)).map((file) => `${model}/${file}`));
    expect(listed.map((row) => row[0]).sort()).toEqual(files.sort());
  });

  it("holds at least 40 real Hub config.json files of supported families, and transformers' verdict on every one", () => {
    const real = models.filter((model) => !model.startsWith("transformers-from-gguf") && SUPPORTED_MODEL_TYPES.includes(rawConfig(model).model_type));
    expect(real.length).toBeGreaterThanOrEqual(40);
    expect(Object.keys(golden.configs).sort()).toEqual([...models].sort());
  });
});

describe.each(models)("%s", (model) => {
  const dir = path.join(FIXTURES, model);
  const raw = rawConfig(model);
  const reference = golden.configs[model];

  if (!SUPPORTED_MODEL_TYPES.includes(raw.model_type)) {
    it("is refused with the list of supported families", () => {
      expect(() => readModelDirectoryConfig(dir)).toThrow(
        new RegExp(`config\\.json: model_type "${raw.model_type}" is not supported \\(supported: ${SUPPORTED_MODEL_TYPES.join(", ")}\\)`),
      );
    });
    return;
  }

  if (REFUSED[model]) {
    it("is refused for the key that changes the computation", () => {
      expect(reference.loads).toBe(true);
      expect(() => readModelDirectoryConfig(dir)).toThrow(ConfigError);
      expect(() => readModelDirectoryConfig(dir)).toThrow(REFUSED[model]);
    });
    return;
  }

  it("builds the model config transformers builds, naming in a warning only the keys nobody reads", () => {
    captureWarnings();
    const { config } = readModelDirectoryConfig(dir);
    expect(reference.loads).toBe(true);
    expect(config).toMatchObject({
      modelType: reference.model_type,
      numLayers: reference.num_hidden_layers,
      hiddenSize: reference.hidden_size,
      numHeads: reference.num_attention_heads,
      numKvHeads: reference.num_key_value_heads,
      headDim: reference.head_dim,
      vocabSize: reference.vocab_size,
      tieWordEmbeddings: reference.tie_word_embeddings,
      layerWindow: reference.windows,
    });
    // Each rotary layer's table: transformers' inverse frequencies (float32) and attention scaling at init.
    const rope = reference.rope.all;
    if (rope === undefined) {
      expect(config.ropeInvFreq).toEqual([]);
    } else {
      for (const table of new Set(config.layerRope.filter((t) => t >= 0))) {
        const ours = config.ropeInvFreq[table];
        expect(ours).toHaveLength(rope.inv_freq.length);
        ours.forEach((f, i) => expect(Math.abs(f - rope.inv_freq[i]) / rope.inv_freq[i], `inv_freq[${i}]`).toBeLessThan(1e-6));
        expect(config.ropeAttentionScaling[table]).toBeCloseTo(rope.attention_scaling, 6);
      }
    }
    const named = warnings.filter((w) => w.includes("ignored: transformers'"));
    if (WARNED[model]) {
      expect(named).toHaveLength(1);
      expect(named[0]).toBe(
        `${dir}/config.json: ${WARNED[model].join(", ")} ignored: transformers' ${raw.model_type} code never reads ${WARNED[model].length === 1 ? "it" : "them"} either ` +
          `(metadata, other libraries' settings, or remote code's, which the built-in ${raw.model_type} implementation replaces)`,
      );
    } else {
      expect(named).toEqual([]);
    }
  });
});

describe("the README's quickstart model and the files beside a config", () => {
  it("Qwen/Qwen2.5-0.5B, as the Hub serves it (use_mrope and all), loads", () => {
    expect(readFileSync(path.resolve("README.md"), "utf8")).toContain('process.env.COMLRL_MODEL ?? "Qwen/Qwen2.5-0.5B"');
    const { config } = readModelDirectoryConfig(path.join(FIXTURES, "Qwen__Qwen2.5-0.5B"));
    expect(rawConfig("Qwen__Qwen2.5-0.5B").use_mrope).toBe(false);
    expect(config).toMatchObject({ modelType: "qwen2", numLayers: 24, hiddenSize: 896, numHeads: 14, numKvHeads: 2, qkvBias: true, tieWordEmbeddings: true });
  });

  it("generation_config.json's EOS ids join the config's (Qwen2.5-0.5B-Instruct stops at <|im_end|> and <|endoftext|>)", () => {
    const { config, generationConfig } = readModelDirectoryConfig(path.join(FIXTURES, "Qwen__Qwen2.5-0.5B-Instruct"));
    expect(generationConfig.eos_token_id).toEqual([151645, 151643]);
    expect(config.eosTokenIds).toEqual([151645, 151643]);
  });

  it("the warning names each set of unknown keys once per file", () => {
    captureWarnings();
    const dir = mkdtempSync(path.join(tmpdir(), "comlrl-hub-config-"));
    copyFileSync(path.join(FIXTURES, "microsoft__Phi-4-mini-instruct", "config.json"), path.join(dir, "config.json"));
    readModelDirectoryConfig(dir);
    readModelDirectoryConfig(dir);
    expect(warnings.filter((w) => w.includes("full_attn_mod"))).toHaveLength(1);
  });
});
