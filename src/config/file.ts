// Config files: JSON objects with camelCase or CoMLRL's snake_case keys, either flat or laid out in sections the way
// CoMLRL's YAML configs are ({"model": {...}, "magrpo": {...}}). The result is raw: a config builder validates it,
// given { source: path } so that its errors name the file too.
import { readFile } from "node:fs/promises";
import { ConfigError } from "./fields.js";

export interface LoadConfigOptions {
  /** The section a trainer reads ("magrpo", "iac", …). A flat file, one without sections, is returned whole. */
  readonly section?: string;
}

type RawConfig = Record<string, unknown>;

function isPlainObject(value: unknown): value is RawConfig {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export async function loadConfigFile(path: string, options: LoadConfigOptions = {}): Promise<RawConfig> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new ConfigError(`cannot read config file ${path}: ${(error as Error).message}`);
  }
  return parseConfigText(text, path, options);
}

/** Parses a config file's text; source (the file's path) names it in errors. */
export function parseConfigText(text: string, source: string, options: LoadConfigOptions = {}): RawConfig {
  const json = text.replace(/^\uFEFF/, "");
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch (error) {
    throw new ConfigError(`${source}${place(json, (error as Error).message)}: invalid JSON: ${reason((error as Error).message)}`);
  }
  if (!isPlainObject(parsed)) {
    throw new ConfigError(`${source}: a config file must hold a JSON object, got ${Array.isArray(parsed) ? "an array" : JSON.stringify(parsed)}`);
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

/** ":line:column" of a JSON.parse error, when V8's message gives a character offset (or says the text ended). */
function place(json: string, message: string): string {
  const match = /in JSON at position (\d+)/.exec(message);
  const offset = match ? Number(match[1]) : message.startsWith("Unexpected end of JSON input") ? json.length : undefined;
  if (offset === undefined) return "";
  const lines = json.slice(0, offset).split("\n");
  return `:${lines.length}:${lines[lines.length - 1]!.length + 1}`;
}

/** V8's reason without the offset (place() turned it into a line and column). */
function reason(message: string): string {
  return message.replace(/\s+in JSON at position \d+.*$/s, "");
}
