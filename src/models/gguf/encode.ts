// A float32 tensor's bytes in the ggml types the GGUF writer produces, rounded exactly as the `gguf` Python package
// and llama.cpp round them: F16 by numpy's float32 → float16 cast (nearest, ties to even, subnormals kept), BF16 by
// gguf's __compute_fp32_to_bf16 (nearest, ties to even, NaN kept quiet), Q8_0 by gguf's Q8_0.quantize_blocks (and
// llama.cpp's quantize_row_q8_0_ref): per block of 32, d = max|x| / 127 in float32, q = round-half-away(x / d).
import { Q8_0_BLOCK, Q8_0_BLOCK_BYTES, type GgmlTypeName } from "./format.js";

const scratch = new DataView(new ArrayBuffer(4));

function float32Bits(value: number): number {
  scratch.setFloat32(0, value, true);
  return scratch.getUint32(0, true);
}

/** The IEEE half-precision bits of a float32 value (numpy's npy_floatbits_to_halfbits). */
export function float32ToFloat16Bits(value: number): number {
  const bits = float32Bits(value);
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  const mantissa = bits & 0x7fffff;
  if (exponent === 0xff) {
    if (mantissa === 0) return sign | 0x7c00;
    // A NaN keeps its top payload bits and stays a NaN.
    const nan = 0x7c00 + (mantissa >>> 13);
    return sign | (nan === 0x7c00 ? nan + 1 : nan);
  }
  const halfExponent = exponent - 127 + 15;
  if (halfExponent >= 0x1f) return sign | 0x7c00;
  if (halfExponent <= 0) {
    if (halfExponent < -10) return sign;
    const full = mantissa | 0x800000;
    const shift = 14 - halfExponent;
    return sign | roundedShift(full, shift);
  }
  // Rounding may carry into the exponent, up to infinity, which is the right result.
  return sign | ((halfExponent << 10) + roundedShift(mantissa, 13));
}

/** value >>> shift rounded to nearest, ties to even. */
function roundedShift(value: number, shift: number): number {
  const kept = value >>> shift;
  const rest = value & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  return rest > half || (rest === half && (kept & 1) === 1) ? kept + 1 : kept;
}

/** The bfloat16 bits of a float32 value (nearest, ties to even; a NaN stays a quiet NaN). */
export function float32ToBfloat16Bits(value: number): number {
  const bits = float32Bits(value);
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits & 0xffff0000) | (64 << 16)) >>> 16;
  return (bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16;
}

function encodeHalves(values: Float32Array, convert: (value: number) => number): Uint8Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = convert(values[i]!);
  return new Uint8Array(out.buffer);
}

/** float32 round half away from zero (gguf's np_roundf, C's roundf). */
function roundHalfAway(value: number): number {
  const magnitude = Math.abs(value);
  const floored = Math.floor(magnitude);
  const rounded = magnitude - floored >= 0.5 ? floored + 1 : floored;
  return value < 0 ? -rounded : rounded;
}

/** Q8_0 blocks of a tensor whose element count is a multiple of 32, row-major. */
export function quantizeQ8_0(values: Float32Array): Uint8Array {
  if (values.length % Q8_0_BLOCK !== 0) throw new RangeError(`Q8_0 needs a multiple of ${Q8_0_BLOCK} values, got ${values.length}`);
  const blocks = values.length / Q8_0_BLOCK;
  const out = new Uint8Array(blocks * Q8_0_BLOCK_BYTES);
  const view = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    const start = b * Q8_0_BLOCK;
    let amax = 0;
    for (let i = 0; i < Q8_0_BLOCK; i++) amax = Math.max(amax, Math.abs(values[start + i]!));
    const d = Math.fround(amax / 127);
    const inverse = d === 0 ? 0 : Math.fround(1 / d);
    const at = b * Q8_0_BLOCK_BYTES;
    view.setUint16(at, float32ToFloat16Bits(d), true);
    for (let i = 0; i < Q8_0_BLOCK; i++) view.setInt8(at + 2 + i, roundHalfAway(Math.fround(values[start + i]! * inverse)));
  }
  return out;
}

/** Per ggml type: elements per block and bytes per block. */
const BLOCKS: Record<GgmlTypeName, [elements: number, bytes: number]> = { F32: [1, 4], F16: [1, 2], BF16: [1, 2], Q8_0: [Q8_0_BLOCK, Q8_0_BLOCK_BYTES] };

/** Bytes of `elements` values stored as `type`. */
export function encodedBytes(type: GgmlTypeName, elements: number): number {
  const [perBlock, blockBytes] = BLOCKS[type];
  return (elements / perBlock) * blockBytes;
}

const ENCODERS: Record<GgmlTypeName, (values: Float32Array) => Uint8Array> = {
  F32: (values) => new Uint8Array(values.buffer, values.byteOffset, values.byteLength),
  F16: (values) => encodeHalves(values, float32ToFloat16Bits),
  BF16: (values) => encodeHalves(values, float32ToBfloat16Bits),
  Q8_0: quantizeQ8_0,
};

/** A float32 tensor's data in `type`, little-endian as GGUF stores it. */
export function encodeTensor(values: Float32Array, type: GgmlTypeName): Uint8Array {
  return ENCODERS[type](values);
}
