// ComlrlTokenizer over the in-process tiny byte-level BPE tokenizer: encoding, padding, special tokens, chat
// templates and the files it reads and writes.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildByteLevelBpeTokenizer, TINY_ENGLISH_CORPUS } from "../../src/models/tiny-tokenizer.js";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";

let scratch: string;
beforeEach(() => {
  scratch = mkdtempSync(path.join(tmpdir(), "comlrl-tok-"));
});
afterEach(() => {
  rmSync(scratch, { recursive: true, force: true });
});

const tiny = buildByteLevelBpeTokenizer();
const tok = ComlrlTokenizer.fromJson({ ...tiny, source: "tiny" });
// Specials sit after the 509 learned tokens, in the order given.
const ENDOFTEXT = 509;
const IM_START = 510;
const IM_END = 511;

/** Writes a model directory holding the given files (objects as JSON, strings as they are). */
function writeDir(name: string, files: Record<string, unknown>): string {
  const dir = path.join(scratch, name);
  mkdirSync(dir, { recursive: true });
  for (const [file, content] of Object.entries(files)) {
    writeFileSync(path.join(dir, file), typeof content === "string" ? content : JSON.stringify(content));
  }
  return dir;
}

describe("buildByteLevelBpeTokenizer", () => {
  it("has the vocabulary size asked for, bytes first and the special tokens last", () => {
    expect(tok.vocabSize).toBe(512);
    const model = tiny.tokenizerJson.model as { type: string; vocab: Record<string, number>; merges: string[] };
    expect(model.type).toBe("BPE");
    expect(Object.keys(model.vocab)).toHaveLength(509);
    expect(model.vocab["!"]).toBe(0);
    expect(model.vocab["Ġ"]).toBeLessThan(256); // the space byte
    expect(model.merges).toHaveLength(509 - 256);
    expect(tiny.tokenizerJson.added_tokens).toEqual(
      ["<|endoftext|>", "<|im_start|>", "<|im_end|>"].map((content, i) => expect.objectContaining({ id: 509 + i, content, special: true })),
    );
    const small = buildByteLevelBpeTokenizer({ vocabSize: 300, corpus: TINY_ENGLISH_CORPUS.slice(0, 10) });
    expect(ComlrlTokenizer.fromJson(small).vocabSize).toBe(300);
  });

  it("is deterministic", () => {
    expect(JSON.stringify(buildByteLevelBpeTokenizer())).toBe(JSON.stringify(tiny));
  });

  it("rejects impossible sizes and a corpus too small for the vocabulary", () => {
    expect(() => buildByteLevelBpeTokenizer({ vocabSize: 200 })).toThrow(/vocabSize must be an integer of at least 256 \+ 3/);
    expect(() => buildByteLevelBpeTokenizer({ vocabSize: 400, corpus: ["ab ab"] })).toThrow(/ran out of pairs/);
  });

  it("learns merges that shorten common English", () => {
    const text = "The cat sat on the mat, and the dog ran after the ball.";
    expect(tok.encode(text).length).toBeLessThan(new TextEncoder().encode(text).length / 2);
  });
});

describe("encode and decode", () => {
  it("round-trips arbitrary UTF-8 text", () => {
    for (const text of [
      "Hello, world!",
      "Crème brûlée, naïve façade, Ångström, Ærøskøbing",
      "emoji 😀👍🏽 and flags 🇫🇷 and family 👨‍👩‍👧",
      "日本語のテキスト、中文，한국어",
      "  leading spaces,\ttabs\nnewlines\r\n and trailing   ",
      "control \u0000\u0001 chars and decomposed e\u0301",
      "",
    ]) {
      expect(tok.decode(tok.encode(text)), JSON.stringify(text)).toBe(text);
    }
  });

  it("keeps special tokens whole and drops them when decoding unless asked not to", () => {
    const ids = tok.encode("<|im_start|>user\nhi<|im_end|>");
    expect(ids[0]).toBe(IM_START);
    expect(ids.at(-1)).toBe(IM_END);
    expect(tok.decode(ids)).toBe("user\nhi");
    expect(tok.decode(ids, { skipSpecialTokens: false })).toBe("<|im_start|>user\nhi<|im_end|>");
    expect(tok.decode(new Int32Array([ENDOFTEXT]))).toBe("");
  });

  it("decodes ids past the tokenizer (a padded embedding table's) to nothing, as transformers; refuses non-ids", () => {
    const hi = tok.encode("hi", { addSpecialTokens: false });
    expect(tok.decode([...hi, 512, 151_935])).toBe("hi");
    expect(tok.decode([512])).toBe("");
    expect(() => tok.decode([-1])).toThrow("decode: -1 is not a token id (a non-negative integer), decoding for tiny");
    expect(() => tok.decode([1.5])).toThrow(RangeError);
  });
});

describe("encodeBatch", () => {
  const a = tok.encode("the cat sat");
  const b = tok.encode("a");
  const pad = ENDOFTEXT;

  it("pads on the right", () => {
    expect(a.length).toBeGreaterThan(b.length);
    const batch = tok.encodeBatch(["the cat sat", "a", ""], { padding: "right" });
    const w = a.length;
    expect(batch.width).toBe(w);
    expect(Array.from(batch.ids)).toEqual([...a, ...b, ...Array(w - b.length).fill(pad), ...Array(w).fill(pad)]);
    expect(Array.from(batch.attentionMask)).toEqual([...Array(w).fill(1), ...Array(b.length).fill(1), ...Array(w - b.length).fill(0), ...Array(w).fill(0)]);
    expect(Array.from(batch.lengths)).toEqual([w, b.length, 0]);
  });

  it("pads on the left", () => {
    const batch = tok.encodeBatch(["a", "the cat sat"], { padding: "left" });
    const w = a.length;
    expect(Array.from(batch.ids)).toEqual([...Array(w - b.length).fill(pad), ...b, ...a]);
    expect(Array.from(batch.attentionMask)).toEqual([...Array(w - b.length).fill(0), ...Array(b.length).fill(1), ...Array(w).fill(1)]);
    expect(Array.from(batch.lengths)).toEqual([b.length, w]);
    expect(batch.ids).toBeInstanceOf(Int32Array);
  });

  it("handles an empty batch", () => {
    const batch = tok.encodeBatch([], { padding: "left" });
    expect(batch.width).toBe(0);
    expect(batch.ids).toHaveLength(0);
  });
});

describe("special token roles", () => {
  it("takes pad and eos from tokenizer_config.json", () => {
    expect(tok.padTokenId).toBe(ENDOFTEXT);
    expect(tok.eosTokenIds).toEqual([IM_END]);
    expect(tok.bosTokenId).toBeNull();
    expect(tok.specialTokens).toEqual({
      bos: null,
      eos: "<|im_end|>",
      pad: "<|endoftext|>",
      unk: null,
      all: ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    });
  });

  it("adds generation_config.json's eos_token_id (one id or a list) without duplicates", async () => {
    const list = writeDir("list", { ...files(tiny), "generation_config.json": { eos_token_id: [IM_END, ENDOFTEXT] } });
    expect((await ComlrlTokenizer.fromDirectory(list)).eosTokenIds).toEqual([IM_END, ENDOFTEXT]);
    const single = writeDir("single", { ...files(tiny), "generation_config.json": { eos_token_id: ENDOFTEXT } });
    expect((await ComlrlTokenizer.fromDirectory(single)).eosTokenIds).toEqual([IM_END, ENDOFTEXT]);
    const bad = writeDir("bad", { ...files(tiny), "generation_config.json": { eos_token_id: "x" } });
    await expect(ComlrlTokenizer.fromDirectory(bad)).rejects.toThrow(`${bad}/generation_config.json: eos_token_id must be`);
  });

  it("uses eos as pad when there is no pad token", async () => {
    const noPad = buildByteLevelBpeTokenizer({ specialTokens: ["<|im_start|>", "<|im_end|>"] });
    expect(noPad.tokenizerConfig.pad_token).toBeNull();
    const t = await ComlrlTokenizer.fromDirectory(writeDir("nopad", files(noPad)));
    expect(t.padTokenId).toBe(t.eosTokenIds[0]);
    expect(t.specialTokens.pad).toBe("<|im_end|>");
  });

  it("falls back to generation_config.json's eos when the tokenizer names none", async () => {
    const bare = buildByteLevelBpeTokenizer({ specialTokens: ["<|stop|>"] });
    const t = await ComlrlTokenizer.fromDirectory(writeDir("bare", { ...files(bare), "generation_config.json": { eos_token_id: 511 } }));
    expect(t.eosTokenIds).toEqual([511]);
    expect(t.padTokenId).toBe(511);
    expect(t.specialTokens.pad).toBe("<|stop|>");
  });

  it("fails, naming the directory, when there is neither pad nor eos", async () => {
    const dir = writeDir("neither", files(buildByteLevelBpeTokenizer({ specialTokens: ["<|im_start|>"] })));
    await expect(ComlrlTokenizer.fromDirectory(dir)).rejects.toThrow(new RegExp(`Tokenizer must expose pad_token_id: ${dir}`));
  });

  it("lets special_tokens_map.json override the config, token objects included", async () => {
    const dir = writeDir("map", {
      ...files(tiny),
      "special_tokens_map.json": { pad_token: { content: "<|im_start|>", lstrip: false, special: true } },
    });
    expect((await ComlrlTokenizer.fromDirectory(dir)).padTokenId).toBe(IM_START);
  });

  it("rejects a role token that is not in the vocabulary", async () => {
    const dir = writeDir("unknown", files({ ...tiny, tokenizerConfig: { ...tiny.tokenizerConfig, eos_token: "</s>" } }));
    await expect(ComlrlTokenizer.fromDirectory(dir)).rejects.toThrow(`${dir}: eos_token "</s>" is not in the vocabulary`);
  });
});

describe("loading errors", () => {
  it("names the file holding malformed JSON", async () => {
    const dir = writeDir("malformed", { "tokenizer.json": tiny.tokenizerJson, "tokenizer_config.json": '{"eos_token": "<|im_end|>",' });
    await expect(ComlrlTokenizer.fromDirectory(dir)).rejects.toThrow(`Malformed JSON in ${path.join(dir, "tokenizer_config.json")}`);
    writeFileSync(path.join(dir, "tokenizer_config.json"), "[1, 2]");
    await expect(ComlrlTokenizer.fromDirectory(dir)).rejects.toThrow(`Malformed ${path.join(dir, "tokenizer_config.json")}: expected a JSON object`);
  });

  it("says so when tokenizer.json is missing", async () => {
    const dir = writeDir("slow-only", { "tokenizer_config.json": tiny.tokenizerConfig });
    await expect(ComlrlTokenizer.fromDirectory(dir)).rejects.toThrow(`No tokenizer.json in ${dir}`);
  });
});

describe("applyChatTemplate", () => {
  const messages = [
    { role: "system", content: "You are terse." },
    { role: "user", content: "What is 2+2?" },
  ];

  it("renders ChatML, with the generation prompt when asked", () => {
    const turns = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n";
    expect(tok.applyChatTemplate(messages)).toBe(turns);
    expect(tok.applyChatTemplate(messages, { addGenerationPrompt: true })).toBe(`${turns}<|im_start|>assistant\n`);
  });

  it("passes the special tokens and extra variables to the template", () => {
    const template = "{{ eos_token }}|{{ pad_token }}|{% if enable_thinking %}think{% else %}no-think{% endif %}";
    const t = ComlrlTokenizer.fromJson({ ...tiny, tokenizerConfig: { ...tiny.tokenizerConfig, chat_template: template } });
    expect(t.applyChatTemplate(messages, { variables: { enable_thinking: false } })).toBe("<|im_end|>|<|endoftext|>|no-think");
  });

  it("reads chat_template.jinja when the config has no template, and saves it into the config", async () => {
    const config = { ...tiny.tokenizerConfig, chat_template: undefined };
    const dir = writeDir("jinja", { ...files({ ...tiny, tokenizerConfig: config }), "chat_template.jinja": "{{ messages[0].content }}!" });
    const t = await ComlrlTokenizer.fromDirectory(dir);
    expect(t.applyChatTemplate(messages)).toBe("You are terse.!");
    const saved = path.join(scratch, "saved-jinja");
    await t.saveTo(saved);
    expect((await ComlrlTokenizer.fromDirectory(saved)).applyChatTemplate(messages)).toBe("You are terse.!");
  });

  it("fails clearly without a template, or when the template fails", () => {
    const plain = ComlrlTokenizer.fromJson({ ...tiny, tokenizerConfig: { ...tiny.tokenizerConfig, chat_template: null }, source: "plain" });
    expect(() => plain.applyChatTemplate(messages)).toThrow(/plain has no chat template/);
    const raising = ComlrlTokenizer.fromJson({
      ...tiny,
      tokenizerConfig: { ...tiny.tokenizerConfig, chat_template: "{{ raise_exception('no system role') }}" },
      source: "strict",
    });
    expect(() => raising.applyChatTemplate(messages)).toThrow("The chat template of strict failed: no system role");
  });
});

describe("addSpecialTokens and saveTo", () => {
  it("adds tokens that encode to single ids and are skipped by decode", () => {
    const t = ComlrlTokenizer.fromJson(tiny);
    expect(t.addSpecialTokens(["<tool>", "</tool>", "<|im_end|>"])).toBe(2);
    expect(t.vocabSize).toBe(514);
    const ids = t.encode("call<tool>x</tool>");
    expect(ids).toContain(512);
    expect(ids).toContain(513);
    expect(t.decode(ids)).toBe("callx");
    expect(t.decode(ids, { skipSpecialTokens: false })).toBe("call<tool>x</tool>");
    expect(t.specialTokens.all).toEqual(expect.arrayContaining(["<tool>", "</tool>"]));
    // The original object is left alone.
    expect(tok.vocabSize).toBe(512);
  });

  it("makes an existing plain token special without a new id", () => {
    const t = ComlrlTokenizer.fromJson(tiny);
    expect(t.addSpecialTokens(["Ġthe"])).toBe(0);
    expect(t.vocabSize).toBe(512);
    expect(t.specialTokens.all).toContain("Ġthe");
  });

  it("saves atomically and loads back the same tokenizer", async () => {
    const t = await ComlrlTokenizer.fromDirectory(writeDir("orig", { ...files(tiny), "generation_config.json": { eos_token_id: [IM_END, ENDOFTEXT] } }));
    t.addSpecialTokens(["<tool>"]);
    const out = path.join(scratch, "out", "nested");
    await t.saveTo(out);
    expect(readdirSync(out).sort()).toEqual(["merges.txt", "tokenizer.json", "tokenizer_config.json", "vocab.json"]);
    const back = await ComlrlTokenizer.fromDirectory(out);
    expect(back.vocabSize).toBe(513);
    expect(back.padTokenId).toBe(t.padTokenId);
    // generation_config.json is the model's to save; only the tokenizer's own eos comes back.
    expect(back.eosTokenIds).toEqual([IM_END]);
    const text = "Once upon a time <tool> 😀 <|im_end|>";
    expect(back.encode(text)).toEqual(t.encode(text));
    expect(back.specialTokens).toEqual(t.specialTokens);
    expect(back.applyChatTemplate([{ role: "user", content: "hi" }])).toBe(t.applyChatTemplate([{ role: "user", content: "hi" }]));
  });
});

function files(t: { tokenizerJson: unknown; tokenizerConfig: unknown }): Record<string, unknown> {
  return { "tokenizer.json": t.tokenizerJson, "tokenizer_config.json": t.tokenizerConfig };
}
