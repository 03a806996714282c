// Row readers for the data file formats datasets are published in: Parquet (hyparquet, bounded by parquet.ts;
// snappy-compressed or plain, as pyarrow and the hub's converter write them), JSON Lines, and JSON holding an array
// of rows. Rows come out as plain objects, in batches, so that a file of any row count can be read without holding
// it whole: Parquet a few row groups at a time, JSON Lines line by line. 64-bit integers become numbers when they are
// exactly representable.
import { createReadStream } from "node:fs";
import { open, readFile } from "node:fs/promises";
import { createInterface } from "node:readline";
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
  /** Rows [start, end) as plain objects, in order, a batch of at most about BATCH_ROWS at a time; end may be Infinity. */
  batches(start: number, end: number): AsyncGenerator<Item[]>;
  /** Rows [start, end) as plain objects. */
  rows(start: number, end: number): Promise<Item[]>;
}

/** Rows per batch: large enough that per-batch costs vanish, small enough that a batch of long rows stays small. */
export const BATCH_ROWS = 8192;

/** Every row of the batches, gathered without spreading (a spread of more than ~120k rows overflows the stack). */
export async function gatherRows(batches: AsyncIterable<Item[]>): Promise<Item[]> {
  const rows: Item[] = [];
  for await (const batch of batches) for (const row of batch) rows.push(row);
  return rows;
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

  /** Whole row groups at a time, as many as make up BATCH_ROWS rows (one group when it alone is larger). */
  async *batches(start: number, end: number): AsyncGenerator<Item[]> {
    const metadata = await this.open();
    end = Math.min(end, Number(metadata.num_rows));
    let first = 0;
    let batchStart = start;
    for (const group of metadata.row_groups) {
      first += Number(group.num_rows);
      if (first <= batchStart) continue;
      const batchEnd = Math.min(first, end);
      if (batchEnd - batchStart < BATCH_ROWS && batchEnd < end) continue;
      let rows: Record<string, unknown>[];
      try {
        rows = await readParquetRows(this.path, metadata, batchStart, batchEnd);
      } catch (error) {
        throw new DataFileError(`${this.label}: cannot read rows ${batchStart}–${batchEnd}: ${(error as Error).message}`);
      }
      yield rows.map((row) => plain(row) as Item);
      batchStart = batchEnd;
      if (batchStart >= end) return;
    }
  }

  rows(start: number, end: number): Promise<Item[]> {
    return gatherRows(this.batches(start, end));
  }
}

/** A parsed row that is an object of fields, or an error naming the file and where the row is. */
function checkRow(row: unknown, where: string): Item {
  if (typeof row !== "object" || row === null || Array.isArray(row)) {
    throw new DataFileError(`${where} is not an object of fields, got ${JSON.stringify(row)?.slice(0, 80)}`);
  }
  return row as Item;
}

/**
 * JSON Lines (also what most .json dataset files are: one object per non-blank line), read line by line; or, for a
 * .json file whose text starts with "[", one JSON array of rows, parsed whole (a file too large for one string is
 * refused with the advice to write it as JSON Lines).
 */
class JsonFile implements DataFile {
  private isArray: Promise<boolean> | null = null;
  private array: Promise<Item[]> | null = null;
  private counted: Promise<number> | null = null;

  constructor(
    readonly path: string,
    private readonly label: string,
  ) {}

  private fail(error: unknown): never {
    if (error instanceof DataFileError) throw error;
    throw new DataFileError(`cannot read ${this.label}: ${(error as Error).message}`);
  }

  /** Whether the file is one JSON array: a .json file whose first non-blank character (after a BOM) is "[". */
  private arrayFile(): Promise<boolean> {
    this.isArray ??= (async () => {
      if (!this.path.endsWith(".json")) return false;
      const handle = await open(this.path, "r").catch((error: unknown) => this.fail(error));
      try {
        const head = Buffer.alloc(4096);
        const { bytesRead } = await handle.read(head, 0, head.length, 0);
        return /^\uFEFF?\s*\[/.test(head.subarray(0, bytesRead).toString("utf8"));
      } finally {
        await handle.close();
      }
    })();
    return this.isArray;
  }

  private arrayRows(): Promise<Item[]> {
    this.array ??= (async () => {
      let text: string;
      try {
        text = (await readFile(this.path, "utf8")).replace(/^\uFEFF/, "");
      } catch (error) {
        const tooLong = (error as NodeJS.ErrnoException).code === "ERR_STRING_TOO_LONG";
        throw new DataFileError(`cannot read ${this.label}: ${(error as Error).message}${tooLong ? "; write a file this large as JSON Lines (one row per line), which is read line by line" : ""}`);
      }
      let rows: unknown;
      try {
        rows = JSON.parse(text);
      } catch (error) {
        throw new DataFileError(`${this.label} is not valid JSON: ${(error as Error).message}`);
      }
      return (rows as unknown[]).map((row, i) => checkRow(row, `${this.label}: row ${i}`));
    })();
    return this.array;
  }

  /** The non-blank lines, with their line numbers, as they are read. */
  private async *lines(): AsyncGenerator<[string, number]> {
    const stream = createReadStream(this.path, { encoding: "utf8" });
    const lines = createInterface({ input: stream, crlfDelay: Infinity });
    let number = 0;
    try {
      for await (const line of lines) {
        number++;
        const text = number === 1 ? line.replace(/^\uFEFF/, "") : line;
        if (text.trim() !== "") yield [text, number];
      }
    } catch (error) {
      this.fail(error);
    } finally {
      lines.close();
      stream.destroy();
    }
  }

  async numRows(): Promise<number> {
    if (await this.arrayFile()) return (await this.arrayRows()).length;
    this.counted ??= (async () => {
      let count = 0;
      const lines = this.lines();
      while (!(await lines.next()).done) count++;
      return count;
    })();
    return this.counted;
  }

  async *batches(start: number, end: number): AsyncGenerator<Item[]> {
    if (await this.arrayFile()) {
      const rows = await this.arrayRows();
      for (let at = start; at < Math.min(end, rows.length); at += BATCH_ROWS) yield rows.slice(at, Math.min(at + BATCH_ROWS, end));
      return;
    }
    let index = 0;
    let batch: Item[] = [];
    for await (const [line, number] of this.lines()) {
      if (index >= end) break;
      if (index++ < start) continue;
      let row: unknown;
      try {
        row = JSON.parse(line);
      } catch (error) {
        throw new DataFileError(`${this.label}:${number}: not a JSON object per line: ${(error as Error).message}`);
      }
      batch.push(checkRow(row, `${this.label}:${number}: row ${index - 1}`));
      if (batch.length === BATCH_ROWS) {
        yield batch;
        batch = [];
      }
    }
    if (batch.length > 0) yield batch;
  }

  rows(start: number, end: number): Promise<Item[]> {
    return gatherRows(this.batches(start, end));
  }
}
