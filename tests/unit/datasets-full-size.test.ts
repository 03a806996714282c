// Full-size splits: a million rows in one JSON Lines file and in one Parquet file load whole (they once overflowed
// the stack at ~120k rows), and streamDataset reads a split batch by batch, only as far as the batches taken.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parquetWriteBuffer } from "hyparquet-writer";
import { describe, expect, it } from "vitest";
import { loadDataset, streamDataset } from "../../src/data/index.js";
import { BATCH_ROWS } from "../../src/data/readers.js";

const ROWS = 1_000_000;
const dir = mkdtempSync(path.join(tmpdir(), "comlrl-full-size-"));

/** A JSON Lines file of ROWS rows {i}; the row at `broken` (if any) cut short. */
function jsonLines(name: string, broken?: number): string {
  const lines = Array.from({ length: ROWS }, (_, i) => (i === broken ? '{"i":' : `{"i":${i}}`));
  const file = path.join(dir, name);
  writeFileSync(file, lines.join("\n") + "\n");
  return file;
}

describe("datasets of a million rows", () => {
  it("a JSON Lines file of 1M rows loads whole, and its slices", { timeout: 60_000 }, async () => {
    const file = jsonLines("big.jsonl");
    const rows = await loadDataset(file);
    expect(rows.length).toBe(ROWS);
    expect(rows[0]).toEqual({ i: 0 });
    expect(rows[ROWS - 1]).toEqual({ i: ROWS - 1 });
    expect(rows.every((row, i) => row.i === i)).toBe(true);
    expect(await loadDataset(file, { split: "train[-2:]" })).toEqual([{ i: ROWS - 2 }, { i: ROWS - 1 }]);
    expect((await loadDataset(file, { split: "train[10%:20%]" })).length).toBe(ROWS / 10);
  });

  it("a Parquet file of 1M rows loads whole", { timeout: 60_000 }, async () => {
    const ids = Int32Array.from({ length: ROWS }, (_, i) => i);
    const file = path.join(dir, "big.parquet");
    writeFileSync(file, new Uint8Array(parquetWriteBuffer({ columnData: [{ name: "i", data: ids, type: "INT32" }], rowGroupSize: 100_000 })));
    const rows = await loadDataset(file);
    expect(rows.length).toBe(ROWS);
    expect(rows.every((row, i) => row.i === i)).toBe(true);
    expect(await loadDataset(file, { split: "train[-1:]" })).toEqual([{ i: ROWS - 1 }]);
  });

  it("streamDataset yields batches and reads no further than the batches taken", { timeout: 60_000 }, async () => {
    // Row 900000 is not JSON: reading the whole file fails there, naming the file and line; the first batches do not.
    const file = jsonLines("broken.jsonl", 900_000);
    const taken: number[] = [];
    for await (const batch of streamDataset(file)) {
      taken.push(batch.length);
      if (taken.length === 3) break;
    }
    expect(taken).toEqual([BATCH_ROWS, BATCH_ROWS, BATCH_ROWS]);
    await expect(loadDataset(file)).rejects.toThrow(/broken\.jsonl:900001: not a JSON object per line/);
  });
});
