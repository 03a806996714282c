// Memory in metrics.jsonl and on the progress line: one "memory" record per step with the step's peak RSS and each
// phase's (generation, reward, the update's forward/backward and optimizer step, the rest), from a real MAGRPO run.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-memory-metrics-"));
const base = path.join(scratch, "base");

beforeAll(async () => {
  await createTinyModel(base, { seed: 9, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
});

describe("memory per step and phase", () => {
  it("writes a memory record per step whose phase peaks are all at most the step's, and shows the peak on the progress line", async () => {
    const outputDir = path.join(scratch, "run");
    const lines: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string | Uint8Array) => (lines.push(String(chunk)), true)) as typeof process.stderr.write;
    let trainer: MAGRPOTrainer;
    try {
      trainer = await MAGRPOTrainer.create({
        agents: [base, base],
        rewardFunc: (completions) => completions[0].map((a) => a.length / 10),
        trainDataset: [{ prompt: "Once upon a time" }, { prompt: "The red fox" }, { prompt: "A cat" }],
        outputDir,
        config: { numTurns: 1, numTrainEpochs: 1, numGenerations: 2, maxNewTokens: 4, evalInterval: 0, agentLearningRate: 1e-2, loggingSteps: 1, seed: 5 },
      });
      await trainer.train();
    } finally {
      process.stderr.write = write;
    }
    const records = readJsonlMetrics(path.join(outputDir, "metrics.jsonl")).filter((r) => r.kind === "memory");
    expect(records).toHaveLength(3);
    for (const record of records) {
      expect(record.stage).toBe("train");
      const peak = record.peak_rss_mib as number;
      // Node and libtorch alone are ≈ 200 MiB resident; this process holds a vitest worker besides.
      expect(peak).toBeGreaterThan(100);
      expect(peak).toBeLessThan(16 * 1024);
      for (const phase of ["generation", "reward", "other"]) {
        const value = record[`peak_rss_mib/${phase}`] as number;
        expect(value, phase).toBeGreaterThan(100);
        expect(value, phase).toBeLessThanOrEqual(peak);
      }
      const phases = Object.keys(record).filter((k) => k.startsWith("peak_rss_mib/")).map((k) => record[k] as number);
      expect(Math.max(...phases)).toBe(peak);
    }
    // MAGRPO updates once its buffer holds a batch: the steps that update show the update's phases too.
    const updating = records.filter((r) => "peak_rss_mib/backward" in r);
    expect(updating.length).toBeGreaterThan(0);
    for (const record of updating) {
      for (const phase of ["update", "backward", "optimizer"]) expect(record[`peak_rss_mib/${phase}`] as number, phase).toBeLessThanOrEqual(record.peak_rss_mib as number);
    }
    const memory = trainer!.timings.memory!.of("train");
    expect(memory.backward!.peakRssBytes).toBeGreaterThan(100 * 2 ** 20);
    expect(lines.join("")).toMatch(/peak_rss \d+\.\d\dGiB/);
    await trainer!.close();
  }, 120_000);
});
