// The few protocol-buffer wire-format encodings TensorBoard event files need, written by hand so that logging pulls
// in no protobuf runtime. A message is built field by field; fields are emitted in the order they are added.

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_LENGTH_DELIMITED = 2;
const WIRE_FIXED32 = 5;

function varint(value: number): number[] {
  // Division rather than bit operators: steps can exceed 2^31, and JS bit operators work on 32 bits.
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new Error(`protobuf varint: expected a non-negative safe integer, got ${value}`);
  }
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  bytes.push(rest);
  return bytes;
}

export class ProtoMessage {
  private readonly parts: Uint8Array[] = [];

  private key(field: number, wireType: number): void {
    this.parts.push(Uint8Array.from(varint(field * 8 + wireType)));
  }

  /** int32/int64/uint64/enum/bool field with a non-negative value. */
  varint(field: number, value: number): this {
    this.key(field, WIRE_VARINT);
    this.parts.push(Uint8Array.from(varint(value)));
    return this;
  }

  /** double field (fixed64, little-endian). */
  double(field: number, value: number): this {
    return this.fixed(field, WIRE_FIXED64, 8, (view) => view.setFloat64(0, value, true));
  }

  /** float field (fixed32, little-endian); the value is rounded to single precision. */
  float(field: number, value: number): this {
    return this.fixed(field, WIRE_FIXED32, 4, (view) => view.setFloat32(0, value, true));
  }

  /** A fixed-width field of `size` bytes that `write` fills. */
  private fixed(field: number, wire: number, size: number, write: (view: DataView) => void): this {
    this.key(field, wire);
    const bytes = new Uint8Array(size);
    write(new DataView(bytes.buffer));
    this.parts.push(bytes);
    return this;
  }

  /** bytes, string (UTF-8) or embedded-message field. */
  bytes(field: number, value: Uint8Array | string | ProtoMessage): this {
    const payload =
      typeof value === "string" ? new TextEncoder().encode(value) : value instanceof ProtoMessage ? value.encode() : value;
    this.key(field, WIRE_LENGTH_DELIMITED);
    this.parts.push(Uint8Array.from(varint(payload.length)), payload);
    return this;
  }

  encode(): Uint8Array {
    return Buffer.concat(this.parts);
  }
}
