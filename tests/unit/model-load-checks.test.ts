// config.json is checked against the safetensors headers before anything is allocated for it: absurd numbers are
// refused by field, every tensor the config implies must be in the files with its shape and a float dtype, and a
// model built from a config alone must fit the machine. The crash cases run in a child process, so a V8
// out-of-memory or a 1 GB allocation shows as a failed test (its exit status, its peak memory), not a dead worker.
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CausalLM } from "../../src/models/causal-lm.js";
import { weightFiles } from "../../src/models/model-files.js";
import { parseModelConfig } from "../../src/models/config.js";
import { checkModelFits, checkWeightsAgainstConfig, parameterCount, readSafetensorsHeader } from "../../src/models/weights-check.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-load-checks-"));
const GOLDEN = path.resolve("tests/golden");
const golden = (family: string) => path.join(GOLDEN, family);

/** A copy of a golden model directory with config.json edited. */
function edited(family: string, name: string, edit: (config: Record<string, unknown>) => void): string {
  const dir = path.join(scratch, name);
  mkdirSync(dir, { recursive: true });
  for (const file of ["model.safetensors", "generation_config.json"]) copyFileSync(path.join(golden(family), file), path.join(dir, file));
  const config = JSON.parse(readFileSync(path.join(golden(family), "config.json"), "utf8"));
  edit(config);
  writeFileSync(path.join(dir, "config.json"), JSON.stringify(config));
  return dir;
}

/** A safetensors file from a header object and a data section. */
function safetensors(file: string, header: unknown, data = Buffer.alloc(0)): string {
  const text = JSON.stringify(header);
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(Buffer.byteLength(text)));
  writeFileSync(file, Buffer.concat([prefix, Buffer.from(text), data]));
  return file;
}

/** Runs a module script in a child node (memory-capped) and returns its status, output and peak RSS in MB. */
function child(script: string): { status: number | null; signal: string | null; out: string; maxRssMb: number } {
  const wrapped = `${script}\nconsole.log("maxRssMb=" + Math.round(process.resourceUsage().maxRSS / 1024));`;
  const run = spawnSync(process.execPath, ["--max-old-space-size=1024", "--import", "tsx", "--input-type=module", "-e", wrapped], {
    encoding: "utf8",
    timeout: 120_000,
  });
  const out = `${run.stdout}${run.stderr}`;
  return { status: run.status, signal: run.signal, out, maxRssMb: Number(/maxRssMb=(\d+)/.exec(run.stdout)?.[1] ?? NaN) };
}

const causalLM = JSON.stringify(path.resolve("src/models/causal-lm.ts"));
const loadScript = (dir: string) => `import { CausalLM } from ${causalLM};
try { await CausalLM.fromDirectory(${JSON.stringify(dir)}); console.log("loaded"); } catch (error) { console.log("refused: " + error.message); }`;
const createScript = (config: Record<string, unknown>) => `import { CausalLM } from ${causalLM};
try { CausalLM.create(${JSON.stringify(config)}); console.log("created"); } catch (error) { console.log("refused: " + error.message); }`;

describe("config.json checked before allocation", () => {
  it("num_hidden_layers: 1e9 is refused by field, not a V8 out-of-memory", () => {
    const dir = edited("llama3", "layers-1e9", (c) => (c.num_hidden_layers = 1e9));
    const run = child(loadScript(dir));
    expect(run.signal).toBeNull();
    expect(run.out).toContain(`refused: ${dir}/config.json: num_hidden_layers is 1000000000, past the 1024 any real model needs`);
    expect(run.status).toBe(0);
  });

  it("CausalLM.create from a config alone with num_hidden_layers: 1e9 is refused by field", () => {
    const config = JSON.parse(readFileSync(path.join(golden("llama3"), "config.json"), "utf8"));
    const run = child(createScript({ ...config, num_hidden_layers: 1e9 }));
    expect(run.signal).toBeNull();
    expect(run.out).toContain("refused: config: num_hidden_layers is 1000000000, past the 1024 any real model needs");
  });

  it("a config describing 1 GB over an 85 KB file fails on the first tensor, by name and field, without allocating", () => {
    // 2^22 rows × 32 × 4 bytes: 512 MiB of embeddings and as much of an untied head.
    const dir = edited("llama3", "vocab-4m", (c) => {
      c.vocab_size = 2 ** 22;
      c.tie_word_embeddings = false;
    });
    const run = child(loadScript(dir));
    expect(run.out).toContain(
      `refused: weights: tensor "model.embed_tokens.weight" in ${dir}/model.safetensors has shape [64, 32], ${dir}/config.json implies [4194304 (vocab_size), 32 (hidden_size)]`,
    );
    // Node, tsx and libtorch alone; the model would add over 1000 MB.
    expect(run.maxRssMb, run.out).toBeLessThan(600);
  });

  it("CausalLM.create refuses weights larger than the machine, naming the fields and sizes", () => {
    const config = JSON.parse(readFileSync(path.join(golden("llama3"), "config.json"), "utf8"));
    const huge = { ...config, vocab_size: 2 ** 24, hidden_size: 2 ** 16, head_dim: 128, num_attention_heads: 512, num_key_value_heads: 512, intermediate_size: 2 ** 16 };
    const run = child(createScript(huge));
    expect(run.signal).toBeNull();
    // Tied embeddings 2^24 × 2^16, per layer q/k/v/o 4 × 2^32 and gate/up/down 3 × 2^32, five norms of 2^16:
    // 2^40 + 14 · 2^32 + 5 · 2^16 = 1,159,641,497,600 parameters, × 4 bytes = 4320.0 GiB.
    expect(run.out).toMatch(
      /refused: config: vocab_size = 16777216, hidden_size = 65536, intermediate_size = 65536, num_hidden_layers = 2 make 1\.160e\+12 parameters, 4320\.0 GiB in float32, more than this machine's \d+\.\d GiB of memory/,
    );
    expect(run.maxRssMb).toBeLessThan(600);
  });

  it("a layer the file lacks is named with the field that implies it", () => {
    const dir = edited("llama3", "layers-3", (c) => (c.num_hidden_layers = 3));
    const config = parseModelConfig(JSON.parse(readFileSync(path.join(dir, "config.json"), "utf8")), path.join(dir, "config.json"));
    expect(() => checkWeightsAgainstConfig(config, path.join(dir, "config.json"), weightFiles(dir))).toThrow(
      `weights: tensor "model.layers.2.self_attn.q_proj.weight" is missing from ${dir}/model.safetensors (${dir}/config.json says num_hidden_layers = 3)`,
    );
  });

  it("a head count that does not match the file names the fields of each dimension", () => {
    const dir = edited("llama3", "kv-heads", (c) => (c.num_key_value_heads = 4));
    const config = parseModelConfig(JSON.parse(readFileSync(path.join(dir, "config.json"), "utf8")));
    expect(() => checkWeightsAgainstConfig(config, "config.json", weightFiles(dir))).toThrow(
      `weights: tensor "model.layers.0.self_attn.k_proj.weight" in ${dir}/model.safetensors has shape [32, 32], config.json implies [64 (num_key_value_heads × head_dim), 32 (hidden_size)]`,
    );
  });

  it("a tensor the architecture lacks, an integer weight and overlapping tensors are each refused by name", () => {
    const dir = golden("llama3");
    const config = parseModelConfig(JSON.parse(readFileSync(path.join(dir, "config.json"), "utf8")));
    const header = readSafetensorsHeader(path.join(dir, "model.safetensors"));
    const source = readFileSync(path.join(dir, "model.safetensors"));
    const length = Number(source.readBigUInt64LE(0));
    const entries = JSON.parse(source.subarray(8, 8 + length).toString("utf8"));
    const data = source.subarray(8 + length);
    const extra = safetensors(path.join(scratch, "extra.safetensors"), { ...entries, "model.layers.0.mlp.bias": { dtype: "F32", shape: [0], data_offsets: [0, 0] } }, data);
    expect(() => checkWeightsAgainstConfig(config, "config.json", [extra])).toThrow(
      `weights: ${extra} holds tensor "model.layers.0.mlp.bias", which this architecture does not have (config.json: model_type llama)`,
    );
    const norm = "model.norm.weight";
    const integer = safetensors(path.join(scratch, "integer.safetensors"), { ...entries, [norm]: { ...entries[norm], dtype: "I32" } }, data);
    expect(() => checkWeightsAgainstConfig(config, "config.json", [integer])).toThrow(`weights: tensor "${norm}" in ${integer} is I32; weights must be F16, BF16, F32 or F64`);
    // Every tensor pointing at the same bytes: each fits the file, together they claim far more than it has.
    const same = Object.fromEntries(Object.entries(entries).map(([name, entry]) => [name, name === "__metadata__" ? entry : { dtype: "F32", shape: [8], data_offsets: [0, 32] }]));
    const overlap = safetensors(path.join(scratch, "overlap.safetensors"), same, data.subarray(0, 32));
    expect(() => readSafetensorsHeader(overlap)).toThrow(new RegExp(`^${overlap}: its tensors claim \\d+ bytes together but the data section has 32: tensors overlap$`));
    expect(header.tensors.size).toBe(Object.keys(entries).length - 1);
  });

  it("every golden family's config.json implies exactly the tensors transformers wrote", () => {
    const families = readdirSync(GOLDEN).filter((name) => {
      try {
        return readdirSync(golden(name)).includes("model.safetensors") && readdirSync(golden(name)).includes("config.json");
      } catch {
        return false;
      }
    });
    expect(families.length).toBeGreaterThanOrEqual(14);
    for (const family of families) {
      const dir = golden(family);
      const config = parseModelConfig(JSON.parse(readFileSync(path.join(dir, "config.json"), "utf8")), family);
      expect(() => checkWeightsAgainstConfig(config, family, weightFiles(dir)), family).not.toThrow();
      // The count agrees with the file's weights (a tied head and GPT-2's mask buffers are not parameters).
      const header = readSafetensorsHeader(weightFiles(dir)[0]!);
      const used = [...header.tensors].filter(([name]) => !(name === "lm_head.weight" && config.tieWordEmbeddings) && !/\.attn\.(masked_)?bias$/.test(name));
      expect(parameterCount(config), family).toBe(used.reduce((n, [, t]) => n + t.shape.reduce((m, d) => m * d, 1), 0));
    }
  });

  it("checkModelFits counts against the memory it is given", () => {
    const config = parseModelConfig(JSON.parse(readFileSync(path.join(golden("llama3"), "config.json"), "utf8")));
    const bytes = parameterCount(config) * 4;
    expect(() => checkModelFits(config, "config.json", bytes)).not.toThrow();
    expect(() => checkModelFits(config, "config.json", bytes - 1)).toThrow(/^config\.json: vocab_size = 64, hidden_size = 32, intermediate_size = 32, num_hidden_layers = 2 make/);
  });
});

describe("model JSON files nested deep", () => {
  it("a config.json value nested 100k deep is refused by file, not a stack overflow while it is shown", async () => {
    const dir = path.join(scratch, "deep-config");
    mkdirSync(dir, { recursive: true });
    copyFileSync(path.join(golden("llama3"), "model.safetensors"), path.join(dir, "model.safetensors"));
    const text = readFileSync(path.join(golden("llama3"), "config.json"), "utf8").replace('"hidden_size": 32', `"hidden_size": ${"[".repeat(100_000)}${"]".repeat(100_000)}`);
    writeFileSync(path.join(dir, "config.json"), text);
    await expect(CausalLM.fromDirectory(dir)).rejects.toThrow(`${dir}/config.json: nests deeper than 64 levels: not a model's JSON file`);
  });
});
