// Every native file write can fail and then is a JS error naming the file, with no partial file left and the process
// alive (a full disk inside torch's zip writer used to abort with exit 134). Reading refuses a safetensors header
// whose tensors overlap, and one nested 100k deep (formatting it into the error overflowed the stack: SIGSEGV).
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Optimizer } from "../../src/models/optimizer.js";
import { readSafetensorsHeader } from "../../src/models/weights-check.js";
import { tinyLM } from "./tiny-lm.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-io-"));
const full = path.join(scratch, "full");
// Mounting needs root (CI and the dev machines run tests as root); elsewhere the disk-full cases are skipped.
const asRoot = process.getuid?.() === 0;
// ~100k parameters: 0.4 MB of weights, 0.8 MB of AdamW moments, far beyond the 64 KiB filesystem.
const model = tinyLM(7, { vocabSize: 512, hiddenSize: 64, intermediateSize: 128 });

beforeAll(() => {
  if (!asRoot) return;
  execFileSync("mkdir", ["-p", full]);
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", full]);
});
afterAll(() => {
  if (asRoot) execFileSync("umount", [full]);
  model.dispose();
});

describe.skipIf(!asRoot)("writes to a full disk", () => {
  it("optimizer.save rejects naming the file, leaves nothing behind, and the process carries on", async () => {
    const optimizer = new Optimizer(model, { lr: 1e-3 });
    await model.zeroGrad();
    await model.policyGradientBackward([[1, 2, 3]], [[4, 5]], [1]);
    await optimizer.step(); // moments exist: the state is twice the weights
    const file = path.join(full, "optimizer.pt");
    await expect(optimizer.save(file)).rejects.toThrow(`${file}: write failed: No space left on device`);
    expect(readdirSync(full)).toEqual([]);
    // Still alive and still working: the same optimizer saves where there is room.
    const fine = path.join(scratch, "optimizer.pt");
    await optimizer.save(fine);
    await optimizer.load(fine);
    optimizer.dispose();
  });

  it("model.save (safetensors) rejects naming the file and leaves no partial file", async () => {
    const file = path.join(full, "model.safetensors");
    await expect(model.native.save({ dir: full })).rejects.toThrow(`${file}: write failed: No space left on device`);
    expect(readdirSync(full)).toEqual([]);
  });

  it("a directory that cannot be written names the file", async () => {
    const file = path.join(scratch, "no-such-dir", "optimizer.pt");
    const optimizer = new Optimizer(model, { lr: 1e-3 });
    await expect(optimizer.save(file)).rejects.toThrow(`${file}: cannot create: No such file or directory`);
    optimizer.dispose();
  });
});

describe("safetensors headers", () => {
  // Rewrites a saved model.safetensors with a new header (same data section).
  function rewriteHeader(source: string, target: string, edit: (header: Record<string, any>) => void): void {
    const bytes = readFileSync(source);
    const length = Number(bytes.readBigUInt64LE(0));
    const header = JSON.parse(bytes.subarray(8, 8 + length).toString("utf8"));
    edit(header);
    let text = JSON.stringify(header);
    text += " ".repeat((8 - (text.length % 8)) % 8);
    const prefix = Buffer.alloc(8);
    prefix.writeBigUInt64LE(BigInt(text.length));
    writeFileSync(target, Buffer.concat([prefix, Buffer.from(text), bytes.subarray(8 + length)]));
  }

  it("refuses tensors whose data_offsets overlap, naming both", async () => {
    const dir = path.join(scratch, "saved");
    execFileSync("mkdir", ["-p", dir]);
    await model.native.save({ dir });
    const source = path.join(dir, "model.safetensors");
    const broken = path.join(scratch, "overlap.safetensors");
    const a = "model.layers.0.input_layernorm.weight";
    const b = "model.layers.0.post_attention_layernorm.weight";
    rewriteHeader(source, broken, (header) => {
      // b starts half-way into a: same size, so each alone is a valid range inside the data section.
      const [begin, end] = header[a].data_offsets;
      const half = (end - begin) / 2;
      header[b].data_offsets = [begin + half, end + half];
    });
    await expect(model.native.loadWeights([broken])).rejects.toThrow(
      new RegExp(`${broken}: tensors "(${a}|${b})" \\(bytes \\d+-\\d+\\) and "(${a}|${b})" \\(bytes \\d+-\\d+\\) overlap`),
    );
    // The untouched file, whose tensors are adjacent, still loads.
    await model.native.loadWeights([source]);
  });
  // A 200 KB header whose dtype, shape or data_offsets is an array nested 100,000 deep.
  const deep = "[".repeat(100_000) + "]".repeat(100_000);
  const nested = (field: "dtype" | "shape" | "data_offsets") => {
    const entry: Record<string, string> = { dtype: '"F32"', shape: "[16]", data_offsets: "[0, 64]", [field]: deep };
    const text = `{"model.norm.weight": {${Object.entries(entry).map(([k, v]) => `"${k}": ${v}`).join(", ")}}}`;
    const prefix = Buffer.alloc(8);
    prefix.writeBigUInt64LE(BigInt(text.length));
    const file = path.join(scratch, `nested-${field}.safetensors`);
    writeFileSync(file, Buffer.concat([prefix, Buffer.from(text), Buffer.alloc(64)]));
    return file;
  };

  it("refuses a header nested 100k deep by name, natively and in the TypeScript reader, and the process lives", () => {
    const files = (["dtype", "shape", "data_offsets"] as const).map(nested);
    // In a child: the native reader's failure used to be a SIGSEGV, which would take the test worker with it.
    const script = `import { tinyLM } from ${JSON.stringify(path.resolve("tests/native/tiny-lm.ts"))};
      const model = tinyLM(7);
      for (const file of ${JSON.stringify(files)}) {
        try { await model.native.loadWeights([file]); console.log("loaded"); } catch (error) { console.log("refused: " + error.message); }
      }`;
    const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8", timeout: 60_000 });
    expect(run.signal, run.stderr).toBeNull();
    expect(run.stdout.trim().split("\n")).toEqual(files.map((file) => `refused: ${file}: the header nests deeper than 16 levels: not a safetensors header`));
    for (const file of files) expect(() => readSafetensorsHeader(file)).toThrow(`${file}: the header nests deeper than 16 levels: not a safetensors header`);
  });

  it("a shape whose product wraps around 2^64 is refused, not read past the mapping", async () => {
    const file = path.join(scratch, "wrapped.safetensors");
    // 2^62 × 4 elements is 2^64: a wrapped product of 0 bytes would match data_offsets [0, 0].
    const text = JSON.stringify({ "model.norm.weight": { dtype: "F32", shape: [2 ** 31, 2 ** 31, 4], data_offsets: [0, 0] } });
    const prefix = Buffer.alloc(8);
    prefix.writeBigUInt64LE(BigInt(text.length));
    writeFileSync(file, Buffer.concat([prefix, Buffer.from(text)]));
    await expect(model.native.loadWeights([file])).rejects.toThrow(`${file}: tensor "model.norm.weight" has a shape [2147483648,2147483648,4] larger than the file`);
    expect(() => readSafetensorsHeader(file)).toThrow(`${file}: tensor "model.norm.weight" data_offsets [0, 0] do not match its shape and dtype (73786976294838206464 bytes)`);
  });
});
