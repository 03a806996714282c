// The GGUF writer against the `gguf` Python package llama.cpp ships (scripts/golden/make_gguf_export_goldens.py):
// F16, BF16 and Q8_0 bytes and the Llama q/k permutation bit-exact, a whole file byte-identical to GGUFWriter's; and
// exportGguf's refusals and write failures, each naming the file or field.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { encodeTensor } from "../../src/models/gguf/encode.js";
import { exportGguf, GgufExportError, permuteRotaryRows } from "../../src/models/gguf/export.js";
import type { GgmlTypeName } from "../../src/models/gguf/format.js";
import { writeGguf, type GgufValue } from "../../src/models/gguf/writer.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { FileWriteError } from "../../src/util/atomic.js";
import { scratchPerTest } from "../support/scratch.js";

const GOLDEN = path.resolve("tests/golden/gguf_export");
const golden = (name: string) => new Uint8Array(readFileSync(path.join(GOLDEN, name)));
const float32s = (name: string) => new Float32Array(golden(name).slice().buffer);
const values = float32s("values.f32");

describe("tensor encodings, bit-exact against gguf-py and numpy", () => {
  for (const [type, file] of [["F16", "f16.bin"], ["BF16", "bf16.bin"], ["Q8_0", "q8_0.bin"]] as const) {
    it(`${type} (ties, subnormals, overflow, zero blocks, random normals)`, () => {
      expect(Buffer.from(encodeTensor(values, type)).equals(Buffer.from(golden(file)))).toBe(true);
    });
  }

  it("Llama's q/k row permutation is convert_hf_to_gguf.py's", () => {
    const matrix = Float32Array.from({ length: 6 * 8 * 5 }, (_, i) => i);
    expect(Array.from(permuteRotaryRows(matrix, 48, 6))).toEqual(Array.from(float32s("permuted.f32")));
  });
});

interface WriterGolden {
  architecture: string;
  metadata: [string, GgufValue["type"], unknown][];
  tensors: { name: string; type: GgmlTypeName; shape: number[]; start: number }[];
}

const scratch = scratchPerTest("comlrl-gguf-export-");

it("writeGguf writes the file GGUFWriter writes from the same metadata and tensors, byte for byte", async () => {
  const description = JSON.parse(readFileSync(path.join(GOLDEN, "writer.json"), "utf8")) as WriterGolden;
  const metadata: [string, GgufValue][] = [
    ["general.architecture", { type: "string", value: description.architecture }],
    ...description.metadata.map(([key, type, value]) => [key, { type, value } as GgufValue] as [string, GgufValue]),
  ];
  const tensors = description.tensors.map(({ name, type, shape, start }) => ({
    name,
    type,
    shape,
    data: async () => encodeTensor(values.slice(start, start + shape.reduce((n, d) => n * d, 1)), type),
  }));
  const file = path.join(scratch(), "ours.gguf");
  await writeGguf(file, metadata, tensors);
  expect(Buffer.from(readFileSync(file)).equals(Buffer.from(golden("writer.gguf")))).toBe(true);
});

describe("exportGguf refuses what llama.cpp would run differently, naming the cause", () => {
  it("a family it does not write names model_type and config.json", async () => {
    const dir = path.join(scratch(), "tiny");
    await createTinyModel(dir, { modelType: "gemma2", hiddenSize: 32, numLayers: 1 });
    await expect(exportGguf(dir, path.join(scratch(), "out.gguf"))).rejects.toThrow(/config\.json: model_type "gemma2" has no GGUF export \(supported: qwen2, qwen3, llama, mistral\)/);
  });

  it("a scaled rotary embedding, a sliding window, an unknown pre-tokenizer, a bad dtype", async () => {
    const dir = path.join(scratch(), "tiny");
    await createTinyModel(dir, { hiddenSize: 32, numLayers: 1 });
    const configFile = path.join(dir, "config.json");
    const config = JSON.parse(readFileSync(configFile, "utf8")) as Record<string, unknown>;
    const out = path.join(scratch(), "out.gguf");
    writeFileSync(configFile, JSON.stringify({ ...config, rope_parameters: { rope_type: "linear", factor: 2, rope_theta: 10000 } }));
    await expect(exportGguf(dir, out)).rejects.toThrow(/config\.json: its rotary embedding is scaled or partial/);
    writeFileSync(configFile, JSON.stringify({ ...config, use_sliding_window: true, sliding_window: 16, max_window_layers: 0 }));
    await expect(exportGguf(dir, out)).rejects.toThrow(/config\.json: sliding_window attention is on/);
    writeFileSync(configFile, JSON.stringify(config));
    const tokenizerFile = path.join(dir, "tokenizer.json");
    const tokenizer = JSON.parse(readFileSync(tokenizerFile, "utf8")) as Record<string, unknown>;
    writeFileSync(tokenizerFile, JSON.stringify({ ...tokenizer, pre_tokenizer: { type: "Whitespace" } }));
    await expect(exportGguf(dir, out)).rejects.toThrow(GgufExportError);
    await expect(exportGguf(dir, out)).rejects.toThrow(/tokenizer\.json: pre_tokenizer \{"type":"Whitespace"\} is not one llama\.cpp reproduces/);
    writeFileSync(tokenizerFile, JSON.stringify(tokenizer));
    await expect(exportGguf(dir, out, { dtype: "q4_0" as "f16" })).rejects.toThrow(/GGUF dtype must be one of f16, bf16, q8_0, got "q4_0"/);
    expect(existsSync(out)).toBe(false);
  });
});

it("a failed write names the file and leaves nothing behind", async () => {
  const dir = path.join(scratch(), "tiny");
  await createTinyModel(dir, { hiddenSize: 32, numLayers: 1 });
  const blocked = path.join(scratch(), "blocked");
  mkdirSync(path.join(blocked, "model.gguf"), { recursive: true });
  const target = path.join(blocked, "model.gguf");
  const error = await exportGguf(dir, target).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(FileWriteError);
  expect((error as Error).message).toContain(`cannot write ${target}`);
  expect(readdirSync(blocked)).toEqual(["model.gguf"]);
});
