// TensorBoard event files, checked by an independent decoder written here from the format descriptions: TFRecord
// framing with both masked CRC-32Cs verified (bitwise CRC, not the library's table), then the Event / Summary /
// TensorProto protobuf fields the way event.proto, summary.proto and tensor.proto number them.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { crc32c, maskedCrc32c } from "../../src/logging/crc32c.js";
import { TensorBoardWriter } from "../../src/logging/tensorboard.js";

let scratch: string;
beforeEach(() => {
  scratch = mkdtempSync(path.join(tmpdir(), "comlrl-tb-"));
});
afterEach(() => {
  rmSync(scratch, { recursive: true, force: true });
});

// ---- independent decoder ----

function bitwiseCrc32c(data: Uint8Array): number {
  let crc = ~0 >>> 0;
  for (const byte of data) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = (crc >>> 1) ^ (0x82f63b78 & -(crc & 1));
  }
  return ~crc >>> 0;
}

function mask(crc: number): number {
  const rotated = ((crc >>> 15) + (crc % 2 ** 15) * 2 ** 17) % 2 ** 32;
  return (rotated + 0xa282ead8) % 2 ** 32;
}

function tfRecords(file: Buffer): Buffer[] {
  const records: Buffer[] = [];
  let at = 0;
  while (at < file.length) {
    const length = Number(file.readBigUInt64LE(at));
    expect(file.readUInt32LE(at + 8), `length CRC of record ${records.length}`).toBe(mask(bitwiseCrc32c(file.subarray(at, at + 8))));
    const data = file.subarray(at + 12, at + 12 + length);
    expect(file.readUInt32LE(at + 12 + length), `data CRC of record ${records.length}`).toBe(mask(bitwiseCrc32c(data)));
    records.push(data);
    at += 12 + length + 4;
  }
  expect(at).toBe(file.length);
  return records;
}

interface Field {
  field: number;
  wire: number;
  varint?: number;
  bytes?: Buffer;
}

function protoFields(buffer: Buffer): Field[] {
  const fields: Field[] = [];
  let at = 0;
  const readVarint = () => {
    let value = 0;
    let scale = 1;
    for (;;) {
      const byte = buffer[at++]!;
      value += (byte & 0x7f) * scale;
      scale *= 128;
      if (byte < 0x80) return value;
    }
  };
  while (at < buffer.length) {
    const key = readVarint();
    const field = Math.floor(key / 8);
    const wire = key % 8;
    if (wire === 0) fields.push({ field, wire, varint: readVarint() });
    else if (wire === 1) fields.push({ field, wire, bytes: buffer.subarray(at, (at += 8)) });
    else if (wire === 5) fields.push({ field, wire, bytes: buffer.subarray(at, (at += 4)) });
    else if (wire === 2) {
      const length = readVarint();
      fields.push({ field, wire, bytes: buffer.subarray(at, (at += length)) });
    } else throw new Error(`unexpected wire type ${wire}`);
  }
  return fields;
}

const one = (fields: Field[], field: number) => fields.find((f) => f.field === field);
const all = (fields: Field[], field: number) => fields.filter((f) => f.field === field);

interface DecodedValue {
  tag: string;
  simpleValue?: number;
  plugin?: string;
  dtype?: number;
  shape?: number[];
  strings?: string[];
}

interface DecodedEvent {
  wallTime: number;
  step?: number;
  fileVersion?: string;
  values?: DecodedValue[];
}

function decodeValue(buffer: Buffer): DecodedValue {
  const f = protoFields(buffer);
  const value: DecodedValue = { tag: one(f, 1)!.bytes!.toString("utf8") };
  const simple = one(f, 2);
  if (simple) {
    expect(simple.wire).toBe(5);
    value.simpleValue = simple.bytes!.readFloatLE(0);
  }
  const metadata = one(f, 9);
  if (metadata) value.plugin = one(protoFields(one(protoFields(metadata.bytes!), 1)!.bytes!), 1)!.bytes!.toString("utf8");
  const tensor = one(f, 8);
  if (tensor) {
    const t = protoFields(tensor.bytes!);
    value.dtype = one(t, 1)!.varint!;
    value.shape = all(protoFields(one(t, 2)!.bytes!), 2).map((dim) => one(protoFields(dim.bytes!), 1)!.varint!);
    value.strings = all(t, 8).map((s) => s.bytes!.toString("utf8"));
  }
  return value;
}

function decodeEvent(buffer: Buffer): DecodedEvent {
  const f = protoFields(buffer);
  const wall = one(f, 1)!;
  expect(wall.wire).toBe(1);
  const event: DecodedEvent = { wallTime: wall.bytes!.readDoubleLE(0) };
  const step = one(f, 2);
  if (step) event.step = step.varint!;
  const version = one(f, 3);
  if (version) event.fileVersion = version.bytes!.toString("utf8");
  const summary = one(f, 5);
  if (summary) event.values = all(protoFields(summary.bytes!), 1).map((v) => decodeValue(v.bytes!));
  return event;
}

function readEvents(file: string): DecodedEvent[] {
  return tfRecords(readFileSync(file)).map(decodeEvent);
}

// ---- tests ----

describe("crc32c", () => {
  const bytes = (text: string) => new TextEncoder().encode(text);

  it("matches the standard check value and the iSCSI test vectors (RFC 3720 B.4)", () => {
    expect(crc32c(bytes("123456789"))).toBe(0xe3069283);
    expect(crc32c(new Uint8Array(0))).toBe(0);
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa);
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43);
    expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i))).toBe(0x46dd794e);
  });

  it("agrees with a bitwise implementation, and masks as TFRecord does", () => {
    const data = Uint8Array.from({ length: 1000 }, (_, i) => (i * 7919) % 256);
    expect(crc32c(data)).toBe(bitwiseCrc32c(data));
    expect(maskedCrc32c(data)).toBe(mask(bitwiseCrc32c(data)));
  });
});

describe("TensorBoardWriter", () => {
  it("names the file the way TensorBoard looks for it, unique per writer", () => {
    const a = new TensorBoardWriter(path.join(scratch, "tb"));
    const b = new TensorBoardWriter(path.join(scratch, "tb"));
    a.close();
    b.close();
    const pattern = new RegExp(`^events\\.out\\.tfevents\\.\\d{10}\\.${hostname().replace(/[.]/g, "\\.")}\\.${process.pid}\\.\\d+$`);
    expect(path.basename(a.file)).toMatch(pattern);
    expect(a.file).not.toBe(b.file);
    expect(readdirSync(path.join(scratch, "tb")).sort()).toEqual([path.basename(a.file), path.basename(b.file)].sort());
  });

  it("starts with a file-version event and writes scalars with their steps", () => {
    const before = Date.now() / 1000;
    const writer = new TensorBoardWriter(scratch);
    writer.addScalar("turn_1/reward_mean", 0.25, 3);
    writer.addScalars({ "turn_1/reward_mean": 0.5, "turn_2/expected_return": -1.75 }, 7);
    // Steps beyond 2^32 need the full int64 varint.
    writer.addScalar("big", 1, 5_000_000_123);
    writer.addScalar("diverged", Number.NaN, 8);
    writer.close();
    const after = Date.now() / 1000;

    const events = readEvents(writer.file);
    expect(events).toHaveLength(5);
    expect(events[0]!.fileVersion).toBe("brain.Event:2");
    expect(events[0]!.values).toBeUndefined();
    for (const event of events) {
      expect(event.wallTime).toBeGreaterThanOrEqual(before - 1);
      expect(event.wallTime).toBeLessThanOrEqual(after + 1);
    }
    expect(events[1]).toMatchObject({ step: 3, values: [{ tag: "turn_1/reward_mean", simpleValue: 0.25 }] });
    expect(events[2]).toMatchObject({
      step: 7,
      values: [
        { tag: "turn_1/reward_mean", simpleValue: 0.5 },
        { tag: "turn_2/expected_return", simpleValue: -1.75 },
      ],
    });
    expect(events[3]).toMatchObject({ step: 5_000_000_123, values: [{ tag: "big", simpleValue: 1 }] });
    expect(events[4]!.values![0]!.simpleValue).toBeNaN();
  });

  it("stores scalars in single precision", () => {
    const writer = new TensorBoardWriter(scratch);
    writer.addScalar("x", 0.1, 1);
    writer.close();
    expect(readEvents(writer.file)[1]!.values![0]!.simpleValue).toBe(Math.fround(0.1));
  });

  it("writes text as a DT_STRING tensor for the text plugin", () => {
    const writer = new TensorBoardWriter(scratch);
    const markdown = "| turn | completion |\n|---|---|\n| 1 | héllo ✓ |";
    writer.addText("samples", markdown, 12);
    writer.close();
    const [, event] = readEvents(writer.file);
    expect(event).toMatchObject({
      step: 12,
      values: [{ tag: "samples", plugin: "text", dtype: 7, shape: [1], strings: [markdown] }],
    });
  });

  it("has every event on disk before close, and flush is harmless", () => {
    const writer = new TensorBoardWriter(scratch);
    writer.addScalar("a", 1, 1);
    expect(readEvents(writer.file)).toHaveLength(2);
    writer.flush();
    writer.addScalar("a", 2, 2);
    expect(readEvents(writer.file).map((e) => e.step)).toEqual([undefined, 1, 2]);
    writer.close();
  });

  it("ignores an empty scalar record and rejects bad steps and use after close", () => {
    const writer = new TensorBoardWriter(scratch);
    writer.addScalars({}, 1);
    expect(readEvents(writer.file)).toHaveLength(1);
    expect(() => writer.addScalar("loss", 1, -2)).toThrow(/step for "loss" must be a non-negative integer, got -2/);
    expect(() => writer.addText("t", "x", 0.5)).toThrow(/step for "t"/);
    writer.close();
    writer.close();
    expect(() => writer.addScalar("loss", 1, 1)).toThrow(/is closed/);
  });
});
