// Which files of a dataset repo make up which split, by the rules Hugging Face `datasets` follows for a repo without
// a loading script:
//   1. the `configs:` list in README.md's YAML header, when there is one (data_files per split, glob patterns);
//   2. else sharded names data/{split}-NNNNN-of-NNNNN.* (any split name);
//   3. else split keywords in directory names (train/, …/my-train/…), then in file names (train.jsonl,
//      data/train-0.parquet, my_test.json); keywords: train|training, validation|valid|dev|val, test|testing|eval|evaluation;
//   4. else every data file is the train split.
// Only formats comlrl reads count (.parquet, .jsonl, .json); hidden paths (".x") and "__x" ones are skipped.
import { parse as parseYaml } from "yaml";

export const DATA_EXTENSIONS = [".parquet", ".jsonl", ".json"] as const;

/** A dataset's data_files entry (README.md configs:) that is malformed or matches no file; the message names the dataset and split. */
export class DataFilesError extends Error {
  /** Always "DataFilesError". */
  override name = "DataFilesError";
}

/** Split name → its files in order. */
export type SplitFiles = Map<string, string[]>;

const SPLIT_KEYWORDS: ReadonlyArray<[string, readonly string[]]> = [
  ["train", ["train", "training"]],
  ["validation", ["validation", "valid", "dev", "val"]],
  ["test", ["test", "testing", "eval", "evaluation"]],
];
const SEP = "[-._ 0-9]";
const DIR_PATTERNS = ["**/{kw}/**", `**/*${SEP}{kw}${SEP}*/**`];
const NAME_PATTERNS = [`**/{kw}${SEP}*`, `**/*${SEP}{kw}${SEP}*`];
const SHARDED = /^data\/(\w+(?:\.\w+)*)-\d{5}-of-\d{5}[^/]*\.[^/]+$/;

/** A glob as fsspec reads them: `**` spans directories, `*` and `?` stay within one, `[...]` is a class. */
export function globToRegExp(glob: string): RegExp {
  let out = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === "*" && glob[i + 1] === "*") {
      const slash = glob[i + 2] === "/";
      out += slash ? "(?:.*/)?" : ".*";
      i += slash ? 2 : 1;
    } else if (c === "*") out += "[^/]*";
    else if (c === "?") out += "[^/]";
    else if (c === "[") {
      const close = glob.indexOf("]", i + 2);
      if (close === -1) out += "\\[";
      else {
        const body = glob.slice(i + 1, close);
        out += `[${body.startsWith("!") ? `^${body.slice(1)}` : body.replaceAll("\\", "\\\\")}]`;
        i = close;
      }
    } else out += c.replace(/[.+^${}()|\\]/g, "\\$&");
  }
  return new RegExp(`^${out}$`);
}

function isDataFile(file: string): boolean {
  return DATA_EXTENSIONS.some((ext) => file.endsWith(ext)) && !file.split("/").some((part) => part.startsWith(".") || part.startsWith("__"));
}

function byKeywords(files: readonly string[], patterns: readonly string[]): SplitFiles {
  const splits: SplitFiles = new Map();
  for (const [split, keywords] of SPLIT_KEYWORDS) {
    const regexps = keywords.flatMap((kw) => patterns.map((p) => globToRegExp(p.replaceAll("{kw}", kw))));
    const matched = files.filter((f) => regexps.some((r) => r.test(f)));
    if (matched.length > 0) splits.set(split, matched);
  }
  return splits;
}

/** The splits of a repo whose README has no `configs:` list (rules 2–4). */
function inferredSplits(files: readonly string[]): SplitFiles {
  const data = files.filter(isDataFile);
  const sharded: SplitFiles = new Map();
  for (const file of data) {
    const split = SHARDED.exec(file)?.[1];
    if (split !== undefined) sharded.set(split, [...(sharded.get(split) ?? []), file]);
  }
  if (sharded.size > 0) {
    // Listed as `datasets` lists them: train, validation, test first, then the others by name.
    const rank = (split: string) => {
      const i = SPLIT_KEYWORDS.findIndex(([name]) => name === split);
      return i === -1 ? SPLIT_KEYWORDS.length : i;
    };
    return new Map([...sharded].sort(([a], [b]) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0)));
  }
  for (const patterns of [DIR_PATTERNS, NAME_PATTERNS]) {
    const found = byKeywords(data, patterns);
    if (found.size > 0) return found;
  }
  return data.length > 0 ? new Map([["train", data]]) : new Map();
}

/** The YAML header of a dataset card (between the leading "---" lines), or null when it has none. */
function cardHeader(readme: string, source: string): Record<string, unknown> | null {
  const match = /^---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/.exec(readme.replace(/^\uFEFF/, ""));
  if (!match) return null;
  let header: unknown;
  try {
    header = parseYaml(match[1]!);
  } catch (error) {
    throw new DataFilesError(`${source}: invalid YAML header: ${(error as Error).message}`);
  }
  return typeof header === "object" && header !== null && !Array.isArray(header) ? (header as Record<string, unknown>) : null;
}

interface CardConfig {
  config_name?: unknown;
  default?: unknown;
  data_files?: unknown;
}

function chooseConfig(configs: CardConfig[], wanted: string | undefined, source: string): CardConfig {
  const names = configs.map((c) => String(c.config_name ?? "default"));
  if (wanted !== undefined) {
    const found = configs[names.indexOf(wanted)];
    if (found === undefined) throw new DataFilesError(`${source} has no config "${wanted}" (its configs: ${names.join(", ")})`);
    return found;
  }
  const chosen = configs.find((c) => c.default === true) ?? (configs.length === 1 ? configs[0] : configs[names.indexOf("default")]);
  if (chosen === undefined) throw new DataFilesError(`${source} has several configs and none is the default; choose one of ${names.join(", ")}`);
  return chosen;
}

/** A config's data_files as split → patterns: a pattern or list means the train split; else a list of {split, path}. */
function dataFilePatterns(dataFiles: unknown, where: string): Map<string, string[]> {
  const asList = (value: unknown): string[] | null =>
    typeof value === "string" ? [value] : Array.isArray(value) && value.every((v) => typeof v === "string") ? value : null;
  const plain = asList(dataFiles);
  if (plain !== null) return new Map([["train", plain]]);
  const out = new Map<string, string[]>();
  if (Array.isArray(dataFiles)) {
    for (const entry of dataFiles as Array<{ split?: unknown; path?: unknown }>) {
      const paths = asList(entry?.path);
      if (typeof entry?.split !== "string" || paths === null) {
        throw new DataFilesError(`${where}: each data_files entry needs a "split" name and a "path" (a pattern or a list of them)`);
      }
      out.set(entry.split, [...(out.get(entry.split) ?? []), ...paths]);
    }
    return out;
  }
  throw new DataFilesError(`${where}: data_files must be a pattern, a list of patterns, or a list of {split, path}`);
}

/**
 * The splits of a dataset repo and their files. `readme` is README.md's text when the repo has one; `config` picks
 * one of its `configs:` (default: the one marked default, or the only one). `source` names the repo in errors.
 */
export function findSplitFiles(files: readonly string[], options: { readme?: string; config?: string; source: string }): SplitFiles {
  const { source } = options;
  const header = options.readme === undefined ? null : cardHeader(options.readme, `${source} README.md`);
  const configs = header?.configs;
  if (!Array.isArray(configs) || configs.length === 0) {
    if (options.config !== undefined) throw new DataFilesError(`${source} has no configs (no "configs:" in a README.md header), so no config "${options.config}"`);
    return inferredSplits(files);
  }
  const config = chooseConfig(configs as CardConfig[], options.config, `${source} README.md`);
  const where = `${source} README.md config "${String(config.config_name ?? "default")}"`;
  if (config.data_files === undefined) return inferredSplits(files);
  const splits: SplitFiles = new Map();
  for (const [split, patterns] of dataFilePatterns(config.data_files, where)) {
    const matched = new Set<string>();
    for (const pattern of patterns) {
      const regexp = globToRegExp(pattern.replace(/^\.\//, ""));
      const hits = files.filter((f) => regexp.test(f) && isDataFile(f));
      if (hits.length === 0) throw new DataFilesError(`${where}: split "${split}" pattern ${JSON.stringify(pattern)} matches no .parquet, .jsonl or .json file`);
      for (const hit of hits) matched.add(hit);
    }
    splits.set(split, [...matched].sort());
  }
  return splits;
}
