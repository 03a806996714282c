// TensorBoard event files, written without TensorFlow: a sequence of TFRecords, each holding one serialized `Event`
// protobuf (tensorflow/core/util/event.proto). The first Event carries only the file version; each later one carries
// a step and a `Summary` of tagged values: scalars as `simple_value`, text as a DT_STRING tensor tagged for the text
// plugin (which renders it as markdown). Records are written as they come, one synchronous write each, so a crash
// leaves at most one torn record at the end, which TensorBoard's reader skips.
import { fsyncSync, openSync } from "node:fs";
import { hostname } from "node:os";
import path from "node:path";
import { maskedCrc32c } from "./crc32c.js";
import { ProtoMessage } from "./protobuf-writer.js";
import { FileWriteError } from "../util/atomic.js";
import { makeDirsSync } from "../util/make-dirs.js";
import { appendWhole, closeSynced } from "./jsonl.js";

// Field numbers from event.proto, summary.proto, tensor.proto and tensor_shape.proto.
const EVENT = { wallTime: 1, step: 2, fileVersion: 3, summary: 5 } as const;
const SUMMARY = { value: 1 } as const;
const VALUE = { tag: 1, simpleValue: 2, tensor: 8, metadata: 9 } as const;
const METADATA = { pluginData: 1 } as const;
const PLUGIN_DATA = { pluginName: 1 } as const;
const TENSOR = { dtype: 1, tensorShape: 2, stringVal: 8 } as const;
const TENSOR_SHAPE = { dim: 2 } as const;
const DIM = { size: 1 } as const;
const DT_STRING = 7;

// TensorFlow adds a process-wide counter to event file names so two writers opened in the same second stay distinct.
let filesOpened = 0;

/** One TFRecord: uint64 length, masked CRC of the length bytes, the data, masked CRC of the data (all little-endian). */
function tfRecord(data: Uint8Array): Buffer {
  const header = Buffer.alloc(12);
  header.writeBigUInt64LE(BigInt(data.length), 0);
  header.writeUInt32LE(maskedCrc32c(header.subarray(0, 8)), 8);
  const footer = Buffer.alloc(4);
  footer.writeUInt32LE(maskedCrc32c(data), 0);
  return Buffer.concat([header, data, footer]);
}

function wallTime(): number {
  return Date.now() / 1000;
}

function summaryEvent(step: number, values: ProtoMessage[]): Uint8Array {
  const summary = new ProtoMessage();
  for (const value of values) summary.bytes(SUMMARY.value, value);
  return new ProtoMessage().double(EVENT.wallTime, wallTime()).varint(EVENT.step, step).bytes(EVENT.summary, summary).encode();
}

function scalarValue(tag: string, value: number): ProtoMessage {
  return new ProtoMessage().bytes(VALUE.tag, tag).float(VALUE.simpleValue, value);
}

function textValue(tag: string, markdown: string): ProtoMessage {
  const metadata = new ProtoMessage().bytes(METADATA.pluginData, new ProtoMessage().bytes(PLUGIN_DATA.pluginName, "text"));
  const shape = new ProtoMessage().bytes(TENSOR_SHAPE.dim, new ProtoMessage().varint(DIM.size, 1));
  const tensor = new ProtoMessage().varint(TENSOR.dtype, DT_STRING).bytes(TENSOR.tensorShape, shape).bytes(TENSOR.stringVal, markdown);
  return new ProtoMessage().bytes(VALUE.tag, tag).bytes(VALUE.metadata, metadata).bytes(VALUE.tensor, tensor);
}

/** Writes scalars as a TensorBoard event file (no TensorFlow needed); trainers use it with tensorboard: true. */
export class TensorBoardWriter {
  /** The event file this writer appends to. */
  readonly file: string;
  private fd: number | null;

  /** Creates logDir and a new event file in it, named the way TensorBoard expects to find it. */
  constructor(
    /** The directory the event file is written to. */
    readonly logDir: string,
  ) {
    makeDirsSync(logDir);
    const seconds = Math.floor(Date.now() / 1000);
    this.file = path.join(logDir, `events.out.tfevents.${seconds}.${hostname()}.${process.pid}.${filesOpened++}`);
    try {
      this.fd = openSync(this.file, "ax");
    } catch (error) {
      throw new FileWriteError(this.file, error);
    }
    this.append(new ProtoMessage().double(EVENT.wallTime, wallTime()).bytes(EVENT.fileVersion, "brain.Event:2").encode());
  }

  private append(event: Uint8Array): void {
    if (this.fd === null) throw new Error(`TensorBoardWriter: ${this.file} is closed`);
    appendWhole(this.fd, this.file, Buffer.from(tfRecord(event)));
  }

  private checkStep(step: number, tag: string): void {
    if (!Number.isSafeInteger(step) || step < 0) {
      throw new Error(`TensorBoardWriter: step for "${tag}" must be a non-negative integer, got ${step}`);
    }
  }

  /** Writes one scalar at step. */
  addScalar(tag: string, value: number, step: number): void {
    this.addScalars({ [tag]: value }, step);
  }

  /** Writes all scalars of record as one Event at step (NaN and ±Infinity are kept; TensorBoard shows them). */
  addScalars(record: Record<string, number>, step: number): void {
    const tags = Object.keys(record);
    if (tags.length === 0) return;
    this.checkStep(step, tags[0]!);
    this.append(summaryEvent(step, tags.map((tag) => scalarValue(tag, record[tag]!))));
  }

  /** Writes markdown text under tag, shown in TensorBoard's Text tab. */
  addText(tag: string, markdown: string, step: number): void {
    this.checkStep(step, tag);
    this.append(summaryEvent(step, [textValue(tag, markdown)]));
  }

  /** Forces written events to disk (they already reach the kernel on every add). */
  flush(): void {
    if (this.fd === null) return;
    try {
      fsyncSync(this.fd);
    } catch (error) {
      throw new FileWriteError(this.file, error);
    }
  }

  /** Flushes and closes the file; later adds throw. Closing twice is harmless. */
  close(): void {
    if (this.fd === null) return;
    const fd = this.fd;
    this.fd = null;
    closeSynced(fd, this.file);
  }
}
