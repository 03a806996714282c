// A small pure-TS safetensors reader for test fixtures (the golden reference files), independent of the native reader
// under test.
import { readFileSync } from "node:fs";

export interface FixtureTensor {
  dtype: string;
  shape: number[];
  /** Float tensors as Float64Array (exact for f32/f64), integer tensors as number[]-like Float64Array too. */
  data: Float64Array;
}

export function readSafetensors(file: string): Map<string, FixtureTensor> {
  const bytes = readFileSync(file);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8")) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const base = 8 + headerLength;
  const out = new Map<string, FixtureTensor>();
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [begin, end] = entry.data_offsets;
    const raw = bytes.subarray(base + begin, base + end);
    const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    const count = entry.shape.reduce((a, b) => a * b, 1);
    const data = new Float64Array(count);
    for (let i = 0; i < count; i++) {
      switch (entry.dtype) {
        case "F32": data[i] = view.getFloat32(i * 4, true); break;
        case "F64": data[i] = view.getFloat64(i * 8, true); break;
        case "I64": data[i] = Number(view.getBigInt64(i * 8, true)); break;
        case "I32": data[i] = view.getInt32(i * 4, true); break;
        default: throw new Error(`${file}: fixture dtype ${entry.dtype} not handled`);
      }
    }
    out.set(name, { dtype: entry.dtype, shape: entry.shape, data });
  }
  return out;
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>, mask?: (i: number) => boolean): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let worst = 0;
  for (let i = 0; i < a.length; i++) {
    if (mask && !mask(i)) continue;
    worst = Math.max(worst, Math.abs(a[i] - b[i]));
  }
  return worst;
}

export function norm(a: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i] * a[i];
  return Math.sqrt(sum);
}
