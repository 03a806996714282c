// CPU agent lanes through the trainers (src/trainers/lanes.ts): with COMLRL_CPU_LANES=2 every trainer kind runs its
// two agents concurrently, each on a lane of its own — the native count of agent-lane jobs running at once reaches
// two — and trains to the same weights and logs the same updates, in the same order, as with the agents taking
// turns on the one CPU lane (both on one intra-op thread, as tests run).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { agentLaneJobs } from "../../src/runtime.js";
import { CPU_LANES_ENV } from "../../src/trainers/lanes.js";
import { MARLHFTrainer } from "../../src/trainers/preference/marlhf.js";
import { MADPOTrainer } from "../../src/trainers/preference/madpo.js";
import { RolloutTrainer } from "../../src/trainers/rollout-trainer.js";
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
  const critics = trainer instanceof MARLHFTrainer ? (trainer.actorCritic?.critics ?? []) : "critics" in trainer ? (trainer.critics as { model: CausalLM }[]) : [];
  const rewardModel = trainer instanceof MARLHFTrainer ? [trainer.rewardModel] : [];
  const agents = trainer instanceof RolloutTrainer || trainer instanceof MADPOTrainer || trainer instanceof MARLHFTrainer ? trainer.agents : [];
  return [...agents, ...critics, ...rewardModel].map((m) => m.model.computeLane());
};
/** Whether the agents run concurrently: the rollout trainers' learner's environment, the preference trainers' actors'. */
const concurrentOf = (trainer: ResumableTrainer) => (trainer instanceof RolloutTrainer ? trainer.learner.environment.concurrent : trainer instanceof MADPOTrainer || trainer instanceof MARLHFTrainer ? trainer.concurrent : false);
const records = (dir: string) => readJsonlMetrics(path.join(dir, "metrics.jsonl")).map(({ time: _t, ...rest }) => rest);

async function run(kind: string, lanes: string | undefined) {
  if (lanes === undefined) delete process.env[CPU_LANES_ENV];
  else process.env[CPU_LANES_ENV] = lanes;
  const outputDir = path.join(scratch, `${kind}-${lanes ?? "default"}`.replace(/[^\w-]/g, "_"));
  const trainer = await makeTrainer(base, tokenizer, outputDir, 1, {}, kind);
  const placed = lanesOf(trainer);
  const concurrent = concurrentOf(trainer);
  agentLaneJobs(); // counts from here
  await trainer.train();
  const { peak: laneJobsAtOnce } = agentLaneJobs();
  const weights = trainer.weights().map((w) => Array.from(w));
  await trainer.close();
  // Timings, memory peaks and the progress bar's seconds differ from run to run; everything else must not.
  return { placed, concurrent, laneJobsAtOnce, weights, records: records(outputDir).filter((r) => r.kind !== "timing" && r.kind !== "memory") };
}

// Where each kind's actors (then critics, MARLHF's reward model) run: a critic per agent on its agent's lane; what the
// agents share (MAAC's critic, the reward model) on the CPU's own lane with all the intra-op threads. MAAC, alone
// or as MARLHF's RL phase, and MAPPO with its centralized critic keep their agents in turn: their updates step the
// one critic in each, so they take turns anyway.
const PLACED: Record<string, string[]> = {
  MAGRPO: ["cpu#0", "cpu#1"],
  IAC: ["cpu#0", "cpu#1", "cpu#0", "cpu#1"],
  "IAC (shared heads)": ["cpu#0", "cpu#1"],
  MAAC: ["cpu", "cpu", "cpu"],
  MAPPO: ["cpu", "cpu", "cpu"],
  "MAPPO (per-agent critics)": ["cpu#0", "cpu#1", "cpu#0", "cpu#1"],
  MADPO: ["cpu#0", "cpu#1"],
  MARLHF: ["cpu#0", "cpu#1", "cpu"],
  "MARLHF (MAAC)": ["cpu", "cpu", "cpu", "cpu"],
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
      // Agents issued in turn (one lane busy at a time) would train alike too: both lanes must have had work at once.
      expect(inTurn.laneJobsAtOnce).toBe(0);
      expect(laned.laneJobsAtOnce).toBe(placed[0] !== "cpu" ? 2 : 0);
      expect(laned.records.filter((r) => r.kind === "update").length).toBeGreaterThan(0);
      expect(laned.records).toEqual(inTurn.records);
      expect(laned.weights).toEqual(inTurn.weights);
    });
  }

  it("hands models the caller passed in back on their device's lane at close()", async () => {
    process.env[CPU_LANES_ENV] = "2";
    const models = [await CausalLM.fromDirectory(base), await CausalLM.fromDirectory(base)];
    const trainer = await withModels(models, "given");
    expect(models.map((m) => m.computeLane())).toEqual(["cpu#0", "cpu#1"]);
    await trainer.close();
    expect(models.map((m) => m.computeLane())).toEqual(["cpu", "cpu"]);
    models.forEach((m) => m.dispose());
  });

  it("keeps one model given for two agents on one lane, the agents in turn", async () => {
    process.env[CPU_LANES_ENV] = "2";
    const model = await CausalLM.fromDirectory(base);
    const trainer = await withModels([model, model], "shared");
    expect(model.computeLane()).toBe("cpu");
    expect(trainer.learner.environment.concurrent).toBe(false);
    await trainer.close();
    model.dispose();
  });
});
