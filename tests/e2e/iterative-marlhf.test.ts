// MARLHFIter end to end on tiny models: every iteration collects against the comparator (a replay shard each),
// trains a fresh reward model on the iteration's pairs — two iterations, two reward models, the second starting from
// the same initial weights as the first, not from the first's trained ones — and runs RL against it; evaluation
// uses the task reward. With preferenceScoringReward "reward_model" the second iteration's pairs carry the first
// reward model's scores, checked against that model read back from the checkpoint taken at the end of iteration 1.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import type { RewardFunction } from "../../src/rollout/types.js";
import { coverVowelsReward, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MARLHFIterTrainer, type MARLHFIterTrainerOptions } from "../../src/trainers/preference/iterative/marlhf-iter.js";
import { JointRewardModel, jointText } from "../../src/trainers/preference/reward-model.js";
import { makeBase } from "../support/checkpoint-run.js";
import { QUICK_PREFERENCE_RUN, tinyRuns } from "../support/runs.js";

const runs = tinyRuns("comlrl-marlhf-iter-", makeBase);

/** The task reward, recording the size of every call. */
const counted = (calls: number[]): RewardFunction => (completions, context) => {
  calls.push(completions[0].length);
  return coverVowelsRewardFunc(completions, context);
};

const options = (overrides: Partial<MARLHFIterTrainerOptions> = {}): MARLHFIterTrainerOptions => ({
  ...runs.twoAgents(runs.coverVowels(3, 2)),
  ...overrides,
  config: {
    ...QUICK_PREFERENCE_RUN,
    numIterations: 2,
    numTrainEpochs: 1,
    rewardNumTrainEpochs: 2,
    rewardTrainBatchSize: 2,
    rewardLearningRate: 1e-2,
    rewardHeldOutFraction: 0,
    preferenceNumCandidates: 4,
    preferencePairsPerSample: 2,
    numGenerations: 2,
    rolloutBufferSize: 2,
    evalInterval: 0,
    evalNumSamples: 2,
    ...(overrides.config ?? {}),
  },
});

const headWeights = (rm: JointRewardModel) => rm.head.native.parameterNames().flatMap(({ name }) => Array.from(rm.head.native.getParameter(name)));

describe("MARLHFIter", () => {
  it("2 iterations ⇒ 2 reward models trained, the second fresh; a replay shard per iteration; RL against the reward model, eval on the task reward", async () => {
    const taskCalls: number[] = [];
    const trainer = await MARLHFIterTrainer.create(options({ rewardFunc: counted(taskCalls) }));
    const names = trainer.components.all.map((c) => c.name);
    expect(names).toEqual(["agent_0", "agent_1", "reward_model", "reward_model/head"]);
    // Every reward-model step: which model took it, and its head before and after.
    const steps: Array<{ rm: JointRewardModel; before: number[]; after: number[] }> = [];
    const step = trainer.rewardModelStep.bind(trainer);
    trainer.rewardModelStep = async (batch) => {
      const before = headWeights(trainer.rewardModel);
      const metrics = await step(batch);
      steps.push({ rm: trainer.rewardModel, before, after: headWeights(trainer.rewardModel) });
      return metrics;
    };
    // Every reward model's scores of every RL rollout, item by item, as the RL phase's reward receives them.
    const rlScores: number[][] = [];
    const scoreJoint = JointRewardModel.prototype.scoreJoint;
    const spy = vi.spyOn(JointRewardModel.prototype, "scoreJoint").mockImplementation(async function (this: JointRewardModel, ...call) {
      const scores = await scoreJoint.apply(this, call);
      rlScores.push(Array.from(scores));
      return scores;
    });
    await trainer.train();
    spy.mockRestore();

    const models = [...new Set(steps.map((s) => s.rm))];
    expect(models).toHaveLength(2);
    const [first, second] = models.map((rm) => steps.filter((s) => s.rm === rm));
    // Fresh: the second model starts where the first started, not where the first ended.
    expect(second[0].before).toEqual(first[0].before);
    expect(first.at(-1)!.after).not.toEqual(first[0].before);
    expect(trainer.rewardModel).toBe(models[1]);
    expect(trainer.rewardModel.isFrozen).toBe(true);
    expect(() => models[0].model.info()).toThrow(/disposed/);
    expect(trainer.components.all.map((c) => c.name)).toEqual(names);
    expect(trainer.components.get("reward_model").module.key).toBe(models[1].model);

    const out = trainer.outputDir;
    expect(readdirSync(path.join(out, "preference_replay")).sort()).toEqual(["iteration_0001.json", "iteration_0002.json"]);
    const metrics = readJsonlMetrics(path.join(out, "metrics.jsonl"));
    const training = metrics.filter((m) => m["iter/train_preference_pairs"] !== undefined).map((m) => m["iter/train_preference_pairs"] as number);
    expect(training).toHaveLength(2);
    // rewardNumTrainEpochs 2 over ⌈pairs / 2⌉ batches, per iteration.
    expect(first).toHaveLength(2 * Math.ceil(training[0] / 2));
    expect(second).toHaveLength(2 * Math.ceil(training[1] / 2));
    expect(metrics.filter((m) => m.kind === "update" && typeof m["reward_model/loss"] === "number")).toHaveLength(first.length + second.length);
    // The task reward labels the pairs only (current and comparator, 4 candidates each, per item and iteration) …
    expect(taskCalls).toEqual(Array(2 * 3 * 2).fill(4));
    // … RL sees reward-model scores: per iteration, its 3 items in buffers of 2 and 1, each logged reward the mean of
    // their items' score means …
    const rlRewards = metrics.filter((m) => m.kind === "train" && typeof m["turn_1/reward_mean"] === "number").map((m) => m["turn_1/reward_mean"] as number);
    expect(rlScores).toHaveLength(2 * 3);
    const itemMeans = rlScores.map((scores) => scores.reduce((a, b) => a + b, 0) / scores.length);
    const buffers = [[0, 1], [2], [3, 4], [5]].map((items) => items.reduce((sum, i) => sum + itemMeans[i], 0) / items.length);
    expect(rlRewards).toEqual(buffers.map((mean) => expect.closeTo(mean, 6)));
    // … and evaluation is scored by the task.
    await trainer.evaluate();
    expect(taskCalls.length).toBeGreaterThan(12);
    // env steps: per iteration 3 items × 4 current candidates, then 3 items × 2 joint actions.
    expect(trainer.progress.envStep).toBe(2 * (12 + 6));
    await trainer.close();
  }, 180_000);

  it("an iteration without training pairs trains neither a reward model nor RL (as CoMLRL 1.4.3 skips it); the next one trains both, and each writes its policy checkpoint", async () => {
    let calls = 0;
    // Iteration 1 (3 items × current and comparator): every candidate scores alike, so every comparison ties.
    const tiedFirst: RewardFunction = (completions, context) => (calls++ < 6 ? completions[0].map(() => 0.5) : coverVowelsRewardFunc(completions, context));
    const policies = runs.dir("policies");
    const trainer = await MARLHFIterTrainer.create(options({ rewardFunc: tiedFirst, config: { policyCheckpointDir: policies } }));
    const models = new Set<JointRewardModel>();
    const step = trainer.rewardModelStep.bind(trainer);
    trainer.rewardModelStep = (batch) => (models.add(trainer.rewardModel), step(batch));
    await trainer.train();

    const metrics = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl"));
    const training = metrics.filter((m) => m["iter/train_preference_pairs"] !== undefined).map((m) => m["iter/train_preference_pairs"] as number);
    expect(training[0]).toBe(0);
    expect(training[1]).toBeGreaterThan(0);
    // Only iteration 2 trains: one reward model (the first, never replaced), rewardNumTrainEpochs 2 over its pairs …
    expect(models.size).toBe(1);
    expect(metrics.filter((m) => m.kind === "update" && typeof m["reward_model/loss"] === "number")).toHaveLength(2 * Math.ceil(training[1] / 2));
    // … and one RL epoch: env steps are 3 items × 4 candidates per collection, plus 3 items × 2 joint actions once.
    expect(trainer.progress.envStep).toBe(2 * 12 + 6);
    const rlSteps = metrics.filter((m) => m.kind === "train" && typeof m["turn_1/reward_mean"] === "number").map((m) => m.step as number);
    expect(rlSteps.length).toBeGreaterThan(0);
    expect(Math.min(...rlSteps)).toBeGreaterThan(24);
    expect(readdirSync(policies).sort()).toEqual(["initial", "iteration_0000", "iteration_0001"]);
    await trainer.close();
  }, 120_000);

  it("MAAC RL phase: a fresh reward model per iteration, the hosted centralized critic trained", async () => {
    const trainer = await MARLHFIterTrainer.create(options({ config: { rlAlgorithm: "maac", rewardNumTrainEpochs: 1, criticLearningRate: 1e-3 } }));
    expect(trainer.components.all.map((c) => c.name)).toEqual(["agent_0", "agent_1", "reward_model", "reward_model/head", "critic", "critic/value_head"]);
    const models = new Set<JointRewardModel>();
    const step = trainer.rewardModelStep.bind(trainer);
    trainer.rewardModelStep = (batch) => (models.add(trainer.rewardModel), step(batch));
    await trainer.train();
    expect(models.size).toBe(2);
    const metrics = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl"));
    expect(metrics.filter((m) => m.kind === "update" && typeof m["critic/loss"] === "number").length).toBeGreaterThan(0);
    expect(readdirSync(path.join(trainer.outputDir, "preference_replay"))).toHaveLength(2);
    await trainer.close();
  }, 120_000);

  it('preferenceScoringReward "reward_model": iteration 1 pairs by the task reward, iteration 2 by the first reward model; resume after the swap is exact', async () => {
    const taskCalls: number[] = [];
    const checkpointDir = runs.dir("checkpoints");
    const scoring = (outputDir: string, rewardFunc: RewardFunction) => options({ outputDir, rewardFunc, config: { preferenceScoringReward: "learned", rewardNumTrainEpochs: 1 } });
    const trainer = await MARLHFIterTrainer.create(scoring(runs.dir("run"), counted(taskCalls)));
    await trainer.train({ checkpointDir });
    // Only iteration 1 asks the task: 3 items × (current + comparator).
    expect(taskCalls).toEqual(Array(3 * 2).fill(4));
    const shard = (k: number) => JSON.parse(readFileSync(path.join(trainer.outputDir, "preference_replay", `iteration_000${k}.json`), "utf8"));
    for (const p of shard(1).pairs) expect(p.raw_rewards[0]).toBe(coverVowelsReward(p.winner_completions[0], p.winner_completions[1]));
    // Iteration 1 is collect, reward_model and rl, one epoch each: checkpoint-3 holds its reward model.
    const saved = path.join(checkpointDir, "checkpoint-3", "reward_model");
    expect(existsSync(path.join(saved, "head", "value_head.pt"))).toBe(true);
    const rm = await JointRewardModel.load(saved, { maxLength: trainer.config.rewardMaxLength });
    rm.head.loadStateDict(path.join(saved, "head", "value_head.pt"));
    const pairs = shard(2).pairs;
    expect(pairs.length).toBeGreaterThan(0);
    const winners = await rm.score(pairs.map((p: { prompts: string[]; winner_completions: string[] }) => jointText(p.prompts, p.winner_completions)));
    const losers = await rm.score(pairs.map((p: { prompts: string[]; loser_completions: string[] }) => jointText(p.prompts, p.loser_completions)));
    pairs.forEach((p: { raw_rewards: [number, number] }, i: number) => {
      expect(p.raw_rewards[0]).toBeCloseTo(winners[i], 4);
      expect(p.raw_rewards[1]).toBeCloseTo(losers[i], 4);
    });
    rm.dispose();

    // checkpoint-5: iteration 2's reward model trained, its RL to come. Resuming restores that (swapped-in) model.
    const weights = (t: MARLHFIterTrainer) => [...t.agents.map((a) => a.model), t.rewardModel.model, t.rewardModel.head].flatMap((m) => m.native.parameterNames().map(({ name }) => Array.from(m.native.getParameter(name))));
    const uninterrupted = weights(trainer);
    await trainer.close();
    const resumed = await MARLHFIterTrainer.create(scoring(trainer.outputDir, coverVowelsRewardFunc));
    await resumed.train({ checkpointDir: runs.dir("resumed"), resumeFromCheckpoint: path.join(checkpointDir, "checkpoint-5") });
    expect(weights(resumed)).toEqual(uninterrupted);
    await resumed.close();
  }, 180_000);
});
