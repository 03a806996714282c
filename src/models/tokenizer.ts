// Tokenizers for the agents: Hugging Face `tokenizer.json` files, run by @huggingface/tokenizers (pure TypeScript),
// with the transformers conventions CoMLRL relies on layered on top: special-token roles from tokenizer_config.json
// (and special_tokens_map.json), extra eos ids from generation_config.json, pad := eos when a model has no pad token
// (COMLRL-SPEC §5.2), padded batches for the native side, and chat templates rendered with @huggingface/jinja.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { writeFileAtomic } from "../util/atomic.js";
import { BoundedChatTemplate } from "./chat-template.js";
import { ggufTokenizerFiles, isGgufPath, readGguf } from "./gguf/read.js";
import { makeDirs } from "../util/make-dirs.js";
import { cleansUpTokenizationSpaces, matchRustDecoding } from "./tokenizer-compat.js";

/** One message of a chat, as chat templates take them. */
export interface ChatMessage {
  /** "system", "user", "assistant", … */
  role: string;
  /** The message text. */
  content: string;
}

/** A padded batch, row-major `[batch, width]`, ready to hand to the native side. */
export interface EncodedBatch {
  /** Token ids, padded to width with the pad token. */
  ids: Int32Array;
  /** 1 on real tokens, 0 on padding. */
  attentionMask: Int32Array;
  /** Unpadded length of each row. */
  lengths: Int32Array;
  /** Row length: the longest sequence in the batch. */
  width: number;
}

/** The special tokens by role, as strings. */
export interface SpecialTokens {
  /** Beginning-of-sequence token, or null when the tokenizer has none. */
  bos: string | null;
  /** End-of-sequence token, or null when the tokenizer has none. */
  eos: string | null;
  /** Always set: it falls back to eos. */
  pad: string;
  /** Unknown-token placeholder, or null when the tokenizer has none. */
  unk: string | null;
  /** Every token that `decode` drops by default. */
  all: string[];
}

/** A tokenizer's files, already parsed, for ComlrlTokenizer.fromJson. */
export interface TokenizerSources {
  /** Contents of `tokenizer.json`. */
  tokenizerJson: Record<string, unknown>;
  /** Contents of `tokenizer_config.json`. */
  tokenizerConfig: Record<string, unknown>;
  /** Contents of `generation_config.json`, when the model has one; its `eos_token_id` adds stop tokens. */
  generationConfig?: Record<string, unknown>;
  /** Where these came from, for error messages (a directory, or a description). */
  source?: string;
}

type JsonObject = Record<string, unknown>;

// transformers' named special-token attributes; chat templates see them as variables of the same names.
const ROLE_KEYS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"] as const;

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Reads and parses a JSON object file; `optional` files that do not exist give `undefined`. */
async function readJsonObject(file: string, optional: boolean): Promise<JsonObject | undefined> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT" && optional) return undefined;
    throw new Error(`Cannot read ${file}: ${(err as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new Error(`Malformed JSON in ${file}: ${(err as Error).message}`);
  }
  if (!isObject(value)) throw new Error(`Malformed ${file}: expected a JSON object at the top level`);
  return value;
}

async function readOptionalText(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Error(`Cannot read ${file}: ${(err as Error).message}`);
  }
}

/**
 * Special-token entries are strings, or (older transformers files) objects such as
 * `{"__type": "AddedToken", "content": "</s>", ...}`; returns the token text, or null when unset.
 */
function tokenText(value: unknown, where: string): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === "string") return value;
  if (isObject(value) && typeof value.content === "string") return value.content;
  throw new Error(`${where}: expected a token string or an object with "content", got ${JSON.stringify(value)}`);
}

/** The chat template to use: a string, or transformers' list of named templates, of which "default" is taken. */
function pickChatTemplate(value: unknown, where: string): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === "string") return value;
  if (Array.isArray(value)) {
    const named = value.find((t) => isObject(t) && t.name === "default");
    if (isObject(named) && typeof named.template === "string") return named.template;
    throw new Error(`${where}: chat_template is a list of named templates without a "default" one`);
  }
  throw new Error(`${where}: chat_template must be a string or a list of {name, template}`);
}

/** A Hugging Face tokenizer (tokenizer.json, tokenizer_config.json) with its chat template: encoding, decoding, padding (docs/models.md). */
export class ComlrlTokenizer {
  /** Where the tokenizer came from (a directory, or the `source` given to {@link fromJson}). */
  readonly source: string;
  /** Ids that end generation: the tokenizer's eos token, then generation_config.json's `eos_token_id`s. */
  readonly eosTokenIds: number[];
  /** The id padding uses (tokenizer_config.json pad_token, else EOS). */
  readonly padTokenId: number;
  /** The beginning-of-sequence id, when the tokenizer has one. */
  readonly bosTokenId: number | null;

  private tokenizerJson: JsonObject;
  private readonly config: JsonObject;
  private tokenizer: Tokenizer;
  private readonly chatTemplate: string | null;
  private compiledTemplate: BoundedChatTemplate | null = null;

  private constructor(sources: TokenizerSources, chatTemplate: string | null) {
    this.source = sources.source ?? "tokenizer";
    this.tokenizerJson = sources.tokenizerJson;
    this.config = { ...sources.tokenizerConfig };
    const configWhere = `${this.source}/tokenizer_config.json`;
    // The library reads additional_special_tokens as plain strings.
    if (Array.isArray(this.config.additional_special_tokens)) {
      this.config.additional_special_tokens = this.config.additional_special_tokens.map((t, i) =>
        tokenText(t, `${configWhere}: additional_special_tokens[${i}]`),
      );
    }
    for (const key of ROLE_KEYS) {
      if (key in this.config) this.config[key] = tokenText(this.config[key], `${configWhere}: ${key}`);
    }
    this.tokenizer = this.buildTokenizer();

    const eos = this.role("eos_token");
    const eosIds = eos === null ? [] : [this.idOfConfigToken("eos_token")];
    for (const id of generationEosIds(sources.generationConfig, `${this.source}/generation_config.json`)) {
      if (!eosIds.includes(id)) eosIds.push(id);
    }
    this.eosTokenIds = eosIds;

    // COMLRL-SPEC §5.2: pad := eos when missing, and a tokenizer without either cannot pad batches at all.
    if (this.role("pad_token") === null) {
      if (eosIds.length === 0) {
        throw new Error(
          `Tokenizer must expose pad_token_id: ${this.source} sets neither pad_token nor eos_token ` +
            `(tokenizer_config.json, special_tokens_map.json) nor eos_token_id (generation_config.json)`,
        );
      }
      this.config.pad_token = eos ?? this.tokenAt(eosIds[0]!);
    }
    this.padTokenId = this.idOfConfigToken("pad_token");
    this.bosTokenId = this.role("bos_token") === null ? null : this.idOfConfigToken("bos_token");
    this.chatTemplate = chatTemplate;
  }

  /**
   * Loads `tokenizer.json` and `tokenizer_config.json` from a model directory, plus, when present,
   * `special_tokens_map.json` (its entries override the config's, as in transformers), `generation_config.json` (extra
   * eos ids) and `chat_template.jinja` (the template newer transformers versions save outside the config). A .gguf
   * file is read as fromGguf reads it.
   */
  static async fromDirectory(dir: string): Promise<ComlrlTokenizer> {
    if (isGgufPath(dir)) return ComlrlTokenizer.fromGguf(dir);
    const file = (name: string) => path.join(dir, name);
    const tokenizerJson = await readJsonObject(file("tokenizer.json"), true);
    if (tokenizerJson === undefined) {
      throw new Error(
        `No tokenizer.json in ${dir}: only "fast" tokenizers saved as tokenizer.json are supported ` +
          `(re-save it with transformers' AutoTokenizer.save_pretrained to produce one)`,
      );
    }
    const tokenizerConfig = (await readJsonObject(file("tokenizer_config.json"), true)) ?? {};
    const specialTokensMap = await readJsonObject(file("special_tokens_map.json"), true);
    const generationConfig = await readJsonObject(file("generation_config.json"), true);
    const configTemplate = pickChatTemplate(tokenizerConfig.chat_template, file("tokenizer_config.json"));
    const chatTemplate = configTemplate ?? (await readOptionalText(file("chat_template.jinja"))) ?? null;
    return new ComlrlTokenizer(
      { tokenizerJson, tokenizerConfig: { ...tokenizerConfig, ...specialTokensMap }, generationConfig, source: dir },
      chatTemplate,
    );
  }

  /** The tokenizer and chat template a .gguf file's `tokenizer.ggml.*` metadata describes, as transformers builds them (src/models/gguf/read.ts). */
  static fromGguf(file: string): ComlrlTokenizer {
    return ComlrlTokenizer.fromJson({ ...ggufTokenizerFiles(readGguf(file), file), source: file });
  }

  /** Builds a tokenizer from already-parsed file contents (e.g. the output of `buildByteLevelBpeTokenizer` in src/models/tiny-tokenizer.ts). */
  static fromJson(sources: TokenizerSources): ComlrlTokenizer {
    const where = `${sources.source ?? "tokenizer"}/tokenizer_config.json`;
    return new ComlrlTokenizer(sources, pickChatTemplate(sources.tokenizerConfig.chat_template, where));
  }

  /** The chat template's Jinja source (tokenizer_config.json's, else chat_template.jinja's), or null when there is none. */
  get chatTemplateSource(): string | null {
    return this.chatTemplate;
  }

  /** Number of token ids, added tokens included: the embedding rows a model needs for this tokenizer. */
  get vocabSize(): number {
    return this.tokenizer.model!.vocab.length;
  }

  /**
   * tokenizer_config.json's model_max_length, the length transformers truncates to; null when it is absent or
   * transformers' "no limit" (VERY_LARGE_INTEGER, 1e30).
   */
  get modelMaxLength(): number | null {
    const length = this.config.model_max_length;
    return typeof length === "number" && Number.isSafeInteger(length) && length > 0 ? length : null;
  }

  /** tokenizer_config.json's truncation_side: which end of a text truncation drops ("right" unless set). */
  get truncationSide(): "left" | "right" {
    return this.config.truncation_side === "left" ? "left" : "right";
  }

  /** The special tokens by role (bos, eos, pad, unk) and all of them, as the tokenizer's files name them. */
  get specialTokens(): SpecialTokens {
    const all = new Set<string>();
    for (const token of this.addedTokens()) if (token.special === true) all.add(String(token.content));
    for (const token of (this.config.additional_special_tokens as string[] | undefined) ?? []) all.add(token);
    const pad = this.role("pad_token")!;
    return { bos: this.role("bos_token"), eos: this.role("eos_token"), pad, unk: this.role("unk_token"), all: [...all] };
  }

  /** Token ids of `text`; `addSpecialTokens` (default true) lets the post-processor add e.g. a BOS token. */
  encode(text: string, options: { addSpecialTokens?: boolean } = {}): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: options.addSpecialTokens ?? true }).ids;
  }

  /**
   * Text of `ids`; special tokens are dropped unless `skipSpecialTokens` is false. Ids the tokenizer has no token for
   * decode to nothing, as transformers decodes them: a model's embedding table is often padded past its tokenizer
   * (Qwen2.5: 151,936 rows over 151,665 tokens), so sampling can pick such an id.
   */
  decode(ids: ArrayLike<number>, options: { skipSpecialTokens?: boolean } = {}): string {
    const list = Array.from(ids);
    for (const id of list) {
      // Not an id at all is a caller bug (Python's tokenizers raises on it too).
      if (!Number.isInteger(id) || id < 0) throw new RangeError(`decode: ${id} is not a token id (a non-negative integer), decoding for ${this.source}`);
    }
    const known = list.filter((id) => this.tokenizer.id_to_token(id) !== undefined);
    if (known.length === 0) return "";
    return this.tokenizer.decode(known, {
      skip_special_tokens: options.skipSpecialTokens ?? true,
      clean_up_tokenization_spaces: cleansUpTokenizationSpaces(this.tokenizerJson, this.config),
    });
  }

  /** Encodes `texts` into one padded `[batch, width]` block; `padding` says which side the pad tokens go. */
  encodeBatch(texts: readonly string[], options: { padding: "left" | "right"; addSpecialTokens?: boolean }): EncodedBatch {
    const rows = texts.map((text) => this.encode(text, { addSpecialTokens: options.addSpecialTokens }));
    const width = rows.reduce((max, row) => Math.max(max, row.length), 0);
    const ids = new Int32Array(rows.length * width).fill(this.padTokenId);
    const attentionMask = new Int32Array(rows.length * width);
    const lengths = new Int32Array(rows.length);
    rows.forEach((row, b) => {
      const start = b * width + (options.padding === "left" ? width - row.length : 0);
      ids.set(row, start);
      attentionMask.fill(1, start, start + row.length);
      lengths[b] = row.length;
    });
    return { ids, attentionMask, lengths, width };
  }

  /**
   * Renders `messages` with the model's chat template. The template sees `messages`, `add_generation_prompt`, the
   * special tokens by role (`bos_token`, `eos_token`, …) and any `variables` (e.g. Qwen3's `enable_thinking`).
   */
  applyChatTemplate(
    messages: readonly ChatMessage[],
    options: { addGenerationPrompt?: boolean; variables?: Record<string, unknown> } = {},
  ): string {
    if (this.chatTemplate === null) {
      throw new Error(
        `${this.source} has no chat template (no chat_template in tokenizer_config.json, no chat_template.jinja); ` +
          `format prompts as plain text instead`,
      );
    }
    const roles = Object.fromEntries(ROLE_KEYS.map((key) => [key, this.role(key) ?? undefined]));
    try {
      this.compiledTemplate ??= new BoundedChatTemplate(this.chatTemplate);
      return this.compiledTemplate.render({
        ...roles,
        ...options.variables,
        messages,
        add_generation_prompt: options.addGenerationPrompt ?? false,
      });
    } catch (err) {
      throw new Error(`The chat template of ${this.source} failed: ${(err as Error).message}`);
    }
  }

  /**
   * Adds `tokens` as special tokens (never split, dropped by `decode`) and returns how many new ids were created;
   * tokens already in the vocabulary keep their id and become special. New ids start at the old `vocabSize`, so the
   * model's embeddings must cover the new `vocabSize`.
   */
  addSpecialTokens(tokens: readonly string[]): number {
    // @huggingface/tokenizers has no way to add tokens to a built tokenizer, so the tokenizer.json object is edited
    // and the tokenizer rebuilt from it.
    const added = this.addedTokens().map((t) => ({ ...t }));
    let nextId = this.vocabSize;
    let created = 0;
    for (const content of tokens) {
      if (content.length === 0) throw new Error("addSpecialTokens: a special token must be a non-empty string");
      const existing = added.find((t) => t.content === content);
      if (existing) {
        existing.special = true;
        continue;
      }
      const known = this.tokenizer.token_to_id(content);
      const id = known ?? nextId++;
      if (known === undefined) created++;
      added.push({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
    }
    added.sort((a, b) => (a.id as number) - (b.id as number));
    this.tokenizerJson = { ...this.tokenizerJson, added_tokens: added };
    this.tokenizer = this.buildTokenizer();

    const additional = (this.config.additional_special_tokens as string[] | undefined) ?? [];
    this.config.additional_special_tokens = [...additional, ...tokens.filter((t) => !additional.includes(t))];
    // Keep transformers' own record of added tokens in step, so a saved tokenizer reloads the same in Python.
    if (isObject(this.config.added_tokens_decoder)) {
      this.config.added_tokens_decoder = Object.fromEntries(added.map(({ id, ...token }) => [String(id), token]));
    }
    return created;
  }

  /**
   * Writes `tokenizer.json` and `tokenizer_config.json` (chat template and tokenizer class included) into `dir`, and
   * for a BPE model also `vocab.json` and `merges.txt`, which slow (Python) tokenizer loaders read instead; each file is
   * written atomically.
   */
  async saveTo(dir: string): Promise<void> {
    await makeDirs(dir);
    // A template read from chat_template.jinja goes into the config; one already there is kept as written, and so is
    // the tokenizer class a real checkpoint declared.
    const config = {
      ...this.config,
      chat_template: this.config.chat_template ?? this.chatTemplate ?? undefined,
      tokenizer_class: typeof this.config.tokenizer_class === "string" ? this.config.tokenizer_class : slowTokenizerClass(this.tokenizerJson),
    };
    const slowFiles = bpeSlowFiles(this.tokenizerJson, `${this.source}/tokenizer.json`);
    await writeFileAtomic(path.join(dir, "tokenizer.json"), JSON.stringify(this.tokenizerJson, null, 2) + "\n");
    await writeFileAtomic(path.join(dir, "tokenizer_config.json"), JSON.stringify(config, null, 2) + "\n");
    if (slowFiles) {
      await writeFileAtomic(path.join(dir, "vocab.json"), slowFiles.vocabJson);
      await writeFileAtomic(path.join(dir, "merges.txt"), slowFiles.mergesTxt);
    }
  }

  private buildTokenizer(): Tokenizer {
    const where = `${this.source}/tokenizer.json`;
    if (!isObject(this.tokenizerJson.model)) throw new Error(`Malformed ${where}: no "model" object`);
    // The library insists on these keys being present, though null is allowed and common.
    const json = { normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null, added_tokens: [], ...this.tokenizerJson };
    let tokenizer: Tokenizer;
    try {
      tokenizer = new Tokenizer(json, this.config);
    } catch (err) {
      throw new Error(`Cannot build a tokenizer from ${where}: ${(err as Error).message}`);
    }
    matchRustDecoding(tokenizer);
    return tokenizer;
  }

  private addedTokens(): JsonObject[] {
    const added = this.tokenizerJson.added_tokens ?? [];
    if (!Array.isArray(added) || !added.every(isObject)) {
      throw new Error(`Malformed ${this.source}/tokenizer.json: "added_tokens" must be a list of objects`);
    }
    return added;
  }

  private role(key: (typeof ROLE_KEYS)[number]): string | null {
    return (this.config[key] as string | null | undefined) ?? null;
  }

  private idOfConfigToken(key: (typeof ROLE_KEYS)[number]): number {
    const token = this.role(key)!;
    const id = this.tokenizer.token_to_id(token);
    if (id === undefined) {
      throw new Error(`${this.source}: ${key} ${JSON.stringify(token)} is not in the vocabulary of tokenizer.json`);
    }
    return id;
  }

  private tokenAt(id: number): string {
    const token = this.tokenizer.id_to_token(id);
    if (token === undefined) {
      throw new Error(`${this.source}/generation_config.json: eos_token_id ${id} is not in the vocabulary of tokenizer.json`);
    }
    return token;
  }
}

/** `eos_token_id` of a generation config: absent, one id, or a list of ids. */
function generationEosIds(generationConfig: JsonObject | undefined, where: string): number[] {
  const value = generationConfig?.eos_token_id;
  if (value === undefined || value === null) return [];
  const ids = Array.isArray(value) ? value : [value];
  if (!ids.every((id) => Number.isInteger(id) && id >= 0)) {
    throw new Error(`${where}: eos_token_id must be a token id or a list of token ids, got ${JSON.stringify(value)}`);
  }
  return ids as number[];
}

// The split pattern of Qwen2's tokenizer.json (and of transformers' Qwen2Tokenizer, which hard-codes it).
const QWEN2_SPLIT_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** A component and, for Sequences, everything inside it, in order. */
function flattenComponents(component: unknown, listKey: string): JsonObject[] {
  if (!isObject(component)) return [];
  if (component.type === "Sequence" && Array.isArray(component[listKey])) {
    return (component[listKey] as unknown[]).flatMap((inner) => flattenComponents(inner, listKey));
  }
  return [component];
}

/**
 * The transformers class whose slow (Python) tokenizer splits text the way this tokenizer.json does, for
 * tokenizer_config.json's `tokenizer_class`: GPT-2's byte-level regex is GPT2Tokenizer, Qwen2's split regex before a
 * byte-level step is Qwen2Tokenizer, SentencePiece-style "▁" spaces (Metaspace, or Llama's normalizer with byte
 * fallback) are LlamaTokenizer, and anything else only loads fast, as PreTrainedTokenizerFast.
 */
export function slowTokenizerClass(tokenizerJson: JsonObject): string {
  const pre = flattenComponents(tokenizerJson.pre_tokenizer, "pretokenizers");
  const normalizers = flattenComponents(tokenizerJson.normalizer, "normalizers");
  const model = isObject(tokenizerJson.model) ? tokenizerJson.model : {};
  const metaspaceNormalizer = normalizers.some((n) => (n.type === "Replace" && n.content === "\u2581") || (n.type === "Prepend" && n.prepend === "\u2581"));
  if (pre.some((p) => p.type === "Metaspace") || (metaspaceNormalizer && model.byte_fallback === true)) return "LlamaTokenizer";
  const byteLevel = pre.findIndex((p) => p.type === "ByteLevel");
  if (byteLevel >= 0) {
    const splits = pre.slice(0, byteLevel).filter((p) => p.type === "Split");
    const usesGpt2Regex = pre[byteLevel]!.use_regex !== false;
    if (splits.length === 0 && usesGpt2Regex) return "GPT2Tokenizer";
    const onlyQwenSplit = splits.length === 1 && isObject(splits[0]!.pattern) && splits[0]!.pattern.Regex === QWEN2_SPLIT_REGEX;
    if (onlyQwenSplit && !usesGpt2Regex && byteLevel === pre.length - 1) return "Qwen2Tokenizer";
  }
  return "PreTrainedTokenizerFast";
}

/**
 * `vocab.json` (token -> id, in id order, as the tokenizers library writes it) and `merges.txt` ("#version: 0.2" then
 * one "left right" pair per line) of a BPE tokenizer.json; undefined for other models. Merges are stored as "a b"
 * strings or, in newer files, as [a, b] pairs.
 */
export function bpeSlowFiles(tokenizerJson: JsonObject, where: string): { vocabJson: string; mergesTxt: string } | undefined {
  const model = tokenizerJson.model;
  if (!isObject(model) || model.type !== "BPE") return undefined;
  if (!isObject(model.vocab) || !Array.isArray(model.merges)) throw new Error(`Malformed ${where}: a BPE model needs "vocab" and "merges"`);
  const vocab = Object.entries(model.vocab).sort(([, a], [, b]) => (a as number) - (b as number));
  const vocabJson = `{${vocab.map(([token, id]) => `${JSON.stringify(token)}:${id}`).join(",")}}`;
  const lines = model.merges.map((merge, i) => {
    const pair = typeof merge === "string" ? merge.split(" ") : merge;
    if (!Array.isArray(pair) || pair.length !== 2 || !pair.every((part) => typeof part === "string" && part.length > 0 && !part.includes(" "))) {
      throw new Error(
        `${where}: merge ${i} (${JSON.stringify(merge)}) cannot be written to merges.txt, which holds two space-free tokens per line`,
      );
    }
    return `${pair[0]} ${pair[1]}\n`;
  });
  return { vocabJson, mergesTxt: `#version: 0.2\n${lines.join("")}` };
}
