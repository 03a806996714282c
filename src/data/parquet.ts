// Parquet rows read with bounds, over hyparquet. hyparquet trusts a file's headers: it allocates a page's declared
// number of values before decoding them (a 9-byte run-length page can declare 2^26), a SNAPPY page's declared
// uncompressed size before decompressing, and it reads every row group of a range at once, each slice on a read
// stream of its own (one file descriptor per row group: EMFILE past ~1000 groups). Here, before hyparquet decodes a
// row group, its pages' headers are scanned and checked against the page's own bytes and the row group's declared
// row count, and what one read may decode is capped; row groups are read a few at a time, through one descriptor.
import { open, type FileHandle } from "node:fs/promises";
import { parquetMetadataAsync, parquetReadObjects, parquetSchema, type AsyncBuffer, type ColumnMetaData, type FileMetaData, type RowGroup } from "hyparquet";
import { parquetHeader } from "hyparquet/src/column.js";

/** The most values (all columns, all pages) one read may decode, and the most page bytes it may hold uncompressed. */
export const PARQUET_MAX_VALUES = 2 ** 24;
export const PARQUET_MAX_BYTES = 2 ** 30;
/** Row groups decoded at once. */
const GROUP_CONCURRENCY = 4;
// Snappy's densest element is a 3-byte copy of 64 bytes: no stream expands more than ~22×.
const SNAPPY_MAX_RATIO = 22;

export class ParquetBoundsError extends Error {
  /** Always "ParquetBoundsError". */
  override name = "ParquetBoundsError";
}

/** An AsyncBuffer over one open file: each slice is one positioned read on the same descriptor. */
function handleBuffer(handle: FileHandle, byteLength: number): AsyncBuffer {
  return {
    byteLength,
    async slice(start: number, end = byteLength) {
      const bytes = new Uint8Array(Math.max(0, end - start));
      const { bytesRead } = await handle.read(bytes, 0, bytes.length, start);
      if (bytesRead !== bytes.length) throw new ParquetBoundsError(`slice ${start}–${end} reaches past the end of the file (${byteLength} bytes)`);
      return bytes.buffer;
    },
  };
}

/** Runs work on the file open, closing it after. */
async function withFile<T>(file: string, work: (buffer: AsyncBuffer) => Promise<T>): Promise<T> {
  const handle = await open(file, "r");
  try {
    return await work(handleBuffer(handle, (await handle.stat()).size));
  } finally {
    await handle.close();
  }
}

/** The file's footer, whose row count must be its row groups' (rows are located by the groups' counts). */
export async function readParquetMetadata(file: string): Promise<FileMetaData> {
  const metadata = await withFile(file, (buffer) => parquetMetadataAsync(buffer));
  const grouped = metadata.row_groups.reduce((sum, group) => sum + BigInt(group.num_rows), 0n);
  if (BigInt(metadata.num_rows) !== grouped) throw new ParquetBoundsError(`its footer declares ${metadata.num_rows} rows, but its row groups hold ${grouped}`);
  return metadata;
}

/** Leaf column paths ("a.b") whose values are one per row: no REPEATED field on the way down. */
function flatColumns(metadata: FileMetaData): Set<string> {
  const flat = new Set<string>();
  const walk = (node: ReturnType<typeof parquetSchema>, path: string[], repeated: boolean) => {
    if (node.children.length === 0) {
      if (!repeated) flat.add(path.join("."));
      return;
    }
    for (const child of node.children) walk(child, [...path, child.element.name], repeated || child.element.repetition_type === "REPEATED");
  };
  walk(parquetSchema(metadata), [], false);
  return flat;
}

/** What decoding a row group will take, from its pages' headers; throws at the first page that is out of bounds. */
function scanGroup(bytes: Uint8Array, base: number, group: RowGroup, flat: Set<string>): { values: number; bytes: number } {
  const rows = Number(group.num_rows);
  let values = 0;
  let uncompressed = 0;
  for (const chunk of group.columns) {
    const meta = chunk.meta_data as ColumnMetaData;
    const column = meta.path_in_schema.join(".");
    // Rows the chunk's pages hold, where their headers say (hyparquet yields an empty row for each one missing).
    let heldRows: number | undefined = 0;
    const start = Number(meta.dictionary_page_offset || meta.data_page_offset) - base;
    const end = start + Number(meta.total_compressed_size);
    const reader = { view: new DataView(bytes.buffer, bytes.byteOffset + start, end - start), offset: 0 };
    while (reader.offset < reader.view.byteLength) {
      const at = base + start + reader.offset;
      const page = parquetHeader(reader);
      const fail = (what: string): never => {
        throw new ParquetBoundsError(`column ${column}: the page at byte ${at} ${what}`);
      };
      const compressed = page.compressed_page_size;
      if (!(compressed >= 0) || reader.offset + compressed > reader.view.byteLength) fail(`declares ${compressed} bytes, past the end of its column chunk`);
      const limit = meta.codec === "UNCOMPRESSED" ? compressed : SNAPPY_MAX_RATIO * compressed + 32;
      if (!(page.uncompressed_page_size >= 0) || page.uncompressed_page_size > limit) {
        fail(`declares ${page.uncompressed_page_size} bytes uncompressed from ${compressed} ${meta.codec} bytes`);
      }
      const dataRows = page.data_page_header_v2?.num_rows ?? (flat.has(column) ? page.data_page_header?.num_values : undefined);
      if (dataRows !== undefined && dataRows > rows) fail(`declares ${dataRows} ${page.data_page_header_v2 ? "rows" : "values"}, more than its row group's ${rows} rows`);
      if (page.data_page_header || page.data_page_header_v2) heldRows = dataRows === undefined || heldRows === undefined ? undefined : heldRows + dataRows;
      const dictionary = page.dictionary_page_header?.num_values;
      // Dictionary entries are PLAIN-encoded: one byte each at the least.
      if (dictionary !== undefined && dictionary > page.uncompressed_page_size) fail(`declares ${dictionary} dictionary entries in ${page.uncompressed_page_size} bytes`);
      values += page.data_page_header?.num_values ?? page.data_page_header_v2?.num_values ?? dictionary ?? 0;
      uncompressed += page.uncompressed_page_size;
      reader.offset += compressed;
    }
    if (heldRows !== undefined && heldRows !== rows) throw new ParquetBoundsError(`column ${column} holds ${heldRows} rows, but its row group declares ${rows}`);
  }
  return { values, bytes: uncompressed };
}

/**
 * Rows [start, end) of a Parquet file: the row groups they touch, GROUP_CONCURRENCY at a time, each scanned then
 * decoded by hyparquet from its bytes in memory. Throws ParquetBoundsError for a page out of bounds, or when the
 * read would decode more than PARQUET_MAX_VALUES values or PARQUET_MAX_BYTES bytes.
 */
export async function readParquetRows(file: string, metadata: FileMetaData, start: number, end: number): Promise<Record<string, unknown>[]> {
  const flat = flatColumns(metadata);
  const groups: Array<{ group: RowGroup; first: number }> = [];
  let first = 0;
  for (const group of metadata.row_groups) {
    const count = Number(group.num_rows);
    if (first < end && first + count > start && count > 0) groups.push({ group, first });
    first += count;
  }
  let values = 0;
  let bytes = 0;
  return withFile(file, async (buffer) => {
    const readGroup = async ({ group, first }: (typeof groups)[number]) => {
      const chunks = group.columns.map((c) => c.meta_data as ColumnMetaData);
      const lo = Math.min(...chunks.map((m) => Number(m.dictionary_page_offset || m.data_page_offset)));
      const hi = Math.max(...chunks.map((m) => Number(m.dictionary_page_offset || m.data_page_offset) + Number(m.total_compressed_size)));
      if (!(lo >= 0 && hi <= buffer.byteLength)) throw new ParquetBoundsError(`the row group at row ${first} spans bytes ${lo}–${hi}, outside the file's ${buffer.byteLength}`);
      const data = new Uint8Array(await buffer.slice(lo, hi));
      const need = scanGroup(data, lo, group, flat);
      values += need.values;
      bytes += need.bytes;
      if (values > PARQUET_MAX_VALUES || bytes > PARQUET_MAX_BYTES) {
        throw new ParquetBoundsError(
          `rows ${start}–${end} would decode ${values} values (${bytes} bytes) by row ${first + Number(group.num_rows)}, more than one read may ` +
            `(${PARQUET_MAX_VALUES} values, ${PARQUET_MAX_BYTES} bytes): read fewer rows at a time, or split the file`,
        );
      }
      const inGroup: AsyncBuffer = { byteLength: buffer.byteLength, slice: (s, e = buffer.byteLength) => (s >= lo && e <= hi ? data.slice(s - lo, e - lo).buffer : buffer.slice(s, e)) };
      return parquetReadObjects({ file: inGroup, metadata, rowStart: Math.max(start, first), rowEnd: Math.min(end, first + Number(group.num_rows)) });
    };
    const results: Record<string, unknown>[][] = [];
    for (let i = 0; i < groups.length; i += GROUP_CONCURRENCY) results.push(...(await Promise.all(groups.slice(i, i + GROUP_CONCURRENCY).map(readGroup))));
    return results.flat();
  });
}
