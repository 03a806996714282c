// Hostile and large Parquet files: pages whose headers declare far more than their bytes hold are refused before
// hyparquet allocates for them, a read is capped in what it decodes, and a file of ~2000 row groups is read through
// one file descriptor, a few groups at a time (it once opened a read stream per group at once: EMFILE).
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parquetWriteBuffer } from "hyparquet-writer";
import { describe, expect, it } from "vitest";
import { openDataFile } from "../../src/data/readers.js";
import { parquetPageBomb } from "../support/hostile-files.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-parquet-"));
const file = (name: string, bytes: Uint8Array) => {
  const full = path.join(scratch, name);
  writeFileSync(full, bytes);
  return full;
};

/** rows(0, n) of a file, and how long it took. */
async function timedRows(full: string, n: number) {
  const start = Date.now();
  const rows = openDataFile(full, path.basename(full)).rows(0, n);
  return { rows, ms: () => Date.now() - start };
}

describe("Parquet bounds", () => {
  it("a page declaring 2^26 values in 9 bytes, more than its row group's rows, is refused at once", async () => {
    const bomb = file("rows.parquet", parquetPageBomb({ pageValues: 2 ** 26, rows: 1 }));
    const { rows, ms } = await timedRows(bomb, 1);
    await expect(rows).rejects.toThrow("rows.parquet: cannot read rows 0–1: column x: the page at byte 4 declares 67108864 values, more than its row group's 1 rows");
    expect(ms()).toBeLessThan(1000);
  });

  it("a file declaring 2^26 rows whose one page holds them is over what one read may decode", async () => {
    const bomb = file("declared.parquet", parquetPageBomb({ pageValues: 2 ** 26, rows: 2 ** 26 }));
    const { rows, ms } = await timedRows(bomb, 3);
    await expect(rows).rejects.toThrow(/declared\.parquet: cannot read rows 0–3: rows 0–3 would decode 67108864 values .*more than one read may \(16777216 values/);
    expect(ms()).toBeLessThan(1000);
  });

  it("a SNAPPY page claiming 1 GiB uncompressed from a few bytes is refused before allocating", async () => {
    const bomb = file("snappy.parquet", parquetPageBomb({ pageValues: 8, rows: 8, snappyClaim: 2 ** 30 }));
    const { rows, ms } = await timedRows(bomb, 3);
    await expect(rows).rejects.toThrow(/snappy\.parquet: .*column x: the page at byte 4 declares 1073741824 bytes uncompressed from \d+ SNAPPY bytes/);
    expect(ms()).toBeLessThan(1000);
  });

  it("the same file with honest headers reads", async () => {
    expect(await openDataFile(file("honest.parquet", parquetPageBomb({ pageValues: 8, rows: 8 })), "honest.parquet").rows(2, 5)).toEqual([{ x: null }, { x: null }, { x: null }]);
  });

  it("2000 row groups read under a 256-descriptor limit, every row in order", () => {
    const n = 2000;
    const ids = Array.from({ length: n }, (_, i) => i);
    const many = file("groups.parquet", new Uint8Array(parquetWriteBuffer({ columnData: [{ name: "id", data: ids, type: "INT32" }, { name: "text", data: ids.map((i) => `row ${i}`), type: "STRING" }], rowGroupSize: 1 })));
    const script = `import { openDataFile } from ${JSON.stringify(path.resolve("src/data/readers.ts"))};
      const rows = await openDataFile(${JSON.stringify(many)}, "groups.parquet").rows(0, ${n});
      console.log(JSON.stringify({ n: rows.length, ok: rows.every((r, i) => r.id === i && r.text === "row " + i) }));`;
    const run = spawnSync("sh", ["-c", `ulimit -n 256 && exec "${process.execPath}" --import tsx --input-type=module -e '${script.replaceAll("'", "'\\''")}'`], { encoding: "utf8", timeout: 60_000 });
    expect(run.stderr).toBe("");
    expect(JSON.parse(run.stdout)).toEqual({ n, ok: true });
  });
});
