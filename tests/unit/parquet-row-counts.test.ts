// Row counts a Parquet file declares are checked against its data: a row group claiming 2^50 rows over a page of 8
// values (hyparquet would give a row {} for every row past the 8th), and a footer whose row count is not the sum of
// its row groups', are refused naming the file.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { openDataFile } from "../../src/data/readers.js";
import { parquetPageBomb } from "../support/hostile-files.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-parquet-rows-"));
const file = (name: string, bytes: Uint8Array) => {
  const full = path.join(scratch, name);
  writeFileSync(full, bytes);
  return full;
};

describe("Parquet row counts", () => {
  it("a row group declaring 2^50 rows over a page of 8 values is refused, not read as empty rows", async () => {
    const claim = openDataFile(file("claim.parquet", parquetPageBomb({ pageValues: 8, rows: 2 ** 50 })), "claim.parquet");
    await expect(claim.rows(7, 9)).rejects.toThrow("claim.parquet: cannot read rows 7–9: column x holds 8 rows, but its row group declares 1125899906842624");
    await expect(claim.rows(100, 101)).rejects.toThrow("claim.parquet: cannot read rows 100–101: column x holds 8 rows, but its row group declares 1125899906842624");
  });

  it("a footer declaring more rows than its row groups hold is refused", async () => {
    const footer = openDataFile(file("footer.parquet", parquetPageBomb({ pageValues: 8, rows: 8, footerRows: 2 ** 50 })), "footer.parquet");
    await expect(footer.numRows()).rejects.toThrow("footer.parquet is not a readable Parquet file: its footer declares 1125899906842624 rows, but its row groups hold 8");
  });

  it("honest counts read every row", async () => {
    const honest = openDataFile(file("honest.parquet", parquetPageBomb({ pageValues: 8, rows: 8 })), "honest.parquet");
    expect(await honest.numRows()).toBe(8);
    expect(await honest.rows(6, 8)).toEqual([{ x: null }, { x: null }]);
  });
});
