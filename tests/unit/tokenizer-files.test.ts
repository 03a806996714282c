// The files a saved tokenizer leaves for slow (Python) loaders: vocab.json and merges.txt beside tokenizer.json, and a
// tokenizer_class in tokenizer_config.json that splits text the way tokenizer.json's pre-tokenizer does. A reference
// GPT-2 style BPE, written here from vocab.json and merges.txt alone, must encode like our fast tokenizer.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { RotaryModelType } from "../../src/models/config.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { buildByteLevelBpeTokenizer } from "../../src/models/tiny-tokenizer.js";
import { bpeSlowFiles, ComlrlTokenizer, slowTokenizerClass } from "../../src/models/tokenizer.js";

const scratch = mkdtempSync(path.join(tmpdir(), "tokenizer-files-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const readJson = (file: string) => JSON.parse(readFileSync(file, "utf8"));

/** GPT-2's slow tokenizer (transformers' GPT2Tokenizer), from its two files and tokenizer_config's added tokens. */
class ReferenceSlowBpe {
  private readonly vocab: Record<string, number>;
  private readonly ranks = new Map<string, number>();
  private readonly byteToChar: string[] = [];
  private readonly added = new Map<string, number>();
  private readonly specials: RegExp | null;

  /** `addedTokensDecoder` is tokenizer_config.json's `added_tokens_decoder`: id -> token. */
  constructor(vocabJson: string, mergesTxt: string, addedTokensDecoder: Record<string, { content: string }>) {
    this.vocab = JSON.parse(vocabJson);
    const lines = mergesTxt.split("\n");
    if (!lines[0]!.startsWith("#version")) throw new Error("merges.txt lacks its #version header");
    lines.slice(1).filter((line) => line.length > 0).forEach((line, rank) => this.ranks.set(line, rank));
    // bytes_to_unicode(): printable bytes map to themselves, the others to 256, 257, … in byte order.
    let shifted = 0;
    for (let b = 0; b < 256; b++) {
      const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      this.byteToChar.push(String.fromCodePoint(printable ? b : 256 + shifted++));
    }
    for (const [id, token] of Object.entries(addedTokensDecoder)) this.added.set(token.content, Number(id));
    const escaped = [...this.added.keys()].sort((a, b) => b.length - a.length).map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    this.specials = escaped.length > 0 ? new RegExp(`(${escaped.join("|")})`) : null;
  }

  encode(text: string): number[] {
    const ids: number[] = [];
    const pieces = this.specials ? text.split(this.specials) : [text];
    pieces.forEach((piece, i) => {
      if (i % 2 === 1) {
        ids.push(this.added.get(piece)!);
        return;
      }
      for (const word of piece.match(/'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu) ?? []) {
        const symbols = Array.from(new TextEncoder().encode(word), (b) => this.byteToChar[b]!);
        for (const token of this.bpe(symbols)) ids.push(this.id(token));
      }
    });
    return ids;
  }

  /** Repeatedly merges the adjacent pair of lowest rank, everywhere it occurs, until no ranked pair is left. */
  private bpe(symbols: string[]): string[] {
    let word = symbols;
    for (;;) {
      let best: string | null = null;
      for (let i = 0; i + 1 < word.length; i++) {
        const pair = `${word[i]} ${word[i + 1]}`;
        if (this.ranks.has(pair) && (best === null || this.ranks.get(pair)! < this.ranks.get(best)!)) best = pair;
      }
      if (best === null) return word;
      const [left, right] = best.split(" ");
      const merged: string[] = [];
      for (let i = 0; i < word.length; i++) {
        if (i + 1 < word.length && word[i] === left && word[i + 1] === right) {
          merged.push(left + right);
          i++;
        } else {
          merged.push(word[i]!);
        }
      }
      word = merged;
    }
  }

  private id(token: string): number {
    const id = this.vocab[token];
    if (id === undefined) throw new Error(`token ${JSON.stringify(token)} is not in vocab.json`);
    return id;
  }
}

const TEXTS = [
  "Once upon a time, there was a girl who lived in a small village near the woods.",
  "If you add 12 and 30, you get 42. 3.14159 is pi; 1000000 is a million.",
  "It's a good day, isn't it? We'll see what they've learned.",
  "  leading spaces,   runs of spaces,\n\nnewlines,\ttabs and trailing spaces   ",
  "héllo wörld, naïve café — 日本語のテキスト 😀👍🏽",
  "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\nThe answer is 4.<|im_end|><|endoftext|>",
];

describe("saved tokenizers carry slow-loader files", () => {
  for (const modelType of ["qwen2", "qwen3", "llama"] as RotaryModelType[]) {
    it(`${modelType} tiny model: vocab.json and merges.txt match tokenizer.json and encode like the fast tokenizer`, async () => {
      const dir = path.join(scratch, modelType);
      const fast = await createTinyModel(dir, { modelType, numLayers: 1, hiddenSize: 16, numHeads: 2 });
      const tokenizerJson = readJson(path.join(dir, "tokenizer.json"));
      const config = readJson(path.join(dir, "tokenizer_config.json"));
      // The tiny tokenizer splits with GPT-2's byte-level regex, which only GPT2Tokenizer's slow loader reproduces.
      expect(config.tokenizer_class).toBe("GPT2Tokenizer");

      const vocabJson = readFileSync(path.join(dir, "vocab.json"), "utf8");
      expect(JSON.parse(vocabJson)).toEqual(tokenizerJson.model.vocab);
      // In id order, as the tokenizers library writes it.
      const ids = [...vocabJson.matchAll(/":(\d+)[,}]/g)].map((m) => Number(m[1]));
      expect(ids).toEqual([...ids].sort((a, b) => a - b));

      const mergesTxt = readFileSync(path.join(dir, "merges.txt"), "utf8");
      const lines = mergesTxt.split("\n");
      expect(lines[0]).toBe("#version: 0.2");
      expect(lines.at(-1)).toBe("");
      expect(lines.slice(1, -1)).toEqual(tokenizerJson.model.merges);

      const slow = new ReferenceSlowBpe(vocabJson, mergesTxt, config.added_tokens_decoder);
      for (const text of TEXTS) expect(slow.encode(text), text).toEqual(fast.encode(text));
    });
  }
});

describe("tokenizer_class follows the pre-tokenizer", () => {
  const byteLevel = (useRegex: boolean) => ({ type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: useRegex });
  const split = (regex: string) => ({ type: "Split", pattern: { Regex: regex }, behavior: "Isolated", invert: false });
  const QWEN2 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  const LLAMA3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  const bpe = (extra: object = {}) => ({ type: "BPE", vocab: {}, merges: [], ...extra });

  it("names GPT-2, Qwen2 and Llama tokenizers by their split, and only-fast ones as PreTrainedTokenizerFast", () => {
    expect(slowTokenizerClass({ pre_tokenizer: byteLevel(true), model: bpe() })).toBe("GPT2Tokenizer");
    const qwen2 = { type: "Sequence", pretokenizers: [split(QWEN2), byteLevel(false)] };
    expect(slowTokenizerClass({ pre_tokenizer: qwen2, model: bpe() })).toBe("Qwen2Tokenizer");
    const llama2 = {
      normalizer: { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "▁" }, { type: "Replace", pattern: { String: " " }, content: "▁" }] },
      pre_tokenizer: null,
      model: bpe({ byte_fallback: true }),
    };
    expect(slowTokenizerClass(llama2)).toBe("LlamaTokenizer");
    expect(slowTokenizerClass({ pre_tokenizer: { type: "Metaspace", replacement: "▁" }, model: bpe() })).toBe("LlamaTokenizer");
    const llama3 = { type: "Sequence", pretokenizers: [split(LLAMA3), byteLevel(false)] };
    expect(slowTokenizerClass({ pre_tokenizer: llama3, model: bpe() })).toBe("PreTrainedTokenizerFast");
    expect(slowTokenizerClass({ pre_tokenizer: { type: "Whitespace" }, model: bpe() })).toBe("PreTrainedTokenizerFast");
    expect(buildByteLevelBpeTokenizer().tokenizerConfig.tokenizer_class).toBe("GPT2Tokenizer");
  });

  it("keeps the class a loaded tokenizer declared and fills it in when none is declared", async () => {
    const tiny = buildByteLevelBpeTokenizer();
    const declared = ComlrlTokenizer.fromJson({ ...tiny, tokenizerConfig: { ...tiny.tokenizerConfig, tokenizer_class: "Qwen2Tokenizer" } });
    await declared.saveTo(path.join(scratch, "declared"));
    expect(readJson(path.join(scratch, "declared", "tokenizer_config.json")).tokenizer_class).toBe("Qwen2Tokenizer");
    const { tokenizer_class: _, ...undeclaredConfig } = tiny.tokenizerConfig;
    await ComlrlTokenizer.fromJson({ ...tiny, tokenizerConfig: undeclaredConfig }).saveTo(path.join(scratch, "undeclared"));
    expect(readJson(path.join(scratch, "undeclared", "tokenizer_config.json")).tokenizer_class).toBe("GPT2Tokenizer");
  });
});

describe("vocab.json and merges.txt", () => {
  it("are written the same from merges stored as [a, b] pairs", async () => {
    const tiny = buildByteLevelBpeTokenizer();
    const model = tiny.tokenizerJson.model as { merges: string[] };
    const pairs = { ...tiny.tokenizerJson, model: { ...model, merges: model.merges.map((m) => m.split(" ")) } };
    const dir = path.join(scratch, "pairs");
    await ComlrlTokenizer.fromJson({ tokenizerJson: pairs, tokenizerConfig: tiny.tokenizerConfig }).saveTo(dir);
    expect(readFileSync(path.join(dir, "merges.txt"), "utf8")).toBe(`#version: 0.2\n${model.merges.map((m) => `${m}\n`).join("")}`);
  });

  it("refuse a merge that merges.txt cannot hold, and are not written for other models", () => {
    const withSpace = { model: { type: "BPE", vocab: { a: 0, "b c": 1 }, merges: [["a", "b c"]] } };
    expect(() => bpeSlowFiles(withSpace, "odd/tokenizer.json")).toThrow(/odd\/tokenizer.json: merge 0 .*cannot be written to merges.txt/);
    expect(bpeSlowFiles({ model: { type: "Unigram", vocab: [["a", 0]] } }, "uni/tokenizer.json")).toBeUndefined();
  });
});
