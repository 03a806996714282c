// CPU agent lanes through the trainers (src/trainers/lanes.ts): with COMLRL_CPU_LANES=2 every trainer kind runs its
// two agents concurrently, each on a lane of its own, and trains to the same weights and logs the same updates, in
// the same order, as with the agents taking turns on the one CPU lane (both on one intra-op thread, as tests run).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { addon } from "../../src/native/loader.js";
import { CPU_LANES_ENV } from "../../src/trainers/lanes.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { makeBase, makeTrainer, type ResumableTrainer } from "../support/checkpoint-run.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-lanes-"));
const base = path.join(scratch, "base");
let tokenizer: ComlrlTokenizer;

beforeAll(async () => {
  tokenizer = await makeBase(base);
});

afterEach(() => {
  delete process.env[CPU_LANES_ENV];
});

const lanesOf = (trainer: ResumableTrainer) => {
  const t = trainer as unknown as { agents: { model: CausalLM }[]; critics?: { model: CausalLM }[]; rewardModel?: { model: CausalLM } };
  return [...t.agents, ...(t.critics ?? []), ...(t.rewardModel ? [t.rewardModel] : [])].map((m) => addon().computeLane(m.model.native));
};
const records = (dir: string) => readJsonlMetrics(path.join(dir, "metrics.jsonl")).map(({ time: _t, ...rest }) => rest);

async function run(kind: string, lanes: string | undefined) {
  if (lanes === undefined) delete process.env[CPU_LANES_ENV];
  else process.env[CPU_LANES_ENV] = lanes;
  const outputDir = path.join(scratch, `${kind}-${lanes ?? "default"}`.replace(/[^\w-]/g, "_"));
  const trainer = await makeTrainer(base, tokenizer, outputDir, 1, {}, kind);
  const placed = lanesOf(trainer);
  // Rollout trainers hold their environment; preference trainers their actors'.
  const { environment, actors } = trainer as unknown as { environment?: { concurrent: boolean }; actors?: { environment: { concurrent: boolean } } };
  const concurrent = (environment ?? actors!.environment).concurrent;
  await trainer.train();
  const weights = trainer.weights().map((w) => Array.from(w));
  await trainer.close();
  // Timings and the progress bar's seconds differ from run to run; everything else must not.
  return { placed, concurrent, weights, records: records(outputDir).filter((r) => r.kind !== "timing") };
}

// Where each kind's actors (then critics, MARLHF's reward model) run: a critic per agent on its agent's lane; what the
// agents share (MAAC's critic, the reward model) on the CPU's own lane with all the intra-op threads, as before. MAAC
// keeps its agents in turn: its updates step the one critic in each, so they take turns anyway.
const PLACED: Record<string, string[]> = {
  MAGRPO: ["cpu#0", "cpu#1"],
  "IAC (separate critics)": ["cpu#0", "cpu#1", "cpu#0", "cpu#1"],
  "IAC (shared heads)": ["cpu#0", "cpu#1"],
  MAAC: ["cpu", "cpu", "cpu"],
  MADPO: ["cpu#0", "cpu#1"],
  MARLHF: ["cpu#0", "cpu#1", "cpu"],
  "MARLHF (MAAC)": ["cpu#0", "cpu#1", "cpu"],
};

const withModels = (agents: CausalLM[], run: string) =>
  MAGRPOTrainer.create({
    agents,
    tokenizer,
    rewardFunc: coverVowelsRewardFunc,
    formatters: coverVowelsFormatters((m) => tokenizer.applyChatTemplate(m, { addGenerationPrompt: true })),
    trainDataset: coverVowelsDataset(2),
    outputDir: path.join(scratch, run),
    quiet: true,
    config: { numTurns: 1, numGenerations: 2, maxNewTokens: 2, evalInterval: 0 },
  });

describe("CPU agent lanes", () => {
  for (const [kind, placed] of Object.entries(PLACED)) {
    it(`${kind}: agents on lanes of their own train and log exactly as agents in turn`, async () => {
      const inTurn = await run(kind, undefined);
      const laned = await run(kind, "2");
      expect(inTurn.concurrent).toBe(false);
      expect(inTurn.placed.every((lane) => lane === "cpu")).toBe(true);
      expect(laned.concurrent).toBe(placed[0] !== "cpu");
      expect(laned.placed).toEqual(placed);
      expect(laned.records.filter((r) => r.kind === "update").length).toBeGreaterThan(0);
      expect(laned.records).toEqual(inTurn.records);
      expect(laned.weights).toEqual(inTurn.weights);
    });
  }

  it("hands models the caller passed in back on their device's lane at close()", async () => {
    process.env[CPU_LANES_ENV] = "2";
    const models = [await CausalLM.fromDirectory(base), await CausalLM.fromDirectory(base)];
    const trainer = await withModels(models, "given");
    expect(models.map((m) => addon().computeLane(m.native))).toEqual(["cpu#0", "cpu#1"]);
    await trainer.close();
    expect(models.map((m) => addon().computeLane(m.native))).toEqual(["cpu", "cpu"]);
    models.forEach((m) => m.dispose());
  });

  it("keeps one model given for two agents on one lane, the agents in turn", async () => {
    process.env[CPU_LANES_ENV] = "2";
    const model = await CausalLM.fromDirectory(base);
    const trainer = await withModels([model, model], "shared");
    expect(addon().computeLane(model.native)).toBe("cpu");
    expect((trainer as unknown as { environment: { concurrent: boolean } }).environment.concurrent).toBe(false);
    await trainer.close();
    model.dispose();
  });
});
