// GGUF files in: every supported tensor type dequantized bit for bit as the `gguf` package does, a tiny Llama written as
// llama.cpp's converter writes one (permuted q/k rows, mixed quant types) giving transformers' logits, its tokenizer
// from the metadata, a tiny model of each other family giving transformers' logits, and corrupt or unsupported files refused with the file and the tensor or key named.
// Goldens: scripts/golden/make_gguf_goldens.py.
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { localModelShape } from "../../src/models/memory-estimate.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { decoderConfigOf, parseModelConfig } from "../../src/models/config.js";
import { ggufModelConfig, ggufTokenizerFiles, ggufWeightPlan, readGguf } from "../../src/models/gguf/read.js";
import { resolveModelSource } from "../../src/models/hub.js";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { addon } from "../../src/native/loader.js";

const golden = path.join(import.meta.dirname, "..", "golden", "gguf");
const quantsFile = path.join(golden, "quants", "quants.gguf");
const tinyFile = path.join(golden, "tiny-llama.gguf");
const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-gguf-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"];

function expectedValues(type: string): Float32Array {
  const bytes = readFileSync(path.join(golden, "quants", `${type.toLowerCase()}.f32`));
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}

describe("dequantization", () => {
  it("lists every tensor with its type and shape", () => {
    const { tensors } = readGguf(quantsFile);
    expect(tensors.map((t) => t.type).sort()).toEqual([...TYPES].sort());
    for (const tensor of tensors) expect(tensor.shape).toEqual([4, 256]);
  });

  it.each(TYPES)("%s matches gguf.quants.dequantize bit for bit", (type) => {
    const { shape, values } = addon().ggufTensor(quantsFile, type.toLowerCase());
    expect(shape).toEqual([4, 256]);
    const expected = expectedValues(type);
    expect(values.length).toBe(expected.length);
    const differing = values.findIndex((v, i) => !Object.is(v, expected[i]));
    expect(differing, `first differing value at ${differing}: ${values[differing]} vs ${expected[differing]}`).toBe(-1);
  });
});

describe("a tiny Llama written as llama.cpp writes one", () => {
  const reference = JSON.parse(readFileSync(path.join(golden, "tiny-llama.json"), "utf8")) as {
    config: Record<string, unknown>;
    ids: number[][];
    logits: number[][][];
  };

  it("rebuilds transformers' config from the metadata", () => {
    const config = ggufModelConfig(readGguf(tinyFile), tinyFile);
    for (const key of ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size", "rms_norm_eps", "max_position_embeddings"]) {
      expect(config[key], key).toBe(reference.config[key]);
    }
    expect(config.tie_word_embeddings).toBe(false);
    expect(config.model_type).toBe("llama");
  });

  it("gives transformers' logits (q/k permutation undone, every quant type on the way)", async () => {
    const model = await CausalLM.load(tinyFile);
    try {
      for (const [row, ids] of reference.ids.entries()) {
        const out = await model.generate([ids.slice(0, -1)], { maxNewTokens: 1, returnScores: true });
        // The scores of the one generated step are the logits after the prompt: the last position's.
        const expected = reference.logits[row]!.at(-2)!;
        const got = Array.from(out.scores!);
        const worst = Math.max(...got.map((v, i) => Math.abs(v - expected[i]!)));
        // fp32 round-off, relative to the logits' scale (the random K-quant blocks make them large).
        const scale = Math.max(...expected.map(Math.abs));
        expect(worst / scale).toBeLessThan(1e-5);
      }
    } finally {
      model.dispose();
    }
  });

  it("dequantizes to the load's dtype: bfloat16 logits within bfloat16's precision of transformers' float32 ones", async () => {
    const model = await CausalLM.load(tinyFile, { dtype: "bfloat16" });
    try {
      expect(model.info().dtype).toBe("bfloat16");
      const out = await model.generate([reference.ids[0]!.slice(0, -1)], { maxNewTokens: 1, returnScores: true });
      const expected = reference.logits[0]!.at(-2)!;
      const scale = Math.max(...expected.map(Math.abs));
      const worst = Math.max(...Array.from(out.scores!, (v, i) => Math.abs(v - expected[i]!)));
      expect(worst / scale).toBeLessThan(0.05);
    } finally {
      model.dispose();
    }
  });

  it("is a model source as it is: resolveModelSource returns the file, the memory check reads its shape", async () => {
    expect(await resolveModelSource(tinyFile)).toBe(tinyFile);
    expect(localModelShape(tinyFile)).toMatchObject({ hiddenSize: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, vocabSize: 258, tied: false });
  });

  it("builds its byte-level tokenizer from the metadata", async () => {
    const tokenizer = await ComlrlTokenizer.fromDirectory(tinyFile);
    expect(tokenizer.vocabSize).toBe(258);
    expect(tokenizer.encode("Hi!")).toEqual([72, 105, 33].map((b) => tokenizer.encode(String.fromCharCode(b))[0]));
    expect(tokenizer.eosTokenIds).toEqual([256]);
    expect(tokenizer.padTokenId).toBe(257);
    expect(tokenizer.decode(tokenizer.encode("naïve 東京"))).toBe("naïve 東京");
  });
});

describe("a SentencePiece vocabulary (tokenizer.ggml.model \"llama\") without merges", () => {
  const spFile = path.join(golden, "sentencepiece.gguf");
  const reference = JSON.parse(readFileSync(path.join(golden, "sentencepiece.json"), "utf8")) as {
    merges: [string, string][];
    encodings: Record<string, number[]>;
    plain: Record<string, number[]>;
    decoded: Record<string, string>;
  };

  it("gets transformers' merges from the scores, its encodings (BOS added, byte fallback) and decodings", () => {
    const { tokenizerJson } = ggufTokenizerFiles(readGguf(spFile), spFile);
    expect((tokenizerJson.model as { merges: unknown }).merges).toEqual(reference.merges);
    const tokenizer = ComlrlTokenizer.fromGguf(spFile);
    for (const [text, ids] of Object.entries(reference.encodings)) {
      expect(tokenizer.encode(text), JSON.stringify(text)).toEqual(ids);
      expect(tokenizer.encode(text, { addSpecialTokens: false }), JSON.stringify(text)).toEqual(reference.plain[text]);
      expect(tokenizer.decode(ids), JSON.stringify(text)).toBe(reference.decoded[text]);
    }
  });
});

describe("every other family llama.cpp writes, converted as its converter converts one", () => {
  const families = path.join(golden, "families");
  const names = ["qwen2", "qwen3", "phi3", "gemma2", "gemma3"];

  it.each(names)("%s gives the logits transformers' GGUF loading gives", async (name) => {
    const reference = JSON.parse(readFileSync(path.join(families, `${name}.json`), "utf8")) as { modelType: string; ids: number[]; lastLogits: number[] };
    const model = await CausalLM.load(path.join(families, `${name}.gguf`));
    try {
      expect(model.config.raw.model_type).toBe(reference.modelType);
      const out = await model.generate([reference.ids], { maxNewTokens: 1, returnScores: true });
      const got = Array.from(out.scores!);
      const scale = Math.max(...reference.lastLogits.map(Math.abs));
      const worst = Math.max(...got.map((v, i) => Math.abs(v - reference.lastLogits[i]!)));
      expect(worst / scale).toBeLessThan(1e-5);
    } finally {
      model.dispose();
    }
  });
});

describe("bad files", () => {
  const tiny = readFileSync(tinyFile);
  const write = (name: string, bytes: Uint8Array) => {
    const file = path.join(scratch, name);
    writeFileSync(file, bytes);
    return file;
  };

  it("refuses a truncated file, naming it and the tensor past the end", () => {
    const file = write("truncated.gguf", tiny.subarray(0, tiny.length - 1000));
    expect(() => readGguf(file)).toThrow(new RegExp(`${file.replaceAll(".", "\\.")}: truncated: tensor "[^"]+" ends at byte`));
  });

  it("refuses a file cut inside its header, naming the key", () => {
    const file = write("header.gguf", tiny.subarray(0, 2000));
    expect(() => readGguf(file)).toThrow(/header\.gguf: truncated or corrupt: metadata "tokenizer\.ggml\.tokens" runs past the end of the file/);
  });

  it("refuses a file that is not GGUF", () => {
    const file = write("not.gguf", new TextEncoder().encode("this is not a gguf file at all, just text"));
    expect(() => readGguf(file)).toThrow(/not\.gguf: not a GGUF file/);
  });

  // Where tensor q8_0's ggml type is in the quants file's tensor table: after its name (u64 length, bytes), its
  // dimension count (u32) and its two u64 extents; its u64 offset follows.
  const q8TypeAt = (bytes: Buffer): number => {
    const name = Buffer.from("q8_0");
    const at = bytes.indexOf(Buffer.concat([Buffer.from([name.length, 0, 0, 0, 0, 0, 0, 0]), name]));
    const typeAt = at + 8 + name.length + 4 + 16;
    expect(bytes.readUInt32LE(typeAt)).toBe(8);
    return typeAt;
  };

  it("refuses an unsupported tensor type, naming the tensor and the type", () => {
    // Q8_1 (ggml type 9) has no dequantizer here; its blocks are 2 bytes longer, so the tensor's extent still fits.
    const bytes = Buffer.from(readFileSync(quantsFile));
    bytes.writeUInt32LE(9, q8TypeAt(bytes));
    const file = write("q8_1.gguf", bytes);
    expect(() => addon().ggufTensor(file, "q8_0")).toThrow(/q8_1\.gguf: tensor "q8_0" is Q8_1, which comlrl does not read/);
  });

  it("refuses a tensor offset that wraps past the end of memory, naming the tensor", () => {
    const bytes = Buffer.from(readFileSync(quantsFile));
    bytes.writeBigUInt64LE(0xffffffffffffffe0n, q8TypeAt(bytes) + 4);
    const file = write("wrapped.gguf", bytes);
    expect(() => readGguf(file)).toThrow(/wrapped\.gguf: tensor "q8_0" has an offset past any file/);
  });

  it("refuses an architecture it does not load, naming the key", async () => {
    const bytes = Buffer.from(tiny);
    const at = bytes.indexOf(Buffer.from("general.architecture"));
    // The value (type u32 = 8, length u64 = 5, "llama") follows the key: rename it to "llamb".
    const value = at + "general.architecture".length + 4 + 8;
    expect(bytes.subarray(value, value + 5).toString()).toBe("llama");
    bytes.write("llamb", value);
    const file = write("llamb.gguf", bytes);
    await expect(CausalLM.load(file)).rejects.toThrow(/llamb\.gguf: general\.architecture "llamb" is not one comlrl loads from GGUF/);
  });

  it("refuses a tensor with no place in the architecture, and rope scaling, naming the tensor or key", () => {
    const contents = readGguf(tinyFile);
    const config = ggufModelConfig(contents, tinyFile);
    const extra = { ...contents, tensors: [...contents.tensors, { name: "blk.0.ssm_in.weight", type: "F32", shape: [4] }] };
    expect(() => ggufWeightPlan(extra, config, "x.gguf")).toThrow(/x\.gguf: tensor "blk\.0\.ssm_in\.weight" has no place in a LlamaForCausalLM/);
    const scaled = { ...contents, metadata: { ...contents.metadata, "llama.rope.scaling.type": "linear" } };
    expect(() => ggufModelConfig(scaled, "x.gguf")).toThrow(/x\.gguf: metadata "llama\.rope\.scaling\.type" is "linear"/);
  });

  it("refuses a plan that leaves a parameter without a tensor, naming the file and the parameter", async () => {
    const contents = readGguf(tinyFile);
    const raw = ggufModelConfig(contents, tinyFile);
    const plan = ggufWeightPlan(contents, raw, tinyFile).filter((source) => source.parameter !== "model.norm.weight");
    const load = addon().NativeModel.load({ config: decoderConfigOf(parseModelConfig(raw)), files: [], gguf: { file: tinyFile, tensors: plan }, dtype: "float32", device: "cpu" });
    await expect(load).rejects.toThrow(/tiny-llama\.gguf has no tensor for parameter "model\.norm\.weight"/);
  });

  it("names the file when a GGUF path does not exist", async () => {
    await expect(CausalLM.load(path.join(scratch, "missing.gguf"))).rejects.toThrow(/missing\.gguf/);
  });

  it("copies of the golden load from anywhere (no sidecar files needed)", async () => {
    const copy = path.join(scratch, "copy.gguf");
    copyFileSync(tinyFile, copy);
    const model = await CausalLM.load(copy);
    expect(model.info().parameterCount).toBeGreaterThan(0);
    model.dispose();
  });
});
