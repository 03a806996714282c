// The clipped-ratio objectives in MAGRPO on tiny models made here (docs/objectives.md): every loss type trains (finite
// losses, parameters move, its metrics logged), sampler and trainer agree on the same tokens, the options act (KL in
// the loss, entropy, scaling, groupings, truncation mask, zero-variance filter), bad combinations fail by name, and
// the shared reward of the demo rises under DAPO, GSPO and CISPO.
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { readJsonlMetrics, type JsonlRecord } from "../../src/logging/jsonl.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { createDemoBaseModel, demoTrainerOptions } from "../../src/demo/recipes.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import type { RewardFunction } from "../../src/rollout/types.js";
import { SOLO_CEILING } from "../../src/tasks/cover-vowels.js";
import { PerCompletionMAGRPOTrainer } from "../../src/bench/per-completion.js";
import { MARLOOTrainer } from "../../src/trainers/reinforce/baselines.js";
import { CentralizedMAGRPOTrainer } from "../../src/trainers/reinforce/centralized.js";
import { MAGRPOTrainer, type MAGRPOTrainerOptions } from "../../src/trainers/reinforce/magrpo.js";
import { tinyRuns } from "../support/runs.js";
import { expectRise } from "../support/learning.js";

const runs = tinyRuns("comlrl-objectives-", (dir) => createTinyModel(dir, { seed: 11, hiddenSize: 32, numLayers: 1 }));
const { scratch, base } = runs;
// The demo's base model (the one tests/e2e/magrpo.test.ts learns the cooperative task with under CoMLRL's loss).
const vowelsBase = path.join(scratch, "vowels");
let vowelsTokenizer: ComlrlTokenizer;

beforeAll(async () => {
  vowelsTokenizer = await createDemoBaseModel(vowelsBase, 7);
});

const lengthReward: RewardFunction = (completions) => completions[0].map((a, j) => Math.min(a.length, completions[1][j].length) / 10 + (a.charCodeAt(0) % 3));

function options(config: Record<string, unknown>, overrides: Partial<MAGRPOTrainerOptions> = {}): MAGRPOTrainerOptions {
  return {
    ...runs.twoAgents({ rewardFunc: lengthReward, trainDataset: [{ prompt: "Once upon a time" }, { prompt: "The red fox" }] }),
    ...overrides,
    config: { numTurns: 1, numTrainEpochs: 1, numGenerations: 3, maxNewTokens: 5, temperature: 1, topP: 1, topK: 0, evalInterval: 0, agentLearningRate: 1e-3, loggingSteps: 1, seed: 3, ...config },
  };
}

async function run(config: Record<string, unknown>, overrides: Partial<MAGRPOTrainerOptions> = {}) {
  const trainer = await MAGRPOTrainer.create(options(config, overrides));
  const before = trainer.agents.map((a) => Array.from(a.model.native.getParameter("model.layers.0.mlp.up_proj.weight")));
  await trainer.train();
  const after = trainer.agents.map((a) => Array.from(a.model.native.getParameter("model.layers.0.mlp.up_proj.weight")));
  await trainer.close();
  const updates = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl")).filter((r) => r.kind === "update");
  return { updates, moved: before.map((w, i) => w.some((x, j) => x !== after[i][j])), steps: trainer.learner.policySteps };
}

const values = (records: JsonlRecord[], key: string) => records.map((r) => r[key]).filter((v): v is number => typeof v === "number");

describe("clipped-ratio objectives in MAGRPO", () => {
  for (const [lossType, level] of [["grpo", "token"], ["grpo", "sequence"], ["dapo", "token"], ["dr_grpo", "token"], ["bnpo", "token"], ["cispo", "token"], ["sapo", "token"]] as const) {
    it(`${lossType} (${level} ratios, 2 iterations) trains: finite losses, moved weights, clip and mismatch metrics`, async () => {
      const { updates, moved } = await run({ lossType, importanceSamplingLevel: level, numIterations: 2, epsilonHigh: lossType === "cispo" ? 5 : 0.28 });
      const losses = values(updates, "agent_0/loss");
      expect(losses.length).toBeGreaterThan(0);
      expect(losses.every(Number.isFinite)).toBe(true);
      expect(moved).toEqual([true, true]);
      expect(values(updates, "agent_1/objective/clip_ratio/high_mean").length).toBeGreaterThan(0);
      // The first pass scores with the sampler's parameters: sampler and trainer agree within fp32 noise.
      const mismatch = values(updates, "agent_0/mismatch/mean_abs_logp_diff");
      expect(mismatch.length).toBeGreaterThan(0);
      for (const m of mismatch) expect(m).toBeLessThanOrEqual(1e-5);
      for (const r of values(updates, "agent_0/mismatch/mean_sequence_ratio")) expect(Math.abs(r - 1)).toBeLessThan(1e-4);
      // The second pass after a step: the policy has moved since sampling.
      expect(Math.max(...values(updates, "agent_0/drift/max_abs_logp_diff"))).toBeGreaterThan(1e-6);
    }, 120_000);
  }

  it("takes the reference KL into the loss (k1, k2, k3) and an entropy bonus, and logs them", async () => {
    for (const klEstimator of ["k1", "k2", "k3"]) {
      const { updates, moved } = await run({ lossType: "grpo", numIterations: 2, referenceKlEnabled: true, referenceKlCoef: 0.05, klIn: "loss", klEstimator, entropyCoef: 0.01 });
      expect(moved).toEqual([true, true]);
      expect(values(updates, "agent_0/objective/kl").every(Number.isFinite)).toBe(true);
      expect(values(updates, "agent_0/objective/kl").length).toBeGreaterThan(0);
      expect(values(updates, "agent_0/objective/entropy").every((e) => e > 0)).toBe(true);
    }
  }, 180_000);

  it("per-agent objectives: each agent its own loss, groupings and scalings", async () => {
    const { updates, moved } = await run({
      lossType: ["dapo", "comlrl"], scaleRewards: ["batch", "none"], advantageGrouping: ["agent", "agent_turn"], maskTruncatedCompletions: [true, false],
    });
    expect(moved).toEqual([true, true]);
    expect(values(updates, "agent_0/objective/policy_loss").length).toBeGreaterThan(0);
    expect(values(updates, "agent_1/objective/policy_loss")).toEqual([]); // CoMLRL's loss has no clip metrics
  }, 120_000);

  it("the zero-variance filter skips groups whose returns do not vary: no scoring, no optimizer step, the fraction logged", async () => {
    const constant: RewardFunction = (completions) => completions[0].map(() => 1);
    const { updates, moved, steps } = await run({ lossType: "dapo", zeroVarianceFilter: 0 }, { rewardFunc: constant });
    // Not a zero-gradient step either: AdamW's weight decay would move the weights.
    expect(steps).toEqual([0, 0]);
    expect(moved).toEqual([false, false]);
    expect(values(updates, "agent_0/loss")).toEqual([]);
    expect(values(updates, "agent_0/objective/zero_variance_filtered").every((f) => f === 1)).toBe(true);
    expect(values(updates, "agent_0/objective/zero_variance_filtered").length).toBeGreaterThan(0);
    // The same run without the filter steps.
    expect((await run({ lossType: "dapo" }, { rewardFunc: constant })).steps).toEqual([1, 1]);
  }, 120_000);

  it("the zero-variance filter on a mixed update: half the groups skipped, half the steps taken, 0.5 logged", async () => {
    // One prompt's returns never vary; the other's do (the length reward).
    const mixed: RewardFunction = (completions, context) => (context.item.prompt === "The red fox" ? completions[0].map(() => 1) : lengthReward(completions, context));
    const config = { lossType: "dapo", rolloutBufferSize: 2, trainBatchSize: 1 };
    const filtered = await run({ ...config, zeroVarianceFilter: 0 }, { rewardFunc: mixed });
    expect(values(filtered.updates, "agent_0/objective/zero_variance_filtered")).toEqual([0.5]);
    expect(values(filtered.updates, "agent_1/objective/zero_variance_filtered")).toEqual([0.5]);
    expect(filtered.steps).toEqual([1, 1]);
    expect((await run(config, { rewardFunc: mixed })).steps).toEqual([2, 2]);
  }, 120_000);

  it("masking truncated completions: when every completion hits maxNewTokens nothing is trained", async () => {
    const { moved } = await run({ lossType: "grpo", maskTruncatedCompletions: true, maxNewTokens: 1, weightDecay: 0 }, { rewardFunc: lengthReward });
    expect(moved).toEqual([false, false]);
  }, 120_000);

  it("the rest of the family takes an objective: centralized MAGRPO (dapo, 2 iterations) and MARLOO (cispo)", async () => {
    // The roles' parts of a joint completion may be empty.
    const roleLengths: RewardFunction = (completions) => completions[0].map((a, j) => (a.length - completions[1][j].length) / 10);
    const central = await CentralizedMAGRPOTrainer.create({ ...options({ numAgents: 2, lossType: "dapo", epsilonHigh: 0.28, numIterations: 2, maxNewTokens: 8 }, { rewardFunc: roleLengths }), agents: undefined, agentModel: base });
    await central.train();
    await central.close();
    const centralUpdates = readJsonlMetrics(path.join(central.outputDir, "metrics.jsonl")).filter((r) => r.kind === "update");
    expect(values(centralUpdates, "agent_0/objective/clip_ratio/high_mean").length).toBeGreaterThan(0);
    for (const m of values(centralUpdates, "agent_0/mismatch/mean_abs_logp_diff")) expect(m).toBeLessThanOrEqual(1e-5);
    expect(values(centralUpdates, "agent_0/drift/mean_abs_logp_diff").length).toBeGreaterThan(0);
    const marloo = await MARLOOTrainer.create(options({ lossType: "cispo", epsilonHigh: 5, numIterations: 2 }));
    await marloo.train();
    await marloo.close();
    const marlooUpdates = readJsonlMetrics(path.join(marloo.outputDir, "metrics.jsonl")).filter((r) => r.kind === "update");
    expect(values(marlooUpdates, "agent_1/objective/clip_ratio/high_mean").length).toBeGreaterThan(0);
    expect(marloo.learner.policySteps).toEqual([2, 2]);
  }, 120_000);

  it("the bench's per-completion baseline refuses a clipped objective (it scores CoMLRL's loss only)", async () => {
    await expect(PerCompletionMAGRPOTrainer.create(options({ lossType: "grpo" }))).rejects.toThrow(/per-completion baseline scores CoMLRL's loss only/);
  });
});

describe("sampler/trainer agreement", () => {
  it("the log-probs recorded at generation are the trainer's on the same tokens (fp32, CPU): mean |Δ| ≤ 1e-5", async () => {
    const model = await CausalLM.fromDirectory(base);
    const prompts = ["Once upon a time", "The red fox", "A"].map((p) => runs.tokenizer.encode(p));
    const generation = await model.generate(prompts, { maxNewTokens: 12, numReturnSequences: 4, doSample: true, temperature: 0.7, topP: 0.9, topK: 20, returnLogprobs: true });
    const rowPrompts = generation.completions.map((_, r) => prompts[Math.floor(r / 4)]);
    const scores = await model.score(rowPrompts, generation.completions, { tokenLogprobs: true });
    const sampled = generation.logprobs!.flatMap((row) => Array.from(row));
    const diffs = sampled.map((lp, i) => Math.abs(lp - scores.tokenLogprobs![i]));
    const meanDiff = diffs.reduce((a, b) => a + b, 0) / diffs.length;
    console.log(`sampler vs trainer: mean |Δ log p| ${meanDiff.toExponential(2)}, max ${Math.max(...diffs).toExponential(2)} over ${diffs.length} tokens`);
    expect(meanDiff).toBeLessThanOrEqual(1e-5);
    // The processed distribution (temperature 0.7, top-k, top-p) is another one: its log-probs differ, and are ≤ 0.
    const processed = generation.processedLogprobs!.flatMap((row) => Array.from(row));
    expect(processed.every((lp) => lp <= 0)).toBe(true);
    expect(processed.some((lp, i) => Math.abs(lp - sampled[i]) > 1e-3)).toBe(true);
    model.dispose();
  });
});

// The demo's recipe (src/demo/recipes.ts: its base model, task and sampling) under each objective as the objectives
// study trains it (scripts/study/objectives.ts, docs/objectives-study.md), for a few epochs.
describe("the shared reward rises under the clipped objectives", () => {
  const learns = async (config: Record<string, unknown>, epochs: number) => {
    const recipe = demoTrainerOptions(vowelsBase, vowelsTokenizer, { outputDir: runs.dir("learn"), epochs, seed: 1, quiet: true });
    const trainer = await MAGRPOTrainer.create({ ...recipe, sampleLogInterval: 0, config: { ...recipe.config, ...config } });
    await trainer.train();
    await trainer.close();
    const rewards = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl"))
      .filter((r) => r.kind === "train" && typeof r["turn_1/reward_mean"] === "number")
      .map((r) => r["turn_1/reward_mean"] as number);
    // Two epochs of 16 items, one update per item: the first two epochs against the last two.
    const window = 32;
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    return { first: mean(rewards.slice(0, window)), last: mean(rewards.slice(-window)) };
  };

  for (const [name, config, epochs] of [
    ["dapo", { lossType: "dapo", scaleRewards: "group", epsilonHigh: 0.28, zeroVarianceFilter: 0, numIterations: 2 }, 10],
    ["gspo (sequence ratios)", { lossType: "grpo", importanceSamplingLevel: "sequence", scaleRewards: "group", epsilon: 3e-4, epsilonHigh: 4e-4, numIterations: 2 }, 20],
    ["cispo", { lossType: "cispo", scaleRewards: "group", epsilonHigh: 5, numIterations: 2 }, 14],
  ] as const) {
    it(`${name}: the demo's reward rises past what one writer can earn alone`, async () => {
      const { first, last } = await learns(config, epochs);
      expectRise(`${name} (demo task, ${epochs} epochs)`, first, last, 0.25);
      expect(last).toBeGreaterThan(SOLO_CEILING);
    }, 120_000);
  }
});
