// Every native file write can fail and then is a JS error naming the file, with no partial file left and the process
// alive (a full disk inside torch's zip writer used to abort with exit 134). Reading refuses a safetensors header
// whose tensors overlap.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Optimizer } from "../../src/models/optimizer.js";
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
    model.zeroGrad();
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
});
