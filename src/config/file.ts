// Config files: JSON or YAML (.yaml, .yml) objects with camelCase or CoMLRL's snake_case keys, either flat or laid
// out in sections the way CoMLRL's YAML configs are ({"model": {...}, "magrpo": {...}}). The result is raw: a config
// builder validates it, given { source: path } so that its errors name the file too.
import { readFile } from "node:fs/promises";
import { parseDocument } from "yaml";
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

/** Reads a YAML (.yaml, .yml) or JSON config file into a plain object, or one section of it; errors name the file. */
export async function loadConfigFile(path: string, options: LoadConfigOptions = {}): Promise<RawConfig> {
  const irregular = irregularFileKind(path);
  if (irregular) throw new ConfigError(`cannot read config file ${path}: it is not a regular file (${irregular})`);
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

function parseJson(json: string, source: string): unknown {
  try {
    return JSON.parse(json);
  } catch (error) {
    throw new ConfigError(`${source}${place(json, (error as Error).message)}: invalid JSON: ${reason((error as Error).message)}`);
  }
}

/** YAML 1.2 (core schema); duplicate keys are errors. The first error is reported at its line and column. */
function parseYaml(text: string, source: string): unknown {
  const doc = parseDocument(text, { uniqueKeys: true });
  const error = doc.errors[0];
  if (error !== undefined) {
    const at = error.linePos?.[0];
    // The message's first line is the reason and its place ("… at line 2, column 1:"); the place goes up front.
    const why = error.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "");
    throw new ConfigError(`${source}${at ? `:${at.line}:${at.col}` : ""}: invalid YAML: ${why}`);
  }
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
  if (offset === undefined) return "";
  const lines = json.slice(0, offset).split("\n");
  return `:${lines.length}:${lines[lines.length - 1]!.length + 1}`;
}

/**
 * V8's reason without the offset (place() turned it into a line and column) and without the excerpt of the text it
 * may quote (`..."apiKey": sk-live-se"... is not valid JSON`), which can be part of a key.
 */
function reason(message: string): string {
  return message.replace(/\s+in JSON at position \d+.*$/s, "").replace(/, (?:\.\.\.)?".*"(?:\.\.\.)? is not valid JSON$/s, "");
}
