// Uncompressed ("stored") zip archives, in the layout PyTorch's zip serialization uses.
//
// The writer reproduces what libtorch's PyTorchStreamWriter (miniz with its zip64 flag) emits: each entry's data starts
// on a 64-byte boundary, padded by an "FB" extra field of 'Z's, its CRC and sizes follow in a data descriptor, and the
// central directory is closed by a zip64 end record, its locator and the classic end record. The reader takes any zip
// of stored entries (zip64 included) and refuses compressed or encrypted ones: torch never writes those.
import { crc32 } from "node:zlib";

export interface ZipRecord {
  name: string;
  data: Uint8Array;
}

const LOCAL_HEADER = 0x04034b50;
const DATA_DESCRIPTOR = 0x08074b50;
const CENTRAL_HEADER = 0x02014b50;
const END_OF_CENTRAL_DIRECTORY = 0x06054b50;
const ZIP64_END_OF_CENTRAL_DIRECTORY = 0x06064b50;
const ZIP64_LOCATOR = 0x07064b50;
const ZIP64_EXTRA_ID = 0x0001;

const LOCAL_HEADER_SIZE = 30;
const DATA_DESCRIPTOR_SIZE = 16;
const CENTRAL_HEADER_SIZE = 46;
const END_SIZE = 22;
const ZIP64_END_SIZE = 56;
const ZIP64_LOCATOR_SIZE = 20;
const MAX_COMMENT = 0xffff;

/** libtorch aligns every record's data to this many bytes so that storages can be memory-mapped. */
const TORCH_ALIGNMENT = 64;
// General-purpose flags torch sets: sizes in a data descriptor (bit 3), UTF-8 names (bit 11).
const TORCH_FLAGS = 0x0808;
const FLAG_ENCRYPTED = 0x0001;
const METHOD_STORED = 0;
const U32_LIMIT = 0xffffffff;

/** Bytes of the "FB" extra field that puts a record's data, after its local header and name, on the alignment. */
function alignmentPadding(headerOffset: number, nameLength: number): number {
  const dataStart = headerOffset + LOCAL_HEADER_SIZE + nameLength + 4;
  return (TORCH_ALIGNMENT - (dataStart % TORCH_ALIGNMENT)) % TORCH_ALIGNMENT;
}

/** Writes `records` in order as a torch-style stored zip. Archives past 4 GiB (zip64 entries) are refused. */
export function writeStoredZip(records: readonly ZipRecord[]): Uint8Array {
  const encoder = new TextEncoder();
  const names = records.map((record) => encoder.encode(record.name));
  const paddings: number[] = [];
  let cursor = 0;
  for (let i = 0; i < records.length; i++) {
    paddings.push(alignmentPadding(cursor, names[i]!.length));
    cursor += LOCAL_HEADER_SIZE + names[i]!.length + 4 + paddings[i]! + records[i]!.data.length + DATA_DESCRIPTOR_SIZE;
  }
  const centralStart = cursor;
  const centralSize = names.reduce((sum, name) => sum + CENTRAL_HEADER_SIZE + name.length, 0);
  const total = centralStart + centralSize + ZIP64_END_SIZE + ZIP64_LOCATOR_SIZE + END_SIZE;
  if (centralStart + centralSize > U32_LIMIT || records.length > 0xffff) {
    throw new Error(`zip archive of ${total} bytes in ${records.length} entries needs zip64 entries, which this writer does not produce`);
  }

  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  const crcs: number[] = [];
  const offsets: number[] = [];
  let at = 0;
  records.forEach((record, i) => {
    const name = names[i]!;
    const padding = paddings[i]!;
    offsets.push(at);
    view.setUint32(at, LOCAL_HEADER, true);
    view.setUint16(at + 6, TORCH_FLAGS, true);
    view.setUint16(at + 26, name.length, true);
    view.setUint16(at + 28, padding + 4, true);
    at += LOCAL_HEADER_SIZE;
    out.set(name, at);
    at += name.length;
    out[at] = 0x46; // 'F'
    out[at + 1] = 0x42; // 'B'
    view.setUint16(at + 2, padding, true);
    out.fill(0x5a, at + 4, at + 4 + padding); // 'Z'
    at += 4 + padding;
    out.set(record.data, at);
    at += record.data.length;
    const crc = crc32(record.data);
    crcs.push(crc);
    view.setUint32(at, DATA_DESCRIPTOR, true);
    view.setUint32(at + 4, crc, true);
    view.setUint32(at + 8, record.data.length, true);
    view.setUint32(at + 12, record.data.length, true);
    at += DATA_DESCRIPTOR_SIZE;
  });

  records.forEach((record, i) => {
    const name = names[i]!;
    view.setUint32(at, CENTRAL_HEADER, true);
    view.setUint16(at + 8, TORCH_FLAGS, true);
    view.setUint32(at + 16, crcs[i]!, true);
    view.setUint32(at + 20, record.data.length, true);
    view.setUint32(at + 24, record.data.length, true);
    view.setUint16(at + 28, name.length, true);
    view.setUint32(at + 42, offsets[i]!, true);
    out.set(name, at + CENTRAL_HEADER_SIZE);
    at += CENTRAL_HEADER_SIZE + name.length;
  });

  const zip64End = at;
  view.setUint32(at, ZIP64_END_OF_CENTRAL_DIRECTORY, true);
  view.setBigUint64(at + 4, BigInt(ZIP64_END_SIZE - 12), true);
  view.setUint16(at + 12, 0x031e, true); // made by: Unix, spec 3.0, as miniz writes
  view.setUint16(at + 14, 0x002d, true); // needed: 4.5, the zip64 version
  view.setBigUint64(at + 24, BigInt(records.length), true);
  view.setBigUint64(at + 32, BigInt(records.length), true);
  view.setBigUint64(at + 40, BigInt(centralSize), true);
  view.setBigUint64(at + 48, BigInt(centralStart), true);
  at += ZIP64_END_SIZE;
  view.setUint32(at, ZIP64_LOCATOR, true);
  view.setBigUint64(at + 8, BigInt(zip64End), true);
  view.setUint32(at + 16, 1, true);
  at += ZIP64_LOCATOR_SIZE;
  view.setUint32(at, END_OF_CENTRAL_DIRECTORY, true);
  view.setUint16(at + 8, records.length, true);
  view.setUint16(at + 10, records.length, true);
  view.setUint32(at + 12, centralSize, true);
  view.setUint32(at + 16, centralStart, true);
  return out;
}

/**
 * The entries of a zip of stored entries, by name, as views into `bytes` (checked against their CRC-32). `where` names
 * the file in errors.
 */
export function readStoredZip(bytes: Uint8Array, where: string): Map<string, Uint8Array> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fail = (message: string): never => {
    throw new Error(`${where}: not a readable zip archive: ${message}`);
  };
  const u16 = (at: number) => (at + 2 <= bytes.length ? view.getUint16(at, true) : fail(`truncated at byte ${at}`));
  const u32 = (at: number) => (at + 4 <= bytes.length ? view.getUint32(at, true) : fail(`truncated at byte ${at}`));
  const u64 = (at: number) => {
    if (at + 8 > bytes.length) fail(`truncated at byte ${at}`);
    const value = view.getBigUint64(at, true);
    return value > BigInt(Number.MAX_SAFE_INTEGER) ? fail(`64-bit field at byte ${at} is out of range`) : Number(value);
  };

  let end = -1;
  for (let at = bytes.length - END_SIZE; at >= Math.max(0, bytes.length - END_SIZE - MAX_COMMENT); at--) {
    if (view.getUint32(at, true) === END_OF_CENTRAL_DIRECTORY) {
      end = at;
      break;
    }
  }
  if (end < 0) fail("no end of central directory record (the file is truncated or not a zip)");

  let count = u16(end + 10);
  let centralSize = u32(end + 12);
  let centralStart = u32(end + 16);
  if (count === 0xffff || centralSize === U32_LIMIT || centralStart === U32_LIMIT) {
    const locator = end - ZIP64_LOCATOR_SIZE;
    if (locator < 0 || u32(locator) !== ZIP64_LOCATOR) fail("zip64 sizes without a zip64 end of central directory locator");
    const zip64End = u64(locator + 8);
    if (u32(zip64End) !== ZIP64_END_OF_CENTRAL_DIRECTORY) fail(`no zip64 end of central directory record at byte ${zip64End}`);
    count = u64(zip64End + 32);
    centralSize = u64(zip64End + 40);
    centralStart = u64(zip64End + 48);
  }
  if (centralStart + centralSize > bytes.length) fail(`central directory (bytes ${centralStart}..${centralStart + centralSize}) lies past the end`);

  const decoder = new TextDecoder("utf-8", { fatal: true });
  const entries = new Map<string, Uint8Array>();
  let at = centralStart;
  for (let i = 0; i < count; i++) {
    if (u32(at) !== CENTRAL_HEADER) fail(`central directory entry ${i} at byte ${at} has a bad signature`);
    const flags = u16(at + 8);
    const method = u16(at + 10);
    const crc = u32(at + 16);
    let compressedSize = u32(at + 20);
    let size = u32(at + 24);
    const nameLength = u16(at + 28);
    const extraLength = u16(at + 30);
    const commentLength = u16(at + 32);
    let headerOffset = u32(at + 42);
    if (at + CENTRAL_HEADER_SIZE + nameLength > bytes.length) fail(`central directory entry ${i} is truncated`);
    const name = decoder.decode(bytes.subarray(at + CENTRAL_HEADER_SIZE, at + CENTRAL_HEADER_SIZE + nameLength));
    // zip64: the fields set to all-ones are given, in this order, by the zip64 extra field.
    let extra = at + CENTRAL_HEADER_SIZE + nameLength;
    const extraEnd = extra + extraLength;
    while (extra + 4 <= extraEnd) {
      const id = u16(extra);
      const length = u16(extra + 2);
      if (id === ZIP64_EXTRA_ID) {
        let field = extra + 4;
        const next = () => {
          if (field + 8 > extra + 4 + length) fail(`entry ${name}: zip64 extra field is too short`);
          const value = u64(field);
          field += 8;
          return value;
        };
        if (size === U32_LIMIT) size = next();
        if (compressedSize === U32_LIMIT) compressedSize = next();
        if (headerOffset === U32_LIMIT) headerOffset = next();
      }
      extra += 4 + length;
    }
    at = extraEnd + commentLength;

    if (flags & FLAG_ENCRYPTED) fail(`entry ${name} is encrypted`);
    if (method !== METHOD_STORED) {
      fail(`entry ${name} is compressed (method ${method}); only stored entries are read, as torch.save writes them`);
    }
    if (compressedSize !== size) fail(`entry ${name} is stored but its sizes differ (${compressedSize} vs ${size})`);
    if (u32(headerOffset) !== LOCAL_HEADER) fail(`entry ${name}: no local header at byte ${headerOffset}`);
    const dataStart = headerOffset + LOCAL_HEADER_SIZE + u16(headerOffset + 26) + u16(headerOffset + 28);
    if (dataStart + size > bytes.length) fail(`entry ${name} (${size} bytes at byte ${dataStart}) runs past the end`);
    const data = bytes.subarray(dataStart, dataStart + size);
    if (crc32(data) !== crc) fail(`entry ${name} fails its CRC-32 check (the file is corrupted)`);
    if (entries.has(name)) fail(`entry ${name} appears twice`);
    entries.set(name, data);
  }
  return entries;
}
