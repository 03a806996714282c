// Datasets: split specs, split-file discovery, Parquet/JSON readers, and hub dataset repos served by a local HTTP
// server (tests/support/fake-hub.ts) from Parquet files written here.
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parquetWriteBuffer } from "hyparquet-writer";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { datasetSplits, findSplitFiles, loadDataset, parseSplit, sliceRange } from "../../src/data/index.js";
import { FakeHub, isolatedHubEnvironment } from "../support/fake-hub.js";

const scratch = isolatedHubEnvironment("comlrl-datasets-");

/** A Parquet file of rows {id: INT64, prompt: STRING, score: DOUBLE} with ids first..first+n-1. */
function parquetRows(first: number, n: number): Buffer {
  const ids = Array.from({ length: n }, (_, i) => BigInt(first + i));
  return Buffer.from(
    parquetWriteBuffer({
      columnData: [
        { name: "id", data: ids, type: "INT64" },
        { name: "prompt", data: ids.map((id) => `post ${id}`), type: "STRING" },
        { name: "score", data: ids.map((id) => Number(id) / 4), type: "DOUBLE" },
      ],
    }),
  );
}

function writeTree(root: string, files: Record<string, string | Buffer>): string {
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    writeFileSync(path.join(root, name), content);
  }
  return root;
}

const ids = (rows: Array<Record<string, unknown>>) => rows.map((r) => r.id);
const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);

describe("parseSplit and sliceRange", () => {
  it("reads names, row slices, percent slices and + combinations", () => {
    expect(parseSplit("train")).toEqual([{ split: "train", unit: "rows" }]);
    expect(parseSplit("train[16:]")).toEqual([{ split: "train", unit: "rows", from: 16 }]);
    expect(parseSplit("test[-5:]")).toEqual([{ split: "test", unit: "rows", from: -5 }]);
    expect(parseSplit("train[:10%] + validation[10%:20]")).toEqual([
      { split: "train", unit: "%", to: 10 },
      // One percent sign makes the slice a percent slice, as in `datasets`.
      { split: "validation", unit: "%", from: 10, to: 20 },
    ]);
  });

  it("computes row ranges as datasets does (percent rounded to the closest row, halves to even)", () => {
    const range_ = (spec: string, n: number) => sliceRange(parseSplit(spec)[0]!, n);
    expect(range_("train[:100]", 1000)).toEqual({ start: 0, end: 100 });
    expect(range_("train[16:]", 20)).toEqual({ start: 16, end: 20 });
    expect(range_("train[16:]", 10)).toEqual({ start: 10, end: 10 });
    expect(range_("test[-5:]", 3)).toEqual({ start: 0, end: 3 });
    expect(range_("test[:-2]", 7)).toEqual({ start: 0, end: 5 });
    // 10% of 15 = 1.5 → 2; 10% of 25 = 2.5 → 2 and 30% of 25 = 7.5 → 8 (Python's round).
    expect(range_("train[:10%]", 15)).toEqual({ start: 0, end: 2 });
    expect(range_("train[10%:30%]", 25)).toEqual({ start: 2, end: 8 });
    expect(range_("train[-10%:]", 42)).toEqual({ start: 38, end: 42 });
    expect(range_("train[5:2]", 10)).toEqual({ start: 5, end: 5 });
  });

  it("rejects malformed specs with the part at fault", () => {
    expect(() => parseSplit("")).toThrow(/split "" is empty/);
    expect(() => parseSplit("train[1:2:3]")).toThrow(/"train\[1:2:3\]" is not a split name with an optional slice/);
    expect(() => parseSplit("train+te st")).toThrow(/"te st" is not a split name/);
    expect(() => parseSplit("train[5]")).toThrow(/not a split name with an optional slice/);
    expect(() => parseSplit("train[:101%]")).toThrow(/percent bounds must lie in \[-100, 100\], got 101%/);
  });
});

describe("findSplitFiles", () => {
  const find = (files: string[], readme?: string) => Object.fromEntries(findSplitFiles(files, { readme, source: "acme/x" }));

  it("takes data/{split}-NNNNN-of-NNNNN shards first, any split name", () => {
    expect(
      find(["README.md", "data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet", "data/dev_clean-00000-of-00001.parquet", "other/test.jsonl"]),
    ).toEqual({ train: ["data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"], dev_clean: ["data/dev_clean-00000-of-00001.parquet"] });
  });

  it("then split keywords in directory names, then in file names, else everything is train", () => {
    expect(find(["default/train/0000.parquet", "default/validation/0000.parquet", "default/test/0000.parquet", "train.jsonl"])).toEqual({
      train: ["default/train/0000.parquet"],
      validation: ["default/validation/0000.parquet"],
      test: ["default/test/0000.parquet"],
    });
    expect(find(["train.jsonl", "data/dev.json", "my_test-1.jsonl", "training_notes.txt", ".hidden/train.jsonl", "__x/test.json"])).toEqual({
      train: ["train.jsonl"],
      validation: ["data/dev.json"],
      test: ["my_test-1.jsonl"],
    });
    expect(find(["a.parquet", "b/c.jsonl", "notes.md"])).toEqual({ train: ["a.parquet", "b/c.jsonl"] });
  });

  it("follows the configs of a README.md header, default config first", () => {
    const readme = [
      "---",
      "configs:",
      "- config_name: raw",
      "  data_files: raw/*.jsonl",
      "- config_name: clean",
      "  default: true",
      "  data_files:",
      "  - split: train",
      "    path: clean/part-*.parquet",
      "  - split: eval",
      "    path: [clean/holdout.parquet]",
      "---",
      "# A card",
    ].join("\n");
    const files = ["raw/a.jsonl", "clean/part-1.parquet", "clean/part-0.parquet", "clean/holdout.parquet", "clean/train.jsonl"];
    expect(find(files, readme)).toEqual({ train: ["clean/part-0.parquet", "clean/part-1.parquet"], eval: ["clean/holdout.parquet"] });
    expect(Object.fromEntries(findSplitFiles(files, { readme, config: "raw", source: "acme/x" }))).toEqual({ train: ["raw/a.jsonl"] });
    expect(() => findSplitFiles(files, { readme, config: "full", source: "acme/x" })).toThrow(/acme\/x README.md has no config "full" \(its configs: raw, clean\)/);
    expect(() => find(["x.parquet"], readme)).toThrow(/config "clean": split "train" pattern "clean\/part-\*.parquet" matches no/);
  });
});

describe("loadDataset from local files", () => {
  it("reads Parquet shards in order, slicing across them, with INT64 columns as numbers", async () => {
    const dir = writeTree(path.join(scratch(), "ds"), {
      "data/train-00000-of-00002.parquet": parquetRows(0, 6),
      "data/train-00001-of-00002.parquet": parquetRows(6, 4),
      "data/test-00000-of-00001.parquet": parquetRows(100, 3),
    });
    const all = await loadDataset(dir, { split: "train" });
    expect(all[7]).toEqual({ id: 7, prompt: "post 7", score: 1.75 });
    expect(ids(all)).toEqual(range(0, 10));
    expect(ids(await loadDataset(dir, { split: "train[4:8]" }))).toEqual([4, 5, 6, 7]);
    expect(ids(await loadDataset(dir, { split: "train[-3:]" }))).toEqual([7, 8, 9]);
    // 25% of 10 = 2.5 → 2, 55% = 5.5 → 6.
    expect(ids(await loadDataset(dir, { split: "train[25%:55%]" }))).toEqual([2, 3, 4, 5]);
    expect(ids(await loadDataset(dir, { split: "test[:2]+train[:1]" }))).toEqual([100, 101, 0]);
    expect([...(await datasetSplits(dir)).keys()]).toEqual(["train", "test"]);
  });

  it("reads JSON Lines, JSON arrays and a single data file", async () => {
    const dir = writeTree(path.join(scratch(), "json"), {
      "train.jsonl": '{"prompt":"a","n":1}\n\n{"prompt":"b","n":2}\n',
      "test.json": '[{"prompt":"c"},{"prompt":"d"}]',
    });
    expect(await loadDataset(dir, { split: "train" })).toEqual([{ prompt: "a", n: 1 }, { prompt: "b", n: 2 }]);
    expect(await loadDataset(dir, { split: "test[1:]" })).toEqual([{ prompt: "d" }]);
    expect(await loadDataset(path.join(dir, "train.jsonl"), { split: "train[:1]" })).toEqual([{ prompt: "a", n: 1 }]);
  });

  it("names the split and lists the available ones for an unknown split", async () => {
    const dir = writeTree(path.join(scratch(), "ds"), { "train.jsonl": '{"a":1}\n', "validation.jsonl": '{"a":2}\n' });
    await expect(loadDataset(dir, { split: "train[:5]+test" })).rejects.toThrow(/has no split "test".*available splits: train, validation/);
    await expect(loadDataset(path.join(scratch(), "nothing-here"), { split: "train" })).rejects.toThrow(/neither an existing directory nor a valid/);
  });

  it("names the file (and line) of bad data", async () => {
    const dir = writeTree(path.join(scratch(), "bad"), {
      "data/train-00000-of-00001.parquet": Buffer.from("PAR1 not really parquet PAR1"),
      "data/test-00000-of-00001.jsonl": '{"a":1}\n{"a":\n',
      "data/validation-00000-of-00001.jsonl": "[1, 2]\n",
    });
    await expect(loadDataset(dir, { split: "train" })).rejects.toThrow(/data\/train-00000-of-00001\.parquet of .* is not a readable Parquet file/);
    await expect(loadDataset(dir, { split: "test" })).rejects.toThrow(/data\/test-00000-of-00001\.jsonl of .*:2: not a JSON object per line/);
    await expect(loadDataset(dir, { split: "validation" })).rejects.toThrow(/validation-00000-of-00001\.jsonl of .*: row 0 is not an object of fields/);
  });
});

describe("loadDataset from a hub", () => {
  const hub = new FakeHub();
  beforeAll(async () => {
    await hub.start();
    hub.addRepo(
      "acme/tldr",
      {
        "README.md": "# no configs here\n",
        ".gitattributes": "*.parquet filter=lfs\n",
        "data/train-00000-of-00002.parquet": parquetRows(0, 5),
        "data/train-00001-of-00002.parquet": parquetRows(5, 5),
        "data/test-00000-of-00001.parquet": parquetRows(50, 4),
      },
      "dataset",
    );
  });
  afterAll(() => hub.stop());
  beforeEach(() => {
    process.env.HF_ENDPOINT = hub.url;
    hub.requests.length = 0;
    hub.pageSize = 3;
  });

  // Download progress goes to stderr; keep it out of the test output.
  const realWrite = process.stderr.write.bind(process.stderr);
  beforeEach(() => {
    process.stderr.write = (() => true) as typeof process.stderr.write;
  });
  afterEach(() => {
    process.stderr.write = realWrite;
  });

  it("downloads only the shards a leading slice needs, into the datasets-- cache layout", async () => {
    const rows = await loadDataset("acme/tldr", { split: "train[:3]" });
    expect(ids(rows)).toEqual([0, 1, 2]);
    const repo = hub.repos.get("dataset:acme/tldr")!;
    const snapshot = path.join(scratch(), "cache", "datasets--acme--tldr", "snapshots", repo.sha);
    expect(readdirSync(path.join(snapshot, "data"))).toEqual(["train-00000-of-00002.parquet"]);
    expect(hub.requests.some((r) => r.url.startsWith("/api/datasets/acme/tldr/tree/"))).toBe(true);

    // A percent slice needs the split's size, so every shard.
    expect(ids(await loadDataset("acme/tldr", { split: "train[80%:]+test[-1:]" }))).toEqual([8, 9, 53]);
    expect(readdirSync(path.join(snapshot, "data")).sort()).toEqual(["test-00000-of-00001.parquet", "train-00000-of-00002.parquet", "train-00001-of-00002.parquet"]);
  });

  it("reads the cached snapshot offline without a request, and sends HF_TOKEN online", async () => {
    process.env.HF_TOKEN = "hf_dataset_token";
    await loadDataset("acme/tldr", { split: "test" });
    for (const r of hub.requests) expect(r.authorization, r.url).toBe("Bearer hf_dataset_token");
    hub.requests.length = 0;
    process.env.HF_HUB_OFFLINE = "1";
    expect(ids(await loadDataset("acme/tldr", { split: "test[:2]" }))).toEqual([50, 51]);
    expect(hub.requests).toEqual([]);
    // Offline, only the cached files exist: the train shards were never fetched.
    await expect(loadDataset("acme/tldr", { split: "train" })).rejects.toThrow(/has no split "train".*available splits: test/);
    await expect(loadDataset("acme/other", { split: "train" })).rejects.toThrow(/HF_HUB_OFFLINE is set and dataset acme\/other \(revision main\) has no snapshot/);
  });

  it("names unknown splits with the hub's splits, and unknown repos", async () => {
    await expect(loadDataset("acme/tldr", { split: "validation" })).rejects.toThrow(
      /dataset acme\/tldr \(revision main\) has no split "validation".*available splits: train, test/,
    );
    await expect(loadDataset("acme/ghost")).rejects.toThrow(/Cannot look up dataset acme\/ghost \(revision main\).*no such dataset or revision/);
  });

  it("reads a revision given as a commit sha", async () => {
    const { sha } = hub.repos.get("dataset:acme/tldr")!;
    expect(ids(await loadDataset("acme/tldr", { split: "test[1:3]", revision: sha }))).toEqual([51, 52]);
    expect(hub.requests.some((r) => r.url.includes("/revision/"))).toBe(false);
  });
});
