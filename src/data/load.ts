// loadDataset: rows of a Hugging Face dataset repo (hub id, resolved and cached like models) or of a local directory
// laid out like one, or of one data file, for a split spec such as "train[:1000]" or "train[10%:20%]+test".
import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import { resolveDatasetFiles } from "../models/hub.js";
import type { Item } from "../rollout/types.js";
import { DataFilesError, DATA_EXTENSIONS, findSplitFiles, type SplitFiles } from "./data-files.js";
import { gatherRows, openDataFile, type DataFile } from "./readers.js";
import { boundedFromStart, parseSplit, sliceRange, SplitError, type SplitSlice } from "./split.js";

/** Which part of a dataset loadDataset reads. */
export interface LoadDatasetOptions {
  /** A split spec: "train", "train[:100]", "test[-5:]", "train[10%:20%]", "train[:10%]+validation" (default "train"). */
  split?: string;
  /** Branch, tag or commit sha of a hub dataset (default "main"); ignored for local sources. */
  revision?: string;
  /** The README.md config ("subset") to read, when the repo's card lists several. */
  config?: string;
}

/** A dataset source opened: its splits and how to read their files. */
interface OpenedSource {
  label: string;
  splits: SplitFiles;
  /** The reader of one of the split files, fetching it into the cache first when it is remote. */
  file(name: string): Promise<DataFile>;
}

async function openSource(idOrDir: string, options: LoadDatasetOptions): Promise<OpenedSource> {
  const asFile = await stat(idOrDir).catch(() => null);
  if (asFile?.isFile()) {
    // One data file on its own is a dataset with one split, "train", as `datasets`' json/parquet builders make it.
    if (!DATA_EXTENSIONS.some((ext) => idOrDir.endsWith(ext))) {
      throw new DataFilesError(`dataset file ${idOrDir}: unsupported format (comlrl reads ${DATA_EXTENSIONS.join(", ")})`);
    }
    const reader = openDataFile(idOrDir, idOrDir);
    return { label: idOrDir, splits: new Map([["train", [idOrDir]]]), file: async () => reader };
  }
  const repo = await resolveDatasetFiles(idOrDir, { revision: options.revision });
  let readme: string | undefined;
  if (repo.files.includes("README.md")) {
    await repo.fetch(["README.md"]);
    readme = await readFile(path.join(repo.dir, "README.md"), "utf8");
  }
  const splits = findSplitFiles(repo.files, { readme, config: options.config, source: repo.label });
  const readers = new Map<string, DataFile>();
  return {
    label: repo.label,
    splits,
    async file(name) {
      let reader = readers.get(name);
      if (reader === undefined) {
        await repo.fetch([name]);
        reader = openDataFile(path.join(repo.dir, name), `${name} of ${repo.label}`);
        readers.set(name, reader);
      }
      return reader;
    },
  };
}

/** The rows one slice selects from one split, in batches, reading (and fetching) only the files its range touches. */
async function* sliceBatches(source: OpenedSource, slice: SplitSlice): AsyncGenerator<Item[]> {
  const files = source.splits.get(slice.split)!;
  // "train" and "train[:1000]" need no total size: files are read in order until the end is reached, later shards
  // untouched, and no file is read twice to count its rows first.
  const whole = slice.from === undefined && slice.to === undefined;
  if (whole || boundedFromStart(slice)) {
    const start = slice.from ?? 0;
    const end = slice.to ?? Infinity;
    let offset = 0;
    for (const name of files) {
      if (offset >= end) break;
      const file = await source.file(name);
      if (whole) {
        yield* file.batches(0, Infinity);
        continue;
      }
      const count = await file.numRows();
      if (offset + count > start) yield* file.batches(Math.max(0, start - offset), Math.min(count, end - offset));
      offset += count;
    }
    return;
  }
  // One shard at a time: a split of thousands of shards opened at once runs out of file descriptors (EMFILE).
  const readers: DataFile[] = [];
  const counts: number[] = [];
  for (const name of files) {
    const reader = await source.file(name);
    readers.push(reader);
    counts.push(await reader.numRows());
  }
  const { start, end } = sliceRange(slice, counts.reduce((a, b) => a + b, 0));
  let offset = 0;
  for (const [i, reader] of readers.entries()) {
    const count = counts[i]!;
    if (offset < end && offset + count > start) yield* reader.batches(Math.max(0, start - offset), Math.min(count, end - offset));
    offset += count;
  }
}

/** Opens the source and checks that every split the spec names is there. */
async function openSplits(idOrDir: string, options: LoadDatasetOptions): Promise<{ source: OpenedSource; slices: SplitSlice[] }> {
  const spec = options.split ?? "train";
  const slices = parseSplit(spec);
  const source = await openSource(idOrDir, options);
  for (const slice of slices) {
    if (!source.splits.has(slice.split)) {
      const available = [...source.splits.keys()];
      throw new SplitError(
        `${source.label} has no split "${slice.split}" (split spec ${JSON.stringify(spec)}); ` +
          (available.length > 0 ? `available splits: ${available.join(", ")}` : `it has no ${DATA_EXTENSIONS.join("/")} data files`),
      );
    }
  }
  return { source, slices };
}

/**
 * The rows of a dataset split, as loadDataset reads them, a batch at a time: for a split larger than memory allows.
 * Nothing is read before the first batch is asked for, and only as far as the batches taken.
 */
export async function* streamDataset(idOrDir: string, options: LoadDatasetOptions = {}): AsyncGenerator<Item[]> {
  const { source, slices } = await openSplits(idOrDir, options);
  for (const slice of slices) yield* sliceBatches(source, slice);
}

/**
 * The rows of a dataset split as plain objects. `idOrDir` is a hub dataset id ("org/name"; cached in the HF cache,
 * honouring HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE like models), a local directory laid out like a dataset repo,
 * or one .parquet/.jsonl/.json file (its only split is "train"). Split files are found as `datasets` finds them
 * (README.md configs, data/{split}-NNNNN-of-NNNNN.*, split names in directory and file names).
 */
export async function loadDataset(idOrDir: string, options: LoadDatasetOptions = {}): Promise<Item[]> {
  return gatherRows(streamDataset(idOrDir, options));
}

/** The split names a dataset source has, with their files (as loadDataset would read them). */
export async function datasetSplits(idOrDir: string, options: Omit<LoadDatasetOptions, "split"> = {}): Promise<Map<string, string[]>> {
  return (await openSource(idOrDir, options)).splits;
}
