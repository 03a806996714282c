// metrics.jsonl: the local, always-on record of a run. One JSON object per line:
//   {"step": <env_step>, "time": <ISO-8601>, "kind": "train" | "eval" | "samples" | …, ...fields}
// Each line goes to the kernel in one synchronous write on an O_APPEND descriptor, so a crashed process (OOM killer,
// native abort, SIGKILL) loses at most the line it was writing. JSON has no literal for NaN or ±Infinity; such values
// are written as the strings "NaN", "Infinity" and "-Infinity" rather than silently becoming null, because a diverged
// loss is exactly what this file must show.
import { closeSync, constants, existsSync, fstatSync, fsyncSync, ftruncateSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, writeFileSync, writeSync } from "node:fs";
import path from "node:path";
import { FileWriteError } from "../util/atomic.js";
import { makeDirsSync } from "../util/make-dirs.js";

/** Record kinds the library writes; callers may add their own. */
export type MetricsKind = "train" | "eval" | "samples" | (string & {});

/** One line of metrics.jsonl: the env step, the time and the kind, then the record's own fields. */
export interface JsonlRecord {
  /** The env step the record was logged at. */
  step: number;
  /** When it was written, as an ISO-8601 timestamp. */
  time: string;
  /** What the record holds ("train", "eval", "samples", …). */
  kind: MetricsKind;
  [field: string]: unknown;
}

const RESERVED_FIELDS = new Set(["step", "time", "kind"]);

function encodeNonFinite(_key: string, value: unknown): unknown {
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  return value;
}

/**
 * Where the last complete line of file ends. A crash can leave a partial line without its newline; appending after
 * it would glue the next record onto the fragment and corrupt a line in the middle of the file.
 */
function endOfLastCompleteLine(fd: number, size: number): number {
  const chunk = Buffer.alloc(64 * 1024);
  let end = size;
  while (end > 0) {
    const start = Math.max(0, end - chunk.length);
    const length = readSync(fd, chunk, 0, end - start, start);
    const newline = chunk.subarray(0, length).lastIndexOf(0x0a);
    if (newline >= 0) return start + newline + 1;
    end = start;
  }
  return 0;
}

/**
 * Appends data to an O_APPEND descriptor in one write. A write the disk cannot take (ENOSPC, EDQUOT, EIO) throws
 * naming the file; one cut short is taken back, so that the file still ends with a whole record.
 */
export function appendWhole(fd: number, file: string, data: Buffer): void {
  let written: number;
  try {
    written = writeSync(fd, data);
  } catch (error) {
    throw new FileWriteError(file, error);
  }
  if (written < data.length) {
    ftruncateSync(fd, fstatSync(fd).size - written);
    throw new FileWriteError(file, new Error(`only ${written} of ${data.length} bytes could be written (is the disk full?)`));
  }
}

/** fsyncs and closes fd; a failed fsync (the last buffered data could not reach the disk) throws naming the file. */
export function closeSynced(fd: number, file: string): void {
  try {
    fsyncSync(fd);
  } catch (error) {
    throw new FileWriteError(file, error);
  } finally {
    closeSync(fd);
  }
}

export class JsonlMetricsWriter {
  private fd: number | null;

  /**
   * Opens file for appending (creating it and its directory), first dropping a partial last line left by a crash. A
   * symbolic link in its place is refused, not followed: it could point the run's writes at any file.
   */
  constructor(readonly file: string) {
    makeDirsSync(path.dirname(path.resolve(file)));
    let fd: number;
    try {
      fd = openSync(file, constants.O_RDWR | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o644);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ELOOP") {
        throw new FileWriteError(file, new Error("it is a symbolic link, which metrics are never written through (remove it, or choose another outputDir)"));
      }
      throw new FileWriteError(file, error);
    }
    const size = fstatSync(fd).size;
    const keep = endOfLastCompleteLine(fd, size);
    if (keep < size) ftruncateSync(fd, keep);
    this.fd = fd;
  }

  /** Appends one record. `fields` may not use the reserved names step, time or kind. */
  write(kind: MetricsKind, step: number, fields: Record<string, unknown>): void {
    if (this.fd === null) throw new Error(`JsonlMetricsWriter: ${this.file} is closed`);
    if (!Number.isSafeInteger(step) || step < 0) {
      throw new Error(`JsonlMetricsWriter: step must be a non-negative integer, got ${step} (${this.file})`);
    }
    for (const name of Object.keys(fields)) {
      if (RESERVED_FIELDS.has(name)) {
        throw new Error(`JsonlMetricsWriter: field name "${name}" is reserved in ${this.file} (step, time and kind are)`);
      }
    }
    const record = { step, time: new Date().toISOString(), kind, ...fields };
    appendWhole(this.fd, this.file, Buffer.from(`${JSON.stringify(record, encodeNonFinite)}\n`));
  }

  /** The file's size: where the next record starts (checkpoints record it so a resumed run can be stitched on). */
  bytes(): number {
    if (this.fd === null) throw new Error(`JsonlMetricsWriter: ${this.file} is closed`);
    return fstatSync(this.fd).size;
  }

  /** fsyncs and closes the file; later writes throw. Closing twice is harmless. */
  close(): void {
    if (this.fd === null) return;
    const fd = this.fd;
    this.fd = null;
    closeSynced(fd, this.file);
  }
}

/**
 * Parses a metrics.jsonl file. A last line without its newline that does not parse is the write a crash interrupted
 * and is dropped; any other unparsable line is corruption and throws, naming the file and line.
 */
export function readJsonlMetrics(file: string, options: { upToBytes?: number } = {}): JsonlRecord[] {
  const bytes = readFileSync(file);
  const text = bytes.subarray(0, options.upToBytes ?? bytes.length).toString("utf8");
  const lines = text.split("\n");
  const records: JsonlRecord[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === "") continue;
    const isUnterminatedTail = i === lines.length - 1;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch (error) {
      if (isUnterminatedTail) break;
      throw new Error(`readJsonlMetrics: ${file} line ${i + 1} is not valid JSON: ${(error as Error).message}`);
    }
    if (typeof parsed !== "object" || parsed === null || typeof (parsed as JsonlRecord).step !== "number") {
      throw new Error(`readJsonlMetrics: ${file} line ${i + 1} is not a metrics record (an object with a numeric step)`);
    }
    records.push(parsed as JsonlRecord);
  }
  return records;
}

/** Written into a resumed run's metrics directory: which checkpoint it continued and where its parent's stream ends. */
export const RESUME_MARKER = "resumed_from.json";

export interface ResumeMarker {
  checkpoint: string;
  /** The parent's metrics directory, relative to this one; null when the checkpoint recorded none. */
  parent: string | null;
  /** The size of the parent's metrics.jsonl when the checkpoint was taken: its records after that were redone. */
  parentBytes: number;
}

export function writeResumeMarker(dir: string, marker: ResumeMarker): void {
  makeDirsSync(dir);
  writeFileSync(path.join(dir, RESUME_MARKER), `${JSON.stringify(marker, null, 2)}\n`);
}

/** Whether file is a symbolic link (which a run's metrics are never read or written through). */
function isSymlink(file: string): boolean {
  try {
    return lstatSync(file).isSymbolicLink();
  } catch {
    return false;
  }
}

function streamOf(dir: string, upToBytes?: number): JsonlRecord[] {
  const markerFile = path.join(dir, RESUME_MARKER);
  const metrics = path.join(dir, "metrics.jsonl");
  for (const file of [metrics, markerFile]) {
    if (isSymlink(file)) throw new Error(`readRunMetrics: ${file} is a symbolic link, not a file the run wrote; it is not followed`);
  }
  const own = existsSync(metrics) ? readJsonlMetrics(metrics, { upToBytes }) : [];
  if (!existsSync(markerFile)) return own;
  const marker = JSON.parse(readFileSync(markerFile, "utf8")) as ResumeMarker;
  return [...(marker.parent === null ? [] : streamOf(path.resolve(dir, marker.parent), marker.parentBytes)), ...own];
}

/**
 * A run's metric stream as if it had never been interrupted: for the newest resume-* directory under outputDir, its
 * parents' records up to the checkpoints it resumed from, then its own. Records an interrupted run wrote after its
 * last checkpoint are left out, because the resumed run did that work again.
 */
export function readRunMetrics(outputDir: string): JsonlRecord[] {
  const resumes = readdirSync(outputDir)
    .filter((name) => name.startsWith("resume-") && existsSync(path.join(outputDir, name, RESUME_MARKER)))
    .sort((a, b) => Number(a.split("-").at(-1)) - Number(b.split("-").at(-1)));
  return streamOf(resumes.length ? path.join(outputDir, resumes.at(-1)!) : outputDir);
}

/**
 * Before a fresh (not resumed) run logs into outputDir, the metrics an earlier run left there (metrics.jsonl and its
 * resume-* directories) move to outputDir/earlier-run-<time>/, so the new run starts a new stream and readRunMetrics
 * returns only its records. Returns where they went, or null when there were none.
 */
export function setAsideEarlierRunMetrics(outputDir: string): string | null {
  if (!existsSync(outputDir)) return null;
  const metrics = path.join(outputDir, "metrics.jsonl");
  const earlier = readdirSync(outputDir).filter((name) => name.startsWith("resume-") && existsSync(path.join(outputDir, name, RESUME_MARKER)));
  const hasMetrics = existsSync(metrics) || isSymlink(metrics);
  if (!hasMetrics && earlier.length === 0) return null;
  const aside = path.join(outputDir, `earlier-run-${new Date().toISOString().replace(/[:.]/g, "-")}`);
  mkdirSync(aside);
  for (const name of [...(hasMetrics ? ["metrics.jsonl"] : []), ...earlier]) renameSync(path.join(outputDir, name), path.join(aside, name));
  return aside;
}
