// MADPOIter end to end on tiny models: per iteration a replay shard in CoMLRL's layout with index-aligned pairs that
// keep both sides' exact sampled ids, the current comparator on its own sampling stream, policy checkpoints, the
// history / current_copy / model comparators, centralized comparator generation and centralized collaboration,
// reward distributions, and learning: the current comparator raises the demo task's reward over 3 iterations.
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import type { RewardFunction } from "../../src/rollout/types.js";
import { coverVowelsDataset, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MADPOIterTrainer, type MADPOIterTrainerOptions } from "../../src/trainers/preference/iterative/madpo-iter.js";
import { readReplayDir } from "../../src/trainers/preference/iterative/replay.js";
import { makeBase } from "../support/checkpoint-run.js";
import { TRAINING_STREAM } from "../../src/trainers/agents.js";
import { QUICK_PREFERENCE_RUN, tinyRuns } from "../support/runs.js";
import { expectRise } from "../support/learning.js";

const runs = tinyRuns("comlrl-madpo-iter-", makeBase);
const { scratch, base } = runs;

const options = (overrides: Partial<MADPOIterTrainerOptions> = {}): MADPOIterTrainerOptions => ({
  ...runs.twoAgents(runs.coverVowels(3)),
  ...overrides,
  config: {
    ...QUICK_PREFERENCE_RUN,
    numIterations: 2,
    numTrainEpochs: 1,
    preferenceNumCandidates: 4,
    preferencePairsPerSample: 2,
    evalInterval: 0,
    ...(overrides.config ?? {}),
  },
});

const shards = (out: string) => readdirSync(path.join(out, "preference_replay")).filter((f) => f.endsWith(".json")).sort();

describe("MADPOIter", () => {
  it("writes a CoMLRL replay shard per iteration whose pairs mix one current and one comparator candidate with exact ids", async () => {
    const trainer = await MADPOIterTrainer.create(options({ config: { policyCheckpointDir: null } }));
    await trainer.train();
    const out = trainer.outputDir;
    expect(shards(out)).toEqual(["iteration_0001.json", "iteration_0002.json"]);
    const shard = JSON.parse(readFileSync(path.join(out, "preference_replay", "iteration_0001.json"), "utf8"));
    expect(shard.iteration).toBe(1);
    expect(shard.num_pairs).toBe(shard.pairs.length);
    expect(shard.num_pairs).toBeGreaterThan(0);
    for (const p of shard.pairs) {
      expect(p.winner_reward).toBeGreaterThan(p.loser_reward);
      // Exactly one side is the current policy's: its raw reward is one of the two, the comparator's the other.
      expect([...p.raw_rewards].sort()).toEqual([p.target_raw_reward, p.comparator_raw_reward].sort());
      p.winner_ids.forEach((ids: number[], agent: number) => expect(runs.tokenizer.decode(ids, { skipSpecialTokens: true })).toBe(p.winner_completions[agent]));
      p.loser_ids.forEach((ids: number[], agent: number) => expect(runs.tokenizer.decode(ids, { skipSpecialTokens: true })).toBe(p.loser_completions[agent]));
      expect(p.winner_from_text).toBe(false);
      expect(p.loser_from_text).toBe(false);
    }
    // Env steps count the current policy's candidates only: 2 iterations × 3 items × 4; DPO adds 2 per pair.
    const metrics = readJsonlMetrics(path.join(out, "metrics.jsonl"));
    const iter = metrics.filter((m) => m["iter/current_preference_pairs"] !== undefined);
    expect(iter.map((m) => m["iter/current_iteration"])).toEqual([1, 2]);
    expect(iter[0]["iter/current_preference_pairs"]).toBe(shard.num_pairs);
    const shardSizes = readReplayDir(path.join(out, "preference_replay"), trainer.agents.map((a) => a.tokenizer)).map((s) => s.pairs.length);
    expect(shardSizes).toEqual(iter.map((m) => m["iter/current_preference_pairs"]));
    // CoMLRL's total counts the pairs of every shard written so far.
    expect(iter.map((m) => m["iter/total_preference_pairs"])).toEqual([shardSizes[0], shardSizes[0] + shardSizes[1]]);
    await trainer.close();
  });

  it("the current comparator samples its own stream: its candidates differ from the policy's, and training's stream is untouched by it", async () => {
    const trainer = await MADPOIterTrainer.create(options({ config: { numIterations: 1 } }));
    const before = trainer.agents[0].model.generatorState(TRAINING_STREAM);
    const own = await trainer.agents[0].sample(["hello"], 4);
    trainer.agents[0].model.setGeneratorState(before, TRAINING_STREAM);
    await trainer.agents[0].sample(["hello"], 4, "comparator");
    const again = await trainer.agents[0].sample(["hello"], 4);
    expect(again.texts).toEqual(own.texts);
    await trainer.close();
  });

  it("history: policy checkpoints initial and iteration_KKKK with every agent; iteration k compares with iteration k−1's", async () => {
    const trainer = await MADPOIterTrainer.create(options({ config: { comparatorPolicy: "previous", numIterations: 3 }, quiet: false }));
    const logged: string[] = [];
    const original = console.error;
    console.error = (line: string) => logged.push(line);
    try {
      await trainer.train();
    } finally {
      console.error = original;
    }
    const dir = path.join(trainer.outputDir, "policy_checkpoints");
    expect(readdirSync(dir).sort()).toEqual(["initial", "iteration_0000", "iteration_0001", "iteration_0002"]);
    expect(readdirSync(path.join(dir, "iteration_0001")).sort()).toEqual(["agent_0", "agent_1"]);
    expect(logged.filter((l) => l.includes("history comparator"))).toEqual([
      "[MADPOIter] history comparator: initial",
      "[MADPOIter] history comparator: iteration_0000",
      "[MADPOIter] history comparator: iteration_0001",
    ]);
    await trainer.close();
  });

  it("current_copy and model comparators train; model candidates are text, tokenized once and marked", async () => {
    const copy = await MADPOIterTrainer.create(options({ config: { comparatorPolicy: "current_copy", numIterations: 1 } }));
    await copy.train();
    expect(shards(copy.outputDir)).toHaveLength(1);
    await copy.close();
    const model = await MADPOIterTrainer.create(options({ config: { comparatorPolicy: "model", comparatorModelName: base, numIterations: 1 } }));
    await model.train();
    const shard = JSON.parse(readFileSync(path.join(model.outputDir, "preference_replay", "iteration_0001.json"), "utf8"));
    for (const p of shard.pairs) {
      const comparatorWon = p.raw_rewards[0] === p.comparator_raw_reward && p.raw_rewards[1] === p.target_raw_reward;
      expect(comparatorWon ? p.winner_from_text : p.loser_from_text).toBe(true);
    }
    await model.close();
  });

  it("centralized comparator generation: agent 1 answers a joint prompt split back into both roles", async () => {
    const seen: string[] = [];
    const trainer = await MADPOIterTrainer.create(
      options({
        config: { comparatorGenerationMode: "single_agent", comparatorCentralizedAgentIndex: 1, numIterations: 1 },
        centralizedComparatorAdapter: {
          buildPrompt: (_item, prompts) => {
            seen.push(prompts.join("|"));
            return prompts.join("\n");
          },
          parseCompletion: (text) => [text.slice(0, 2), text.slice(2)],
        },
      }),
    );
    await trainer.train();
    expect(seen).toHaveLength(3);
    const shard = JSON.parse(readFileSync(path.join(trainer.outputDir, "preference_replay", "iteration_0001.json"), "utf8"));
    expect(shard.pairs.some((p: { winner_from_text: boolean; loser_from_text: boolean }) => p.winner_from_text || p.loser_from_text)).toBe(true);
    await trainer.close();
  });

  it("centralized collaboration: one actor, joint texts in the replay, 2 iterations ⇒ env step 2 × items × candidates + DPO, agent_0 checkpoints only", async () => {
    const policies = path.join(scratch, "central-policies");
    const rewardFunc: RewardFunction = (completions) => completions[0].map((a, j) => (a.length + 1) / (completions[1][j].length + 2));
    const trainer = await MADPOIterTrainer.create(
      options({
        agents: [base],
        rewardFunc,
        centralizedAdapter: { buildPrompt: (_item, rolePrompts) => rolePrompts.join("\n"), parseCompletion: (text) => [text.slice(0, 3), text.slice(3)] },
        config: { collaborationMode: "centralized", policyCheckpointDir: policies },
      }),
    );
    expect(trainer.agents).toHaveLength(1);
    const weights = trainer.agents[0].model.native.getParameter(trainer.agents[0].model.native.parameterNames()[0].name);
    await trainer.train();
    const shard = JSON.parse(readFileSync(path.join(trainer.outputDir, "preference_replay", "iteration_0001.json"), "utf8"));
    expect(shard.pairs[0].prompts).toHaveLength(1);
    expect(readdirSync(path.join(policies, "iteration_0001"))).toEqual(["agent_0"]);
    expect(trainer.agents[0].model.native.getParameter(trainer.agents[0].model.native.parameterNames()[0].name)).not.toEqual(weights);
    await trainer.close();
  });

  it("reward distributions: 16 bins over the declared range, raw rewards, an SVG beside; a missing range is an error", async () => {
    await expect(MADPOIterTrainer.create(options({ config: { logRewardDistribution: true } }))).rejects.toThrow(/rewardRange/);
    const scaled = Object.assign<RewardFunction, { rewardRange: [number, number] }>((c, ctx) => coverVowelsRewardFunc(c, ctx), { rewardRange: [0, 1] });
    const trainer = await MADPOIterTrainer.create(options({ rewardFunc: scaled, rewardProcessor: (r) => 10 * r, config: { logRewardDistribution: true, numIterations: 1 } }));
    await trainer.train();
    const dir = path.join(trainer.outputDir, "reward_distributions");
    expect(readdirSync(dir).sort()).toEqual(["iteration_0001.json", "iteration_0001.svg"]);
    const d = JSON.parse(readFileSync(path.join(dir, "iteration_0001.json"), "utf8"));
    expect(d.bin_edges).toHaveLength(17);
    expect(d.candidate.target.sample_count).toBe(12);
    expect(d.candidate.target.counts.reduce((a: number, b: number) => a + b, 0)).toBe(12);
    expect(d.candidate.target.raw_rewards.every((r: number) => r >= 0 && r <= 1)).toBe(true);
    expect(d).not.toHaveProperty("density");
    // Pairs carry processed rewards: ten times the raw.
    const shard = JSON.parse(readFileSync(path.join(trainer.outputDir, "preference_replay", "iteration_0001.json"), "utf8"));
    for (const p of shard.pairs) expect(p.winner_reward).toBeCloseTo(10 * p.raw_rewards[0], 5);
    expect(readFileSync(path.join(dir, "iteration_0001.svg"), "utf8")).toMatch(/reward[\s\S]*count/);
    await trainer.close();
  });

  it("with the current comparator, raises the demo task's reward over 3 iterations", async () => {
    const trainer = await MADPOIterTrainer.create(
      options({
        trainDataset: coverVowelsDataset(8),
        evalDataset: coverVowelsDataset(64),
        config: { numIterations: 3, numTrainEpochs: 3, preferenceNumCandidates: 8, preferencePairsPerSample: 8, trainBatchSize: 8, agentLearningRate: 5e-3, dpoBeta: 0.5, evalNumSamples: 64 },
      }),
    );
    const before = (await trainer.evaluate())["eval/turn_1/reward_mean"];
    await trainer.train();
    const after = (await trainer.evaluate())["eval/turn_1/reward_mean"];
    expectRise("MADPOIter, current comparator (demo task)", before, after, 0.04);
    expect(existsSync(path.join(trainer.outputDir, "preference_replay", "iteration_0003.json"))).toBe(true);
    await trainer.close();
  }, 180_000);
});
