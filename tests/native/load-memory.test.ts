// CausalLM.load builds its parameters on the device's lane and copies the weights straight from the safetensors
// mapping: its peak resident memory stays within 1.25 × the file's bytes (one copy of the weights plus a slice of
// the file), and the event loop keeps running while it loads. Measured in a child process of its own, on a model
// of ~300 MB made here with the project's own create and save.
import { spawnSync } from "node:child_process";
import { mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { CausalLM } from "../../src/models/causal-lm.js";
import { buildConfigJson } from "../../src/models/config.js";

const dir = mkdtempSync(path.join(tmpdir(), "comlrl-load-memory-"));
const child = path.join(import.meta.dirname, "load-memory-child.ts");
const shape = { vocabSize: 16384, hiddenSize: 1024, intermediateSize: 2816, numLayers: 4, numHeads: 16, numKvHeads: 4, ropeTheta: 1e4, rmsNormEps: 1e-6, tieWordEmbeddings: false };
let fileBytes = 0;

beforeAll(async () => {
  const model = CausalLM.create(buildConfigJson("qwen2", shape, { bosTokenId: null, eosTokenId: shape.vocabSize - 1 }), { seed: 1 });
  await model.save(dir);
  model.dispose();
  fileBytes = statSync(path.join(dir, "model.safetensors")).size;
}, 120_000);

describe("CausalLM.load of a ~300 MB float32 model", () => {
  it("peaks at most 1.25 × the safetensors bytes above the process's baseline and never stalls a 10 ms timer by 100 ms", () => {
    expect(fileBytes).toBeGreaterThan(250e6);
    const run = spawnSync(process.execPath, ["--import", "tsx", child, dir], { encoding: "utf8", env: { ...process.env, COMLRL_NUM_THREADS: "1" }, timeout: 120_000 });
    expect(run.status, run.stderr).toBe(0);
    const measured = JSON.parse(run.stdout.trim().split("\n").pop()!) as { baseline: number; peak: number; maxGapMs: number; seconds: number; parameters: number };
    expect(measured.parameters * 4).toBeLessThanOrEqual(fileBytes);
    expect(measured.peak - measured.baseline).toBeLessThanOrEqual(1.25 * fileBytes);
    expect(measured.maxGapMs).toBeLessThan(100);
  }, 180_000);
});
