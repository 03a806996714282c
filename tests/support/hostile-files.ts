// Small hostile files built byte by byte, for the tests that show a reader refuses them quickly and by name.
import { writeStoredZip } from "../../src/io/zip.js";

/**
 * A < 1 KiB value_head.pt whose "weight" is a stride-0 view of a one-element storage with the given size (a
 * [20000, 20000] one would be 1.6 GB of float32 gathered element by element), and a one-element "bias".
 */
export function strideZeroHead(size: number[]): Uint8Array {
  const bytes: number[] = [0x80, 2];
  const text = (s: string) => bytes.push(...new TextEncoder().encode(s));
  const unicode = (s: string) => {
    bytes.push(0x58, s.length, 0, 0, 0);
    text(s);
  };
  const global = (module: string, name: string) => {
    bytes.push(0x63);
    text(`${module}\n${name}\n`);
  };
  const int = (v: number) => bytes.push(0x4a, v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >>> 24);
  const orderedDict = () => (global("collections", "OrderedDict"), bytes.push(0x29, 0x52));
  const tensor = (key: string, shape: number[], stride: number[]) => {
    unicode(key);
    global("torch._utils", "_rebuild_tensor_v2");
    bytes.push(0x28, 0x28);
    unicode("storage");
    global("torch", "FloatStorage");
    unicode(key === "weight" ? "0" : "1");
    unicode("cpu");
    int(1);
    bytes.push(0x74, 0x51); // TUPLE, BINPERSID
    int(0);
    bytes.push(0x28);
    shape.forEach(int);
    bytes.push(0x74, 0x28);
    stride.forEach(int);
    bytes.push(0x74, 0x89);
    orderedDict();
    bytes.push(0x74, 0x52, 0x73); // TUPLE, REDUCE, SETITEM
  };
  orderedDict();
  tensor("weight", size, size.map(() => 0));
  tensor("bias", [1], [1]);
  bytes.push(0x2e);
  const one = new Uint8Array(new Float32Array([0.5]).buffer);
  return writeStoredZip([
    { name: "archive/data.pkl", data: Uint8Array.from(bytes) },
    { name: "archive/data/0", data: one },
    { name: "archive/data/1", data: one },
  ]);
}


// --- Parquet, written field by field in Thrift's compact protocol -------------------------------------------------

type Thrift = Array<[id: number, type: "i32" | "i64" | "binary" | "struct" | "list<struct>" | "list<i32>" | "list<binary>", value: unknown]>;

function varint(out: number[], value: number): void {
  let v = value;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
}

const zigzag = (v: number) => (v >= 0 ? 2 * v : -2 * v - 1);
const TYPE = { i32: 5, i64: 6, binary: 8, list: 9, struct: 12 } as const;

function struct(out: number[], fields: Thrift): void {
  let last = 0;
  for (const [id, type, value] of fields) {
    const code = type.startsWith("list") ? TYPE.list : TYPE[type as keyof typeof TYPE];
    out.push(((id - last) << 4) | code);
    last = id;
    if (type === "i32" || type === "i64") varint(out, zigzag(value as number));
    else if (type === "binary") {
      const bytes = new TextEncoder().encode(value as string);
      varint(out, bytes.length);
      out.push(...bytes);
    } else if (type === "struct") struct(out, value as Thrift);
    else {
      const items = value as unknown[];
      const element = type === "list<struct>" ? TYPE.struct : type === "list<i32>" ? TYPE.i32 : TYPE.binary;
      out.push((Math.min(items.length, 15) << 4) | element);
      if (items.length >= 15) varint(out, items.length);
      for (const item of items) {
        if (element === TYPE.struct) struct(out, item as Thrift);
        else if (element === TYPE.i32) varint(out, zigzag(item as number));
        else {
          const bytes = new TextEncoder().encode(item as string);
          varint(out, bytes.length);
          out.push(...bytes);
        }
      }
    }
  }
  out.push(0);
}

/**
 * A Parquet file of one OPTIONAL INT32 column "x" whose single data page declares `pageValues` values (all null: a
 * run-length-encoded run of zeros, 9 bytes) and, when `snappyClaim` is given, a SNAPPY page claiming that many bytes
 * uncompressed. Its one row group declares `rows` rows, and the footer `footerRows` (default `rows`).
 */
export function parquetPageBomb(options: { pageValues: number; rows: number; snappyClaim?: number; footerRows?: number }): Uint8Array {
  const runHeader: number[] = [];
  varint(runHeader, options.pageValues * 2);
  const levels = [...runHeader, 0];
  const page = [levels.length, 0, 0, 0, ...levels];
  const header: number[] = [];
  struct(header, [
    [1, "i32", 0], // DATA_PAGE
    [2, "i32", options.snappyClaim ?? page.length],
    [3, "i32", page.length],
    [5, "struct", [[1, "i32", options.pageValues], [2, "i32", 0], [3, "i32", 3], [4, "i32", 3]]],
  ]);
  const chunk = [...header, ...page];
  const footer: number[] = [];
  struct(footer, [
    [1, "i32", 1],
    [2, "list<struct>", [[[4, "binary", "schema"], [5, "i32", 1]], [[1, "i32", 1], [3, "i32", 1], [4, "binary", "x"]]]],
    [3, "i64", options.footerRows ?? options.rows],
    [
      4,
      "list<struct>",
      [
        [
          [
            1,
            "list<struct>",
            [
              [
                [2, "i64", 4],
                [
                  3,
                  "struct",
                  [
                    [1, "i32", 1],
                    [2, "list<i32>", [0, 3]],
                    [3, "list<binary>", ["x"]],
                    [4, "i32", options.snappyClaim === undefined ? 0 : 1],
                    [5, "i64", options.pageValues],
                    [6, "i64", chunk.length],
                    [7, "i64", chunk.length],
                    [9, "i64", 4],
                  ],
                ],
              ],
            ],
          ],
          [2, "i64", chunk.length],
          [3, "i64", options.rows],
        ],
      ],
    ],
  ]);
  const magic = [0x50, 0x41, 0x52, 0x31];
  const length = footer.length;
  return Uint8Array.from([...magic, ...chunk, ...footer, length & 0xff, (length >> 8) & 0xff, 0, 0, ...magic]);
}
