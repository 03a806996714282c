// value_head.pt in PyTorch's own format: our writer against real torch.load(weights_only=True), our reader against
// files real torch.save wrote (the golden fixtures, and files a Python script writes here).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { decodeTorchStateDict, encodeTorchStateDict, loadTorchStateDict, saveTorchStateDict, type StateDtype, type StateTensor } from "../../src/io/torch-pickle.js";
import { readStoredZip } from "../../src/io/zip.js";
import { strideZeroHead } from "../support/hostile-files.js";
import { readSafetensors } from "../support/safetensors.js";
import { runPython } from "../support/python.js";

const GOLDEN = path.resolve(__dirname, "..", "golden", "transformers446", "heads");
const MODELS = ["qwen2_tiny_tied", "qwen2_tiny_untied", "llama_tiny_tied", "llama_tiny_untied"];

const scratch = mkdtempSync(path.join(tmpdir(), "torch-pickle-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

// --- element conversions, written out independently of the code under test --------------------------------------

function toFloat32Bits(value: number): number {
  return new Uint32Array(new Float32Array([value]).buffer)[0]!;
}

function fromBits32(bits: number): number {
  return new Float32Array(new Uint32Array([bits]).buffer)[0]!;
}

/** float32 -> bfloat16 bits, round to nearest even (what torch's .to(torch.bfloat16) does for finite values). */
function bf16Bits(value: number): number {
  const bits = toFloat32Bits(value);
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const mantissa = h & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 31) return mantissa ? NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/** float16 bits of a value that is exactly a normal half or zero (the samples here are). */
function halfBits(value: number): number {
  if (value === 0) return 0;
  const sign = value < 0 ? 0x8000 : 0;
  const exponent = Math.floor(Math.log2(Math.abs(value)));
  const mantissa = (Math.abs(value) / 2 ** exponent - 1) * 1024;
  if (!Number.isInteger(mantissa) || exponent < -14 || exponent > 15) throw new Error(`${value} is not a normal half`);
  return sign | ((exponent + 15) << 10) | mantissa;
}

function elementsOf(tensor: StateTensor): number[] {
  const view = new DataView(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  const out: number[] = [];
  for (let offset = 0; offset < tensor.data.length; offset += tensor.dtype === "float32" ? 4 : 2) {
    if (tensor.dtype === "float32") out.push(view.getFloat32(offset, true));
    else if (tensor.dtype === "bfloat16") out.push(fromBits32(view.getUint16(offset, true) << 16));
    else out.push(halfToFloat(view.getUint16(offset, true)));
  }
  return out;
}

function tensorOf(dtype: StateDtype, shape: number[], values: number[]): StateTensor {
  const size = dtype === "float32" ? 4 : 2;
  const data = new Uint8Array(values.length * size);
  const view = new DataView(data.buffer);
  values.forEach((value, i) => {
    if (dtype === "float32") view.setFloat32(i * 4, value, true);
    else view.setUint16(i * 2, dtype === "bfloat16" ? bf16Bits(value) : halfBits(value), true);
  });
  return { dtype, shape, data };
}

/** Deterministic values exact in all three dtypes: k/64 for small integers k. */
function sample(count: number, seed: number): number[] {
  return Array.from({ length: count }, (_, i) => (((i * 37 + seed * 11) % 200) - 100) / 64);
}

// --- Python -------------------------------------------------------------------------------------------------------

const LOAD_OURS = `
import sys, json, io, collections, torch
out = {}
for f in sys.argv[1:]:
    sd = torch.load(f, weights_only=True)
    assert type(sd) in (dict, collections.OrderedDict), type(sd)
    # What torch.save itself writes for the same tensors, record by record, to compare bytes with.
    buf = io.BytesIO(); torch.save(sd, buf); open(f + ".python", "wb").write(buf.getvalue())
    out[f] = {"type": type(sd).__name__, "tensors": {k: {"dtype": str(v.dtype), "shape": list(v.shape),
              "contiguous": v.is_contiguous(), "requires_grad": v.requires_grad,
              "values": v.float().flatten().tolist()} for k, v in sd.items()}}
print(json.dumps(out))
`;

const WRITE_OTHERS = `
import sys, json, os, collections, zipfile, torch
d = sys.argv[1]
base = torch.arange(24, dtype=torch.float32) / 8 - 1
files = {
  "scalars.pt": {"zero_d": torch.tensor(2.5), "empty": torch.zeros(0, 3), "three_d": base.reshape(2, 3, 4)},
  "views.pt": {"whole": base, "slice": base[5:11], "rows": base.view(4, 6)[1:3], "transposed": base.view(4, 6).t(),
               "strided": base[1::3], "expanded": base[:3].expand(2, 3)},
  "halves.pt": {"h": (base.view(6, 4)[:, 1:3]).half(), "b": base.reshape(3, 8).t().bfloat16(), "h1": base.half()},
  "module.pt": torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1)).state_dict(),
  "many.pt": collections.OrderedDict((f"p{i}", torch.full((2,), float(i))) for i in range(1100)),
}
torch.manual_seed(0)
out = {}
for name, sd in files.items():
    torch.save(sd, os.path.join(d, name))
    out[name] = {k: {"dtype": str(v.dtype), "shape": list(v.shape), "values": v.float().flatten().tolist()} for k, v in sd.items()}

class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))
torch.save({"w": torch.zeros(2), "x": Evil()}, os.path.join(d, "evil.pt"))
torch.save({"w": torch.zeros(2), "n": collections.Counter()}, os.path.join(d, "counter.pt"))
torch.save({"ids": torch.arange(3)}, os.path.join(d, "int64.pt"))
torch.save({"w": torch.zeros(2)}, os.path.join(d, "legacy.pt"), _use_new_zipfile_serialization=False)
with zipfile.ZipFile(os.path.join(d, "views.pt")) as src, zipfile.ZipFile(os.path.join(d, "deflated.pt"), "w", zipfile.ZIP_DEFLATED) as dst:
    for info in src.infolist():
        dst.writestr(info.filename, src.read(info.filename))
print(json.dumps(out))
`;

// --- tests --------------------------------------------------------------------------------------------------------

describe("torch state dict: our encoder and decoder", () => {
  it("round-trips every dtype and rank, keeping key order", () => {
    const tensors: Record<string, StateTensor> = {};
    for (const dtype of ["float32", "bfloat16", "float16"] as const) {
      for (const shape of [[], [0], [7], [3, 4], [2, 3, 2]]) {
        const count = shape.reduce((a, b) => a * b, 1);
        tensors[`${dtype}.${shape.join("x") || "scalar"}`] = tensorOf(dtype, shape, sample(count, shape.length));
      }
    }
    const decoded = decodeTorchStateDict(encodeTorchStateDict(tensors));
    expect(Object.keys(decoded)).toEqual(Object.keys(tensors));
    for (const [key, tensor] of Object.entries(tensors)) {
      expect(decoded[key]!.dtype, key).toBe(tensor.dtype);
      expect(decoded[key]!.shape, key).toEqual(tensor.shape);
      expect(Buffer.from(decoded[key]!.data).equals(Buffer.from(tensor.data)), key).toBe(true);
    }
    expect(decodeTorchStateDict(encodeTorchStateDict({}))).toEqual({});
  });

  it("round-trips past 256 memo entries and 1000-item batches, in 64-byte aligned records", () => {
    const tensors: Record<string, StateTensor> = {};
    for (let i = 0; i < 1001; i++) tensors[`layer.${i}`] = tensorOf("float32", [1], [i]);
    const bytes = encodeTorchStateDict(tensors);
    const decoded = decodeTorchStateDict(bytes);
    expect(Object.keys(decoded)).toEqual(Object.keys(tensors));
    expect(elementsOf(decoded["layer.1000"]!)).toEqual([1000]);
    for (const [name, data] of readStoredZip(bytes, "test")) expect(data.byteOffset % 64, name).toBe(0);
  });

  it("refuses malformed tensors, naming them", () => {
    expect(() => encodeTorchStateDict({ w: { dtype: "float32", shape: [2, 2], data: new Uint8Array(12) } })).toThrow(/"w".*needs 16 bytes/);
    expect(() => encodeTorchStateDict({ w: { dtype: "int8" as StateDtype, shape: [1], data: new Uint8Array(1) } })).toThrow(/"w".*dtype/);
    expect(() => encodeTorchStateDict({ w: { dtype: "float32", shape: [-1], data: new Uint8Array(0) } })).toThrow(/"w".*shape/);
  });

  it("saves atomically and names the file when it cannot", async () => {
    const file = path.join(scratch, "value_head.pt");
    const tensors = { weight: tensorOf("float32", [1, 3], [1, 2, 3]) };
    await saveTorchStateDict(file, tensors);
    expect(elementsOf(loadTorchStateDict(file).weight!)).toEqual([1, 2, 3]);
    const missingDir = path.join(scratch, "no-such-dir", "value_head.pt");
    await expect(saveTorchStateDict(missingDir, tensors)).rejects.toThrow(missingDir);
    expect(() => loadTorchStateDict(missingDir)).toThrow(missingDir);
  });

  it("refuses truncated and corrupted files, naming the file", () => {
    const file = path.join(scratch, "broken.pt");
    const bytes = encodeTorchStateDict({ weight: tensorOf("float32", [4, 4], sample(16, 1)) });
    const truncated = bytes.subarray(0, bytes.length - 30);
    expect(() => decodeTorchStateDict(truncated, file)).toThrow(new RegExp(`${file}.*(end of central directory|truncated)`));
    const corrupted = bytes.slice();
    const weights = readStoredZip(bytes, file).get("archive/data/0")!;
    corrupted[weights.byteOffset + 5]! ^= 0x40;
    expect(() => decodeTorchStateDict(corrupted, file)).toThrow(new RegExp(`${file}.*data/0 fails its CRC-32`));
    expect(() => decodeTorchStateDict(new TextEncoder().encode("not a zip at all"), file)).toThrow(file);
  });
});

describe("torch state dict: golden files written by Python's torch.save", () => {
  for (const model of MODELS) {
    it(`${model}: value heads decode to the reference values (fp32 exactly, bf16 as rounded)`, () => {
      const reference = readSafetensors(path.join(GOLDEN, model, "heads.safetensors"));
      for (const form of ["linear", "mlp"]) {
        const fp32 = loadTorchStateDict(path.join(GOLDEN, model, `value_head_${form}.pt`));
        const bf16 = loadTorchStateDict(path.join(GOLDEN, model, `value_head_${form}_bf16.pt`));
        const expectedKeys = [...reference.keys()].filter((k) => k.startsWith(`head.${form}.`)).map((k) => k.slice(`head.${form}.`.length));
        expect(Object.keys(fp32).sort()).toEqual(expectedKeys.sort());
        expect(Object.keys(bf16).sort()).toEqual(expectedKeys.sort());
        for (const key of expectedKeys) {
          const want = reference.get(`head.${form}.${key}`)!;
          expect(fp32[key]!.dtype).toBe("float32");
          expect(fp32[key]!.shape).toEqual(want.shape);
          expect(elementsOf(fp32[key]!)).toEqual(Array.from(want.data));
          expect(bf16[key]!.dtype).toBe("bfloat16");
          expect(bf16[key]!.shape).toEqual(want.shape);
          expect(elementsOf(bf16[key]!)).toEqual(Array.from(want.data, (v) => fromBits32(bf16Bits(v) << 16)));
        }
      }
    });
  }
});

describe("torch state dict: against Python's torch", () => {
  it("our files load with torch.load(weights_only=True) to the same dtypes, shapes and values, byte for byte as torch.save", () => {
    const cases: Record<string, Record<string, StateTensor>> = {};
    for (const dtype of ["float32", "bfloat16", "float16"] as const) {
      cases[dtype] = {
        "0.weight": tensorOf(dtype, [5, 7], sample(35, 1)),
        "0.bias": tensorOf(dtype, [5], sample(5, 2)),
        "2.weight": tensorOf(dtype, [1, 5], sample(5, 3)),
        "2.bias": tensorOf(dtype, [1], [0.25]),
      };
    }
    const files = Object.keys(cases).map((dtype) => path.join(scratch, `ours_${dtype}.pt`));
    Object.values(cases).forEach((tensors, i) => writeFileSync(files[i]!, encodeTorchStateDict(tensors)));
    const loaded = runPython(LOAD_OURS, files);
    Object.entries(cases).forEach(([dtype, tensors], i) => {
      const file = files[i]!;
      expect(loaded[file].type).toBe("OrderedDict");
      expect(Object.keys(loaded[file].tensors)).toEqual(Object.keys(tensors));
      for (const [key, tensor] of Object.entries(tensors)) {
        const got = loaded[file].tensors[key];
        expect(got.dtype, key).toBe(`torch.${dtype}`);
        expect(got.shape, key).toEqual(tensor.shape);
        expect(got.contiguous && !got.requires_grad, key).toBe(true);
        expect(got.values, key).toEqual(elementsOf(tensor));
      }
      // Python's own torch.save of what it loaded: every record it writes is ours to the byte.
      const ours = readStoredZip(readFileSync(file), file);
      for (const [name, data] of readStoredZip(readFileSync(`${file}.python`), `${file}.python`)) {
        const mine = ours.get(name.replace(/^[^/]+\//, "archive/"));
        expect(mine && Buffer.from(mine).equals(Buffer.from(data)), `${dtype} ${name}`).toBe(true);
      }
    });
  });

  it("files Python writes in other shapes, views and dtypes decode to Python's values; foreign content is refused", () => {
    const dir = mkdtempSync(path.join(scratch, "python-"));
    const written = runPython(WRITE_OTHERS, [dir]) as Record<string, Record<string, { dtype: string; shape: number[]; values: number[] }>>;
    for (const [name, tensors] of Object.entries(written)) {
      const decoded = loadTorchStateDict(path.join(dir, name));
      expect(Object.keys(decoded), name).toEqual(Object.keys(tensors));
      for (const [key, want] of Object.entries(tensors)) {
        expect(`torch.${decoded[key]!.dtype}`, `${name} ${key}`).toBe(want.dtype);
        expect(decoded[key]!.shape, `${name} ${key}`).toEqual(want.shape);
        expect(elementsOf(decoded[key]!), `${name} ${key}`).toEqual(want.values);
      }
    }
    const refused = (name: string) => expect(() => loadTorchStateDict(path.join(dir, name)));
    refused("evil.pt").toThrow(new RegExp(`${dir}/evil.pt.*global posix.system is not allowed`));
    refused("counter.pt").toThrow(new RegExp(`${dir}/counter.pt.*global collections.Counter is not allowed`));
    refused("int64.pt").toThrow(new RegExp(`${dir}/int64.pt.*global torch.LongStorage is not allowed`));
    refused("legacy.pt").toThrow(new RegExp(`${dir}/legacy.pt.*legacy`));
    refused("deflated.pt").toThrow(new RegExp(`${dir}/deflated.pt.*compressed`));
  });
});

// --- hostile files ------------------------------------------------------------------------------------------------

/** What the [20000, 20000] float32 weight would take once materialised. */
const MATERIALISED_BYTES = 20000 * 20000 * 4;

/**
 * Bytes the process's peak resident memory rose by since `maxRSS` (KiB, from process.resourceUsage()): a high-water
 * mark, so a tensor materialised and dropped still shows, however loaded the machine is.
 */
const peakGrowthSince = (maxRSS: number) => (process.resourceUsage().maxRSS - maxRSS) * 1024;

describe("torch state dict: hostile files", () => {
  it("names and shapes are checked (by the caller's inspect) before any storage is materialised", () => {
    const file = strideZeroHead([20000, 20000]);
    expect(file.length).toBeLessThan(1024);
    const seen: unknown[] = [];
    const peak = process.resourceUsage().maxRSS;
    expect(() =>
      decodeTorchStateDict(file, "value_head.pt", (tensors) => {
        seen.push(tensors);
        throw new Error("weight should be [1, 16]");
      }),
    ).toThrow(/^weight should be \[1, 16\]$/);
    expect(peakGrowthSince(peak)).toBeLessThan(MATERIALISED_BYTES / 10);
    expect(seen).toEqual([[{ name: "weight", dtype: "float32", shape: [20000, 20000] }, { name: "bias", dtype: "float32", shape: [1] }]]);
  });

  it("views that would materialise far more than the file holds are refused before allocating", () => {
    const peak = process.resourceUsage().maxRSS;
    expect(() => decodeTorchStateDict(strideZeroHead([20000, 20000]), "value_head.pt")).toThrow(
      /value_head\.pt: its tensors would take 1600000004 bytes from a file of \d+ bytes/,
    );
    expect(peakGrowthSince(peak)).toBeLessThan(MATERIALISED_BYTES / 10);
    // A small expanded view is still read (torch saves expand() as a stride-0 view).
    const small = decodeTorchStateDict(strideZeroHead([3, 4]), "small.pt");
    expect(small.weight!.shape).toEqual([3, 4]);
    expect(elementsOf(small.weight!)).toEqual(Array(12).fill(0.5));
  });
});

