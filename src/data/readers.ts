// Row readers for the data file formats datasets are published in: Parquet (hyparquet, bounded by parquet.ts;
// snappy-compressed or plain, as pyarrow and the hub's converter write them), JSON Lines, and JSON holding an array
// of rows. Rows come out as plain objects; 64-bit integers become numbers when they are exactly representable.
import { readFile } from "node:fs/promises";
import type { FileMetaData } from "hyparquet";
import type { Item } from "../rollout/types.js";
import { readParquetMetadata, readParquetRows } from "./parquet.js";

/** A Parquet, JSON Lines or JSON data file that cannot be read; the message names the file (and row or page). */
export class DataFileError extends Error {
  /** Always "DataFileError". */
  override name = "DataFileError";
}

/** One data file: its row count, and any range of its rows. */
export interface DataFile {
  readonly path: string;
  numRows(): Promise<number>;
  /** Rows [start, end) as plain objects. */
  rows(start: number, end: number): Promise<Item[]>;
}

/** A reader for `path` chosen by its extension; `label` names it in errors (e.g. "data/train.parquet of acme/x"). */
export function openDataFile(path: string, label: string): DataFile {
  if (path.endsWith(".parquet")) return new ParquetFile(path, label);
  if (path.endsWith(".jsonl") || path.endsWith(".json")) return new JsonFile(path, label);
  throw new DataFileError(`${label}: unsupported data file format (comlrl reads .parquet, .jsonl and .json)`);
}

/** bigint → number where exact; nested lists and structs converted throughout. */
function plain(value: unknown): unknown {
  if (typeof value === "bigint") return Number.isSafeInteger(Number(value)) ? Number(value) : value;
  if (Array.isArray(value)) return value.map(plain);
  if (value !== null && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  }
  return value;
}

class ParquetFile implements DataFile {
  private opened: Promise<FileMetaData> | null = null;

  constructor(
    readonly path: string,
    private readonly label: string,
  ) {}

  private open(): Promise<FileMetaData> {
    this.opened ??= (async () => {
      try {
        return await readParquetMetadata(this.path);
      } catch (error) {
        throw new DataFileError(`${this.label} is not a readable Parquet file: ${(error as Error).message}`);
      }
    })();
    return this.opened;
  }

  async numRows(): Promise<number> {
    return Number((await this.open()).num_rows);
  }

  async rows(start: number, end: number): Promise<Item[]> {
    if (end <= start) return [];
    const metadata = await this.open();
    let rows: Record<string, unknown>[];
    try {
      rows = await readParquetRows(this.path, metadata, start, end);
    } catch (error) {
      throw new DataFileError(`${this.label}: cannot read rows ${start}–${end}: ${(error as Error).message}`);
    }
    return rows.map((row) => plain(row) as Item);
  }
}

class JsonFile implements DataFile {
  private parsed: Promise<Item[]> | null = null;

  constructor(
    readonly path: string,
    private readonly label: string,
  ) {}

  private all(): Promise<Item[]> {
    this.parsed ??= (async () => {
      let text: string;
      try {
        text = (await readFile(this.path, "utf8")).replace(/^\uFEFF/, "");
      } catch (error) {
        throw new DataFileError(`cannot read ${this.label}: ${(error as Error).message}`);
      }
      const rows = this.path.endsWith(".json") && /^\s*\[/.test(text) ? this.array(text) : this.lines(text);
      rows.forEach((row, i) => {
        if (typeof row !== "object" || row === null || Array.isArray(row)) {
          throw new DataFileError(`${this.label}: row ${i} is not an object of fields, got ${JSON.stringify(row)?.slice(0, 80)}`);
        }
      });
      return rows as Item[];
    })();
    return this.parsed;
  }

  private array(text: string): unknown[] {
    try {
      return JSON.parse(text) as unknown[];
    } catch (error) {
      throw new DataFileError(`${this.label} is not valid JSON: ${(error as Error).message}`);
    }
  }

  /** JSON Lines (also what most .json dataset files are): one object per non-blank line. */
  private lines(text: string): unknown[] {
    const rows: unknown[] = [];
    text.split("\n").forEach((line, i) => {
      if (line.trim() === "") return;
      try {
        rows.push(JSON.parse(line));
      } catch (error) {
        throw new DataFileError(`${this.label}:${i + 1}: not a JSON object per line: ${(error as Error).message}`);
      }
    });
    return rows;
  }

  async numRows(): Promise<number> {
    return (await this.all()).length;
  }

  async rows(start: number, end: number): Promise<Item[]> {
    return (await this.all()).slice(start, end);
  }
}
