// The bench suite's quick mode end to end, in this process (its workers run from the TypeScript sources through tsx,
// so no build is needed): every section is written, every figure is a real positive measurement with
// min ≤ median ≤ max, and a result compared with itself gives ratios of 1. Speed is not checked.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compareResults, readBenchResult } from "../../src/bench/compare.js";
import { BENCH_MODELS, buildBenchModel, parameterCount } from "../../src/bench/models.js";
import { planCases } from "../../src/bench/plan.js";
import { runInWorker } from "../../src/bench/runner.js";
import { runSuite, type SuiteRun } from "../../src/bench/suite.js";
import { ALGORITHM_PHASES, type GenerationCase, type Summary } from "../../src/bench/types.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-bench-"));
let run: SuiteRun;

beforeAll(async () => {
  run = await runSuite({ quick: true, outDir: scratch, log: () => {} });
}, 300_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Every min/median/max summary in a result, with where it is. */
function summaries(value: unknown, where = "result"): Array<[string, Summary]> {
  if (typeof value !== "object" || value === null) return [];
  if ("median" in value && "min" in value && "max" in value) return [[where, value as Summary]];
  return Object.entries(value).flatMap(([key, child]) => summaries(child, `${where}.${key}`));
}

describe("bench suite, quick mode", () => {
  it("writes the JSON and markdown results with every section and nothing failed", async () => {
    expect(existsSync(run.jsonFile) && existsSync(run.markdownFile)).toBe(true);
    const result = await readBenchResult(run.jsonFile);
    expect(result.mode).toBe("quick");
    expect(result.failed).toEqual([]);
    expect(result.environment.torchVersion).toMatch(/^\d+\.\d+/);
    expect(result.environment.threads).toBeGreaterThan(0);
    expect(Object.keys(result.ceilings.matmul).sort()).toEqual(["bf16", "fp32"]);
    expect(result.ceilings.copy.gbps.median).toBeGreaterThan(0);
    expect(result.generation.length).toBeGreaterThan(0);
    expect(result.training.map((t) => t.case.dtype).sort()).toEqual(["bf16", "fp32"]);
    expect(result.trainer.map((t) => t.case.id).sort()).toEqual(["trainer/demo/batched", "trainer/demo/layout/2x1", "trainer/demo/perCompletion"]);
    // The data-parallel layout: one gradient all-reduce per optimizer step, carrying both agents' gradients.
    expect(result.trainer.find((t) => t.case.layout)?.communication?.bytesPerStep).toBeGreaterThan(0);
    expect(result.trainer.every((t) => t.envSteps > 0)).toBe(true);
    expect(result.trainerSpeedup).toBeGreaterThan(0);
    // The other trainers' demo epochs, each split into its own phases, which add up to the epoch.
    expect(result.algorithms!.map((a) => a.case.algorithm)).toEqual(["iac", "maac", "madpo", "marlhf"]);
    for (const a of result.algorithms!) {
      expect(Object.keys(a.phases)).toEqual(ALGORITHM_PHASES[a.case.algorithm]);
      expect(a.envSteps).toBeGreaterThan(0);
      const total = Object.values(a.phases).reduce((sum, p) => sum + p.median, 0);
      expect(total).toBeCloseTo(a.epochSeconds.median, 2);
    }
    // Memory rows: each trainer's peak RSS per stage/phase, none above the worker's own peak.
    for (const t of [...result.trainer.filter((x) => !x.case.layout), ...result.algorithms!]) {
      const peaks = Object.entries(t.phasePeakRssMiB!);
      expect(peaks.map(([phase]) => phase)).toEqual(expect.arrayContaining([expect.stringMatching(/\/generation$/), expect.stringMatching(/\/backward$/), expect.stringMatching(/\/optimizer$/)]));
      for (const [, peak] of peaks) {
        expect(peak.median).toBeGreaterThan(50);
        expect(peak.median).toBeLessThanOrEqual(t.peakRssMiB + 1);
      }
    }
    expect(result.targets.length).toBeGreaterThan(0);
    const markdown = readFileSync(run.markdownFile, "utf8");
    for (const heading of ["## Ceilings", "## Generation", "## Training", "## Whole trainer", "## Other trainers", "## Targets"]) expect(markdown).toContain(heading);
    expect(markdown).toMatch(/Peak RSS by phase, batched \(MiB, medians\): train\/other \d+/);
  });

  it("every figure is finite with min ≤ median ≤ max; rates, times and memory are positive", async () => {
    const result = await readBenchResult(run.jsonFile);
    const all = summaries(result);
    expect(all.length).toBeGreaterThan(20);
    for (const [where, s] of all) {
      expect([where, Number.isFinite(s.min) && Number.isFinite(s.max)]).toEqual([where, true]);
      expect([where, s.min <= s.median && s.median <= s.max && s.min >= 0]).toEqual([where, true]);
    }
    // Phase timings may be zero (the demo has no reference model to score against); everything else is measured.
    for (const [where, s] of all.filter(([where]) => !where.includes(".phases."))) expect([where, s.min > 0]).toEqual([where, true]);
    for (const r of [...result.generation, ...result.training, ...result.trainer, ...result.algorithms!]) {
      expect(r.peakRssMiB).toBeGreaterThan(50);
      // Others' share of the CPU while it ran: measured from /proc/stat on Linux.
      if (process.platform === "linux") expect(r.otherCpuShare).toBeGreaterThanOrEqual(0);
    }
  });

  it("compared with itself, every ratio is 1", async () => {
    const result = await readBenchResult(run.jsonFile);
    const rows = compareResults(result, result);
    expect(rows.length).toBeGreaterThan(10);
    for (const row of rows) expect(row.ratio).toBe(1);
  });
});

describe("bench suite pieces", () => {
  it("--only selects by id and a pattern matching nothing fails before anything runs", async () => {
    await expect(runSuite({ quick: true, only: "no-such-benchmark", outDir: scratch, log: () => {} })).rejects.toThrow(/matches no benchmark/);
    await expect(runSuite({ quick: true, only: "(", outDir: scratch, log: () => {} })).rejects.toThrow(/not a regular expression/);
    await expect(readBenchResult(path.join(scratch, "missing.json"))).rejects.toThrow(/cannot read a bench result/);
  });

  it("a benchmark that throws in its worker comes back as an error carrying the worker's message", async () => {
    const empty: GenerationCase = { kind: "generate", id: "generate/tiny/fp32/b0", model: "tiny", dtype: "fp32", batch: 0, promptLength: 4, newTokens: 4, repeats: 1, protocol: "suite" };
    await expect(runInWorker(empty, "cpu", 60)).rejects.toThrow(/no prompts/);
  });

  it("the parameter count the skip rule estimates with is the built model's", () => {
    for (const name of ["tiny", "12m"] as const) {
      const model = buildBenchModel(name, "fp32", "cpu");
      expect(parameterCount(BENCH_MODELS[name].shape)).toBe(model.info().parameterCount);
      model.dispose();
    }
  });

  it("the default plan covers the issue's protocol and the peer's shapes", () => {
    const { cases } = planCases("default");
    const ids = cases.map((c) => c.id);
    for (const model of ["tiny", "20m", "0.5b"])
      for (const dtype of ["fp32", "bf16"]) for (const batch of [1, 8, 32]) expect(ids).toContain(`generate/${model}/${dtype}/b${batch}/64+128`);
    for (const model of ["12m", "0.5b"]) for (const batch of [1, 8]) expect(ids).toContain(`generate/${model}/fp32/b${batch}/32+64`);
    for (const model of ["tiny", "12m", "20m", "0.5b"]) for (const dtype of ["fp32", "bf16"]) expect(ids).toContain(`train/${model}/${dtype}/8x128`);
    for (const model of ["moe", "sliding"]) expect(ids).toEqual(expect.arrayContaining([`generate/${model}/fp32/b8/64+128`, `train/${model}/fp32/8x128`]));
    expect(ids).toEqual(expect.arrayContaining(["trainer/demo/batched", "trainer/demo/perCompletion", "trainer/demo/layout/1x2", "trainer/demo/layout/2x1", "trainer/demo/layout/1x1", "trainer/demo/iac", "trainer/demo/maac", "trainer/demo/madpo", "trainer/demo/marlhf"]));
    expect(new Set(ids).size).toBe(ids.length);
  });
});
