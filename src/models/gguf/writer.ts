// Writes a GGUF file (version 3, little-endian): the header, the metadata key/value pairs, the tensor infos, then
// every tensor's data on a GGUF_DEFAULT_ALIGNMENT boundary. The file appears complete under its name or not at all,
// and tensor data is produced one tensor at a time, so a model larger than memory's spare room can still be written.
import { writeFileAtomicWith } from "../../util/atomic.js";
import { encodedBytes } from "./encode.js";
import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION, GgmlType, GgufValueType, type GgmlTypeName } from "./format.js";

/** A metadata value with the GGUF type it is written as. */
export type GgufValue =
  | { type: "string"; value: string }
  | { type: "uint32"; value: number }
  | { type: "float32"; value: number }
  | { type: "bool"; value: boolean }
  | { type: "string[]"; value: readonly string[] }
  | { type: "int32[]"; value: ArrayLike<number> };

/** One tensor to write: its name, shape as torch gives it (outermost first), ggml type, and its encoded data. */
export interface GgufTensor {
  name: string;
  shape: readonly number[];
  type: GgmlTypeName;
  /** The tensor's bytes in `type` (encodedBytes(type, elements) of them), made when the writer reaches it. */
  data(): Promise<Uint8Array>;
}

/** Little-endian bytes of the header, metadata and tensor infos, gathered in order. */
class ByteSink {
  private readonly chunks: Buffer[] = [];
  length = 0;

  private push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  bytes(chunk: Uint8Array): void {
    this.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
  }

  private fixed(size: number, write: (chunk: Buffer) => void): void {
    const chunk = Buffer.alloc(size);
    write(chunk);
    this.push(chunk);
  }

  uint32(value: number): void {
    this.fixed(4, (chunk) => chunk.writeUInt32LE(value));
  }

  int32(value: number): void {
    this.fixed(4, (chunk) => chunk.writeInt32LE(value));
  }

  uint64(value: number): void {
    this.fixed(8, (chunk) => chunk.writeBigUInt64LE(BigInt(value)));
  }

  float32(value: number): void {
    this.fixed(4, (chunk) => chunk.writeFloatLE(value));
  }

  bool(value: boolean): void {
    this.push(Buffer.from([value ? 1 : 0]));
  }

  string(value: string): void {
    const utf8 = Buffer.from(value, "utf8");
    this.uint64(utf8.length);
    this.push(utf8);
  }

  concat(): Buffer {
    return Buffer.concat(this.chunks, this.length);
  }
}

function writeValue(sink: ByteSink, value: GgufValue): void {
  const tagged = (tag: number, write: () => void) => {
    sink.uint32(tag);
    write();
  };
  const array = (elementTag: number, count: number, write: () => void) =>
    tagged(GgufValueType.ARRAY, () => {
      sink.uint32(elementTag);
      sink.uint64(count);
      write();
    });
  switch (value.type) {
    case "string":
      return tagged(GgufValueType.STRING, () => sink.string(value.value));
    case "uint32":
      return tagged(GgufValueType.UINT32, () => sink.uint32(value.value));
    case "float32":
      return tagged(GgufValueType.FLOAT32, () => sink.float32(value.value));
    case "bool":
      return tagged(GgufValueType.BOOL, () => sink.bool(value.value));
    case "string[]":
      return array(GgufValueType.STRING, value.value.length, () => value.value.forEach((item) => sink.string(item)));
    case "int32[]":
      return array(GgufValueType.INT32, value.value.length, () => Array.from(value.value, (item) => sink.int32(item)));
  }
}

const alignUp = (offset: number): number => Math.ceil(offset / GGUF_DEFAULT_ALIGNMENT) * GGUF_DEFAULT_ALIGNMENT;

const elementsOf = (shape: readonly number[]): number => shape.reduce((n, d) => n * d, 1);

/** Writes `metadata` (in the order given) and `tensors` as a GGUF file at `file`, atomically. */
export async function writeGguf(file: string, metadata: ReadonlyArray<readonly [string, GgufValue]>, tensors: readonly GgufTensor[]): Promise<void> {
  const names = new Set<string>();
  for (const tensor of tensors) {
    if (names.has(tensor.name)) throw new Error(`${file}: tensor ${tensor.name} is written twice`);
    names.add(tensor.name);
  }
  const header = new ByteSink();
  header.bytes(GGUF_MAGIC);
  header.uint32(GGUF_VERSION);
  header.uint64(tensors.length);
  header.uint64(metadata.length);
  for (const [key, value] of metadata) {
    header.string(key);
    writeValue(header, value);
  }
  let dataOffset = 0;
  const sizes: number[] = [];
  for (const tensor of tensors) {
    header.string(tensor.name);
    header.uint32(tensor.shape.length);
    // ggml lists dimensions innermost first: ne[0] is a row's length.
    for (const dim of [...tensor.shape].reverse()) header.uint64(dim);
    header.uint32(GgmlType[tensor.type]);
    header.uint64(dataOffset);
    const size = encodedBytes(tensor.type, elementsOf(tensor.shape));
    sizes.push(size);
    dataOffset = alignUp(dataOffset + size);
  }
  // writeFile on a handle writes all of its data at the current position, which then moves past it.
  await writeFileAtomicWith(file, async (handle) => {
    const head = header.concat();
    await handle.writeFile(head);
    await handle.writeFile(Buffer.alloc(alignUp(head.length) - head.length));
    for (const [i, tensor] of tensors.entries()) {
      const data = await tensor.data();
      if (data.byteLength !== sizes[i]) throw new Error(`tensor ${tensor.name}: ${data.byteLength} bytes of data, but ${tensor.type} × [${tensor.shape.join(", ")}] takes ${sizes[i]}`);
      await handle.writeFile(data);
      await handle.writeFile(Buffer.alloc(alignUp(data.byteLength) - data.byteLength));
    }
  });
}
