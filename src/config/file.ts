// Config files: JSON or YAML (.yaml, .yml) objects with camelCase or CoMLRL's snake_case keys, either flat or laid
// out in sections the way CoMLRL's YAML configs are ({"model": {...}, "magrpo": {...}}). The result is raw: a config
// builder validates it, given { source: path } so that its errors name the file too.
import { statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Node } from "yaml";
import { irregularFileKind } from "../util/regular-file.js";
import { ConfigError } from "./fields.js";

/** Options of loadConfigFile. */
export interface LoadConfigOptions {
  /** The section a trainer reads ("magrpo", "iac", …). A flat file, one without sections, is returned whole. */
  readonly section?: string;
}

/** A config file's parsed contents (or one section of them): a plain object of fields, not yet validated. */
export type RawConfig = Record<string, unknown>;

function isPlainObject(value: unknown): value is RawConfig {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The largest config file read (1 MiB; CoMLRL's are a few KB): a bigger one is refused before it is read, not
 * parsed until memory runs out.
 */
export const MAX_CONFIG_FILE_BYTES = 1024 * 1024;
/** The most keys a config file may hold, over all its mappings. */
export const MAX_CONFIG_KEYS = 10_000;

/** Reads a YAML (.yaml, .yml) or JSON config file into a plain object, or one section of it; errors name the file. */
export async function loadConfigFile(path: string, options: LoadConfigOptions = {}): Promise<RawConfig> {
  const irregular = irregularFileKind(path);
  if (irregular) throw new ConfigError(`cannot read config file ${path}: it is not a regular file (${irregular})`);
  const size = statSync(path, { throwIfNoEntry: false })?.size ?? 0;
  if (size > MAX_CONFIG_FILE_BYTES) throw new ConfigError(`config file ${path} has ${size} bytes, more than a config file may (${MAX_CONFIG_FILE_BYTES})`);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new ConfigError(`cannot read config file ${path}: ${(error as Error).message}`);
  }
  return parseConfigText(text, path, options);
}

/** Whether a config file is read as YAML (by its extension; anything else is JSON). */
export function isYamlFile(path: string): boolean {
  return /\.ya?ml$/i.test(path);
}

/**
 * Parses a config file's text, as YAML when source ends in .yaml/.yml and as JSON otherwise; source (the file's
 * path) names it in errors.
 */
export function parseConfigText(text: string, source: string, options: LoadConfigOptions = {}): RawConfig {
  const body = text.replace(/^\uFEFF/, "");
  if (body.length > MAX_CONFIG_FILE_BYTES) throw new ConfigError(`${source} has ${body.length} characters, more than a config file may (${MAX_CONFIG_FILE_BYTES})`);
  const yaml = isYamlFile(source);
  const parsed = yaml ? parseYaml(body, source) : parseJson(body, source);
  if (!isPlainObject(parsed)) {
    const got = Array.isArray(parsed) ? "an array" : JSON.stringify(parsed) ?? String(parsed);
    throw new ConfigError(`${source}: a config file must hold ${yaml ? "a YAML mapping" : "a JSON object"}, got ${got}`);
  }
  const { section } = options;
  if (section === undefined) return parsed;
  if (Object.hasOwn(parsed, section)) {
    const body = parsed[section];
    if (!isPlainObject(body)) throw new ConfigError(`${source}: section "${section}" must be an object of fields`);
    return body;
  }
  // No config field holds an object, so any object value at the top marks a sectioned file.
  const sections = Object.keys(parsed).filter((key) => isPlainObject(parsed[key]));
  if (sections.length === 0) return parsed;
  throw new ConfigError(`${source} has no "${section}" section (it has ${sections.map((s) => `"${s}"`).join(", ")})`);
}

/**
 * Counts keys mapping by mapping, in one pass: a key met twice in one mapping, or more keys than MAX_CONFIG_KEYS in
 * all, throws naming the place (`at(offset)` gives ":line:column"). JSON and YAML files follow this one rule.
 */
class KeyCheck {
  private count = 0;

  constructor(
    private readonly source: string,
    private readonly at: (offset: number) => string,
  ) {}

  key(keys: Set<string>, key: string, offset: number): void {
    if (keys.has(key)) throw new ConfigError(`${this.source}${this.at(offset)}: duplicate key ${JSON.stringify(key)} (a key may appear once in each mapping)`);
    keys.add(key);
    if (++this.count > MAX_CONFIG_KEYS) throw new ConfigError(`${this.source}${this.at(offset)}: more than ${MAX_CONFIG_KEYS} keys, more than a config file may hold`);
  }
}

function lineColumn(text: string, offset: number): string {
  const lines = text.slice(0, offset).split("\n");
  return `:${lines.length}:${lines[lines.length - 1]!.length + 1}`;
}

/** Walks valid JSON text's objects (strings skipped whole) and checks their keys. */
function checkJsonKeys(json: string, source: string): void {
  const check = new KeyCheck(source, (offset) => lineColumn(json, offset));
  const open: Array<Set<string> | null> = [];
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (c === "{") open.push(new Set());
    else if (c === "[") open.push(null);
    else if (c === "}" || c === "]") open.pop();
    else if (c === '"') {
      const start = i;
      for (i++; json[i] !== '"'; i++) if (json[i] === "\\") i++;
      let next = i + 1;
      while (/\s/.test(json[next] ?? "")) next++;
      const keys = open.at(-1);
      if (keys && json[next] === ":") check.key(keys, JSON.parse(json.slice(start, i + 1)) as string, start);
    }
  }
}

function parseJson(json: string, source: string): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (error) {
    throw new ConfigError(`${source}${place(json, (error as Error).message)}: invalid JSON: ${reason((error as Error).message)}`);
  }
  checkJsonKeys(json, source);
  return parsed;
}

/** Checks the keys of every mapping under node (aliases point at nodes checked where they are defined). */
function checkYamlKeys(node: Node | null | undefined, check: KeyCheck): void {
  if (isMap(node)) {
    const keys = new Set<string>();
    for (const pair of node.items) {
      const key = pair.key as Node | null;
      check.key(keys, isScalar(key) ? String(key.value) : JSON.stringify(key?.toJSON() ?? null), key?.range?.[0] ?? node.range?.[0] ?? 0);
      checkYamlKeys(pair.value as Node | null, check);
    }
  } else if (isSeq(node)) {
    for (const item of node.items) checkYamlKeys(item as Node | null, check);
  }
}

/**
 * YAML 1.2 (core schema). Keys are checked here rather than by the yaml package's uniqueKeys, whose check scans the
 * mapping for every key (40k keys: 15 s). The first error is reported at its line and column.
 */
function parseYaml(text: string, source: string): unknown {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { uniqueKeys: false, lineCounter });
  const error = doc.errors[0];
  if (error !== undefined) {
    const at = error.linePos?.[0];
    // The message's first line is the reason and its place ("… at line 2, column 1:"); the place goes up front.
    const why = error.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "");
    throw new ConfigError(`${source}${at ? `:${at.line}:${at.col}` : ""}: invalid YAML: ${why}`);
  }
  checkYamlKeys(
    doc.contents as Node | null,
    new KeyCheck(source, (offset) => {
      const { line, col } = lineCounter.linePos(offset);
      return `:${line}:${col}`;
    }),
  );
  // Aliases are expanded at most 100 times; past that the yaml package throws a bare ReferenceError ("Excessive
  // alias count …", a "billion laughs" file), which is reported here as the file's error.
  try {
    return doc.toJS({ maxAliasCount: 100 });
  } catch (error) {
    throw new ConfigError(`${source}: invalid YAML: ${(error as Error).message}`);
  }
}

/** ":line:column" of a JSON.parse error, when V8's message gives a character offset (or says the text ended). */
function place(json: string, message: string): string {
  const match = /in JSON at position (\d+)/.exec(message);
  const offset = match ? Number(match[1]) : message.startsWith("Unexpected end of JSON input") ? json.length : undefined;
  return offset === undefined ? "" : lineColumn(json, offset);
}

/**
 * V8's reason without the offset (place() turned it into a line and column) and without the excerpt of the text it
 * may quote (`..."apiKey": sk-live-se"... is not valid JSON`), which can be part of a key.
 */
function reason(message: string): string {
  return message.replace(/\s+in JSON at position \d+.*$/s, "").replace(/, (?:\.\.\.)?".*"(?:\.\.\.)? is not valid JSON$/s, "");
}
