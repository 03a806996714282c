// MARLHF end to end on tiny models: the joint reward model on its own (Bradley–Terry loss by hand, learning a
// preference it can generalise, truncation keeping the last tokens, save and load), and the trainer's three stages:
// pairs, reward model (held-out accuracy reported, then frozen), RL against its scores with task-reward evaluation.
import { existsSync } from "node:fs";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { readJsonlMetrics, type JsonlRecord } from "../../src/logging/jsonl.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { Optimizer } from "../../src/models/optimizer.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { createDemoBaseModel } from "../../src/demo/recipes.js";
import { marlhfDemoOptions, trainMeasuringTaskReward } from "../../src/demo/preference.js";
import { coverVowelsDataset, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MARLHFTrainer, type MARLHFTrainerOptions } from "../../src/trainers/preference/marlhf.js";
import { JointRewardModel, jointText } from "../../src/trainers/preference/reward-model.js";
import type { IACLearner } from "../../src/trainers/actor-critic/iac.js";
import type { MAACLearner } from "../../src/trainers/actor-critic/maac.js";
import { makeBase } from "../support/checkpoint-run.js";
import { QUICK_PREFERENCE_RUN, tinyRuns } from "../support/runs.js";

const runs = tinyRuns("comlrl-marlhf-", makeBase);
const { scratch, base } = runs;

const TOPICS = ["rain", "stone", "river", "lamp", "bread", "field", "cloud", "door", "salt", "wind", "glass", "tree"];
/** Pairs whose winner answers with vowels and loser with consonants, under varied prompts. */
const vowelPairs = (topics: string[]) => ({
  winners: topics.map((t, i) => jointText([`Write about ${t}.`, `Reply to ${t}.`], ["aeiou".slice(i % 3), "oia"])),
  losers: topics.map((t, i) => jointText([`Write about ${t}.`, `Reply to ${t}.`], ["xkrt".slice(i % 3), "zvb"])),
});

describe("JointRewardModel", () => {
  it("Bradley–Terry loss by hand, learns a preference that holds on unseen prompts, saves and loads", async () => {
    const rm = await JointRewardModel.load(base, { seed: 1 });
    const optimizer = new Optimizer([{ module: rm.model }, { module: rm.head }], { lr: 3e-3 });
    const train = vowelPairs(TOPICS.slice(0, 8));
    const heldOut = vowelPairs(TOPICS.slice(8));
    const sw = await rm.score(train.winners);
    const sl = await rm.score(train.losers);
    const byHand = Array.from(sw, (s, i) => Math.log(1 + Math.exp(-(s - sl[i])))).reduce((a, b) => a + b, 0) / sw.length;
    await rm.zeroGrad();
    const first = await rm.bradleyTerryBackward(train.winners, train.losers);
    expect(first.loss).toBeCloseTo(byHand, 4);
    expect(Array.from(first.winnerScores)).toEqual(Array.from(sw).map((s) => expect.closeTo(s, 4)));
    await optimizer.step();
    let loss = first.loss;
    for (let step = 0; step < 40; step++) {
      await rm.zeroGrad();
      loss = (await rm.bradleyTerryBackward(train.winners, train.losers)).loss;
      await optimizer.step();
    }
    expect(loss).toBeLessThan(first.loss / 4);
    expect(await rm.pairwiseAccuracy(heldOut.winners, heldOut.losers)).toBeGreaterThanOrEqual(0.75);

    rm.freeze();
    await expect(rm.bradleyTerryBackward(train.winners, train.losers)).rejects.toThrow(/frozen/);
    const dir = path.join(scratch, "saved-rm");
    await rm.save(dir);
    expect(existsSync(path.join(dir, "value_head.pt")) && existsSync(path.join(dir, "config.json")) && existsSync(path.join(dir, "tokenizer.json"))).toBe(true);
    const loaded = await JointRewardModel.load(dir);
    expect(Array.from(await loaded.score(heldOut.winners))).toEqual(Array.from(await rm.score(heldOut.winners)).map((s) => expect.closeTo(s, 5)));
    optimizer.dispose();
    loaded.dispose();
    rm.dispose();
  });

  it("rewardMaxLength keeps a long text's last tokens, the one the head reads among them", async () => {
    const limited = await JointRewardModel.load(base, { seed: 1, maxLength: 12 });
    const text = jointText(["a long prompt about the weather and the sea"], ["a reply"]);
    const ids = runs.tokenizer.encode(text).slice(-12);
    const direct = await limited.head.rewardScores({ ids: Int32Array.from(ids), batch: 1, length: ids.length });
    expect((await limited.score([text]))[0]).toBeCloseTo(direct[0], 6);
    limited.dispose();
  });
});

const options = (overrides: Partial<MARLHFTrainerOptions> = {}): MARLHFTrainerOptions => ({
  ...runs.twoAgents(runs.coverVowels(8, 4)),
  ...overrides,
  config: {
    ...QUICK_PREFERENCE_RUN,
    numTrainEpochs: 1,
    rewardNumTrainEpochs: 2,
    rewardTrainBatchSize: 4,
    rewardLearningRate: 1e-3,
    rewardHeldOutFraction: 0.25,
    preferenceNumCandidates: 4,
    preferencePairsPerSample: 3,
    numGenerations: 4,
    rolloutBufferSize: 2,
    evalInterval: 4,
    evalNumSamples: 4,
    ...(overrides.config ?? {}),
  },
});

describe("MARLHF", () => {
  it("pairs, then the reward model (held-out accuracy reported, frozen after), then RL against its scores; eval uses the task reward", async () => {
    const taskCalls: number[] = [];
    const trainer = await MARLHFTrainer.create(
      options({
        rewardFunc: (c, ctx) => {
          taskCalls.push(c[0].length);
          return coverVowelsRewardFunc(c, ctx);
        },
      }),
    );
    expect(trainer.components.all.map((c) => c.name)).toEqual(["agent_0", "agent_1", "reward_model", "reward_model/head"]);
    // The reward model's scores of every RL rollout, item by item, as the RL phase's reward receives them.
    const rlScores: number[][] = [];
    const scoreJoint = trainer.rewardModel.scoreJoint.bind(trainer.rewardModel);
    trainer.rewardModel.scoreJoint = async (...call) => {
      const scores = await scoreJoint(...call);
      rlScores.push(Array.from(scores));
      return scores;
    };
    await trainer.train();
    expect(trainer.rewardModel.isFrozen).toBe(true);
    // Task reward: one call per item for collection (4 candidates) and one per eval item (1 sample); none in RL.
    expect(taskCalls.filter((n) => n === 4)).toHaveLength(8);
    const metrics = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl"));
    const held = metrics.filter((r) => typeof r["reward_model/heldout_accuracy"] === "number");
    expect(held).toHaveLength(2);
    expect(held[0]["reward_model/heldout_pairs"]).toBe(trainer.rewardHeldOutPairs.length);
    expect(trainer.rewardTrainingPairs.length + trainer.rewardHeldOutPairs.length).toBe(trainer.preferences.pairs.length);
    expect(metrics.filter((r) => r.kind === "update" && typeof r["reward_model/loss"] === "number")).toHaveLength(2 * Math.ceil(trainer.rewardTrainingPairs.length / 4));
    expect(metrics.some((r) => r.kind === "eval")).toBe(true);
    // RL rewards are the reward model's scores: each logged reward is the mean over its buffer's 2 items of their
    // scores' means.
    const rlRewards = metrics.filter((r) => typeof r["turn_1/reward_mean"] === "number" && r.kind === "train").map((r) => r["turn_1/reward_mean"] as number);
    expect(rlScores).toHaveLength(8);
    const itemMeans = rlScores.map((scores) => scores.reduce((a, b) => a + b, 0) / scores.length);
    expect(rlRewards).toEqual(Array.from({ length: 4 }, (_, j) => expect.closeTo((itemMeans[2 * j] + itemMeans[2 * j + 1]) / 2, 6)));
    // env steps: 8 items × 4 candidates, then 8 items × 4 joint actions.
    expect(trainer.progress.envStep).toBe(32 + 32);
    // Time per stage, and phases counted where they ran: the task reward in pair collection, the reward model's
    // scoring as the RL phase's reward; each stage's phases within its total.
    const stages = trainer.timings.stages;
    expect(Object.keys(stages)).toEqual(["pairs", "reward_model", "rl"]);
    for (const [stage, phases] of [["pairs", ["generation", "reward"]], ["reward_model", ["update"]], ["rl", ["generation", "reward", "update"]]] as const) {
      for (const phase of phases) expect([stage, phase, stages[stage][phase] > 0]).toEqual([stage, phase, true]);
      const { seconds, ...within } = stages[stage];
      expect(Object.values(within).reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(seconds);
    }
    expect(stages.pairs.update).toBe(0);
    expect(stages.reward_model.generation).toBe(0);
    await trainer.saveModel(path.join(trainer.outputDir, "saved"));
    expect(existsSync(path.join(trainer.outputDir, "saved", "reward_model", "value_head.pt"))).toBe(true);
    await trainer.close();
  }, 120_000);

  it("a MAGRPO RL phase takes its agents' objective and rlNumIterations updates per rollout, ratios against the rollout's log-probs", async () => {
    const rlUpdates = async (rlNumIterations: number) => {
      const trainer = await MARLHFTrainer.create(options({ config: { lossType: "dapo", epsilonHigh: 0.28, rlNumIterations, evalInterval: 0 } }));
      await trainer.train();
      await trainer.close();
      return readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl")).filter((r) => r.kind === "update");
    };
    const steps = (records: JsonlRecord[]) => records.filter((r) => typeof r["agent_0/loss"] === "number").length;
    const once = await rlUpdates(1);
    const twice = await rlUpdates(2);
    expect(steps(once)).toBeGreaterThan(0);
    expect(steps(twice)).toBe(2 * steps(once));
    // The first pass scores with the sampler's parameters; the second, after a step, sees the policy moved.
    const mismatch = twice.map((r) => r["agent_0/mismatch/mean_abs_logp_diff"]).filter((v): v is number => typeof v === "number");
    expect(mismatch.length).toBe(steps(once));
    for (const m of mismatch) expect(m).toBeLessThanOrEqual(1e-5);
    expect(Math.max(...twice.map((r) => r["agent_0/drift/max_abs_logp_diff"]).filter((v): v is number => typeof v === "number"))).toBeGreaterThan(1e-6);
    expect(once.some((r) => typeof r["agent_0/drift/max_abs_logp_diff"] === "number")).toBe(false);
  }, 120_000);

  // MARLHF learning on the demo's own task and base model (recipe: src/demo/preference.ts). The reward model's held-out
  // accuracy measured 0.66 0.70 0.72 0.75 over its four epochs (training pairs: 1.00, so more pairs, not more epochs,
  // is what helps). Without the reference KL the policy drifts to where the reward model is wrong, so the KL term is
  // part of the recipe, as in RLHF. The task reward's figures are at its assertion.
  it("on the demo task: the reward model ranks held-out pairs well above chance and RL against it raises the task reward", async () => {
    const demoBase = path.join(scratch, "demo-base");
    const demoTokenizer = await createDemoBaseModel(demoBase, 1);
    const trainer = await MARLHFTrainer.create(marlhfDemoOptions(demoBase, demoTokenizer, { outputDir: path.join(scratch, "demo-task"), seed: 3, quiet: true }));
    const { before, after } = await trainMeasuringTaskReward(trainer);
    const accuracy = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl"))
      .map((r) => r["reward_model/heldout_accuracy"])
      .filter((a): a is number => typeof a === "number");
    expect(trainer.rewardHeldOutPairs.length).toBe(16 * 32);
    expect(accuracy).toHaveLength(4);
    expect(accuracy.at(-1)).toBeGreaterThan(0.65);
    // With one intra-op thread per test worker (as CI runs it), top-50 sampling and two RL epochs (the recipe's
    // comment says why): seed 3 0.244 → 0.475, seed 7 0.253 → 0.413, seed 5 0.28 → 0.39 (at the same step of a longer
    // run). The recipe without a top-k filter sat on a +0.08 edge that float rounding moved either way.
    expect(after).toBeGreaterThan(before + 0.1);
    await trainer.close();
  }, 600_000);

  it("the progress bar's total grows by the reward-model steps once the pairs are known", async () => {
    const trainer = await MARLHFTrainer.create(options({ quiet: false, trainDataset: coverVowelsDataset(4) }));
    const lines: string[] = [];
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => (lines.push(String(chunk)), true));
    try {
      await trainer.train();
    } finally {
      spy.mockRestore();
    }
    const counts = lines.flatMap((l) => [...l.matchAll(/MARLHF \[[#.]+\] (\d+)\/(\d+)/g)].map((m) => [Number(m[1]), Number(m[2])]));
    // 4 pair-collection steps, 2 reward-model epochs over ⌈training pairs / 4⌉ batches, 4 RL steps.
    const total = 4 + 2 * Math.ceil(trainer.rewardTrainingPairs.length / 4) + 4;
    expect(counts.at(-1)).toEqual([total, total]);
    for (const [done, shown] of counts) expect(done).toBeLessThanOrEqual(shown);
    await trainer.close();
  }, 120_000);

  it("rewardFreezeBackbone trains only the head", async () => {
    const trainer = await MARLHFTrainer.create(options({ config: { rewardFreezeBackbone: true, numTrainEpochs: 1 } }));
    const native = trainer.rewardModel.model.native;
    const before = native.parameterNames().map(({ name }) => native.getParameter(name));
    const head = trainer.rewardModel.head.native;
    const headBefore = head.parameterNames().map(({ name }) => head.getParameter(name));
    await trainer.train();
    native.parameterNames().forEach(({ name }, i) => expect(Array.from(native.getParameter(name))).toEqual(Array.from(before[i])));
    expect(head.parameterNames().some(({ name }, i) => head.getParameter(name).some((v, j) => v !== headBefore[i][j]))).toBe(true);
    await trainer.close();
  }, 120_000);

  it("refuses critics without an actor-critic back-end, loaded actors without rewardModelName or a critic source, and MAAC critics on several devices", async () => {
    await expect(MARLHFTrainer.create(options({ criticModel: base }))).rejects.toThrow(/criticModel and critics are only used with rlAlgorithm/);
    const model = await CausalLM.fromDirectory(base);
    await expect(MARLHFTrainer.create(options({ agents: [model, model], tokenizer: runs.tokenizer }))).rejects.toThrow(/rewardModelName must be set when the actors are loaded model objects/);
    await expect(MARLHFTrainer.create(options({ agents: [model, model], tokenizer: runs.tokenizer, config: { rlAlgorithm: "iac", rewardModelName: base } }))).rejects.toThrow(
      /rlAlgorithm "iac" needs its critics' source: set criticModelName, criticModel or critics/,
    );
    model.dispose();
    await expect(MARLHFTrainer.create(options({ config: { rlAlgorithm: "maac", parallelTraining: "mp", agentDevices: ["cpu", "cpu"], criticDevices: ["cpu", "cpu"] } }))).rejects.toThrow(
      /criticDevices must name one device with rlAlgorithm "maac"/,
    );
  });

  it("centralized collaboration: one actor, reward model on the joint text", async () => {
    const halves = { buildPrompt: (_item: unknown, roles: string[]) => `JOINT\n${roles.join("\n")}`, parseCompletion: (text: string) => [text.slice(0, 2), text.slice(2)] };
    const trainer = await MARLHFTrainer.create(options({ agents: [base], numAgents: 2, centralizedAdapter: halves, config: { collaborationMode: "centralized" } }));
    expect(trainer.agents).toHaveLength(1);
    await trainer.train();
    const pair = trainer.preferences.pairs[0];
    expect(pair.prompts[0].startsWith("JOINT\n")).toBe(true);
    // The reward model reads the joint prompt and the joint response verbatim, as one agent's.
    expect(jointText(pair.prompts, pair.winnerTexts)).toContain(`Agent 1 response:\n${pair.winnerTexts[0]}`);
    await trainer.close();
  }, 120_000);

  const parameters = (m: { native: { parameterNames(): { name: string }[]; getParameter(name: string): Float32Array } }) => m.native.parameterNames().map(({ name }) => m.native.getParameter(name));
  const acConfig = { rewardHeldOutFraction: 0, numGenerations: 2, criticLearningRate: 2e-3, evalInterval: 0 };

  it("IAC back-end: a critic per agent (from the agents' ids) trained against reward-model scores, saved and restored by checkpoints", async () => {
    const out = path.join(scratch, "marlhf-iac");
    const checkpoints = path.join(out, "checkpoints");
    // Two RL epochs, so that a checkpoint falls between two stretches of critic training.
    const make = () => MARLHFTrainer.create(options({ outputDir: out, trainDataset: coverVowelsDataset(4), config: { ...acConfig, rlAlgorithm: "iac", numTrainEpochs: 2 } }));
    const trainer = await make();
    expect(trainer.components.all.map((c) => c.name)).toEqual([
      "agent_0",
      "agent_1",
      "reward_model",
      "reward_model/head",
      "agent_0/critic",
      "agent_0/critic/value_head",
      "agent_1/critic",
      "agent_1/critic/value_head",
    ]);
    const ac = trainer.actorCritic as IACLearner;
    expect(ac.agents).toBe(trainer.agents);
    expect(ac.config).toMatchObject({ criticLearningRate: 2e-3, agentLearningRate: 1e-3, numGenerations: 2, rolloutBufferSize: 2, valueLossCoef: 0.6, useSeparateCritic: true });
    const headBefore = parameters(ac.critics[0].valueHead);
    // What the reward model scores each RL step's joint actions (the stage scores one item per step).
    const scored: number[][] = [];
    const scoreJoint = trainer.rewardModel.scoreJoint.bind(trainer.rewardModel);
    vi.spyOn(trainer.rewardModel, "scoreJoint").mockImplementation(async (prompts, completions) => {
      const scores = await scoreJoint(prompts, completions);
      scored.push(Array.from(scores));
      return scores;
    });
    await trainer.train({ checkpointDir: checkpoints });
    expect(trainer.rewardModel.isFrozen).toBe(true);
    // env steps: 4 items × 4 candidates, then 2 epochs × 4 items × 2 joint actions.
    expect(trainer.progress.envStep).toBe(16 + 16);
    const metrics = readJsonlMetrics(path.join(out, "metrics.jsonl"));
    const updates = metrics.filter((r) => r.kind === "update");
    for (const name of ["agent_0", "agent_1", "agent_0/critic", "agent_1/critic"]) expect(updates.some((r) => typeof r[`${name}/loss`] === "number")).toBe(true);
    // The RL stage's rewards are exactly the reward model's scores of its joint actions, step by step.
    const rlRewards = metrics.filter((r) => r.kind === "train" && typeof r["turn_1/reward_mean"] === "number").map((r) => r["turn_1/reward_mean"] as number);
    expect(scored).toHaveLength(8);
    expect(rlRewards).toHaveLength(scored.length);
    rlRewards.forEach((r, k) => expect(r).toBeCloseTo(scored[k].reduce((a, b) => a + b, 0) / scored[k].length, 6));
    const trained = parameters(ac.critics[0].valueHead);
    const trainedCritic = parameters(ac.critics[1].model);
    expect(trained.some((t, i) => t.some((v, j) => v !== headBefore[i][j]))).toBe(true);
    const last = path.join(checkpoints, `checkpoint-${trainer.progress.unitsDone}`);
    expect(existsSync(path.join(last, "agent_0", "critic", "value_head", "value_head.pt")) && existsSync(path.join(last, "agent_1", "critic", "optimizer.pt"))).toBe(true);
    await trainer.saveModel(path.join(out, "saved"));
    expect(existsSync(path.join(out, "saved", "agent_1", "critic", "value_head.pt"))).toBe(true);
    await trainer.close();

    // Resumed from the checkpoint after the first RL epoch (critics, their optimizers and the streams restored), the
    // run trains the second epoch again and lands on the same weights.
    const resumed = await make();
    await resumed.train({ checkpointDir: checkpoints, resumeFromCheckpoint: path.join(checkpoints, `checkpoint-${trainer.progress.unitsDone - 1}`) });
    const restored = resumed.actorCritic as IACLearner;
    parameters(restored.critics[0].valueHead).forEach((t, i) => expect(Array.from(t)).toEqual(Array.from(trained[i])));
    parameters(restored.critics[1].model).forEach((t, i) => expect(Array.from(t)).toEqual(Array.from(trainedCritic[i])));
    await resumed.close();
  }, 180_000);

  it("the actor-critic back-end is made afresh as the RL phase begins, as CoMLRL builds a new IAC trainer for it", async () => {
    const other = path.join(scratch, "other-critic");
    await createTinyModel(other, { seed: 12, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
    const seenInRl: Float32Array[][] = [];
    const trainer = await MARLHFTrainer.create(
      options({
        trainDataset: coverVowelsDataset(4),
        evalDataset: coverVowelsDataset(1),
        // Seen before every RL step after the first: the back-end as renewed, before its first update (buffers of 16
        // samples fill only at the epoch's end).
        evalLogger: () => {
          if (trainer.progress.stage === 2 && trainer.progress.itemIndex >= 1) seenInRl.push([...parameters(ac.critics[0].valueHead), parameters(ac.critics[0].model)[0]]);
          return [];
        },
        evalAggregator: () => ({}),
        config: { ...acConfig, rlAlgorithm: "iac", evalInterval: 1, evalNumSamples: 1, rolloutBufferSize: 16 },
      }),
    );
    const ac = trainer.actorCritic as IACLearner;
    const initialHead = parameters(ac.critics[0].valueHead);
    const source = await CausalLM.fromDirectory(base);
    const sourceEmbedding = parameters(source)[0];
    source.dispose();
    // What an earlier RL phase leaves behind: a moved critic, a moved head and optimizer moments.
    await ac.critics[0].model.loadWeights(other);
    ac.critics[0].valueHead.loadStateDict(Object.fromEntries(Object.entries(ac.critics[0].valueHead.stateDict()).map(([k, t]) => [k, { ...t, data: new Uint8Array(t.data.length) }])));
    expect(parameters(ac.critics[0].model)[0]).not.toEqual(sourceEmbedding);
    await trainer.train();
    await trainer.close();
    expect(seenInRl).toHaveLength(3);
    for (const seen of seenInRl) {
      expect(seen.slice(0, -1)).toEqual(initialHead);
      expect(seen[seen.length - 1]).toEqual(sourceEmbedding);
    }
  }, 120_000);

  it("IAC back-end with value heads on the actors: heads registered with the agents and trained by their optimizers", async () => {
    const trainer = await MARLHFTrainer.create(options({ trainDataset: coverVowelsDataset(2), config: { ...acConfig, rlAlgorithm: "iac", useSeparateCritic: false, valueHeadHiddenDim: 4 } }));
    expect(trainer.components.all.map((c) => c.name)).toEqual(["agent_0", "agent_0/value_head", "agent_1", "agent_1/value_head", "reward_model", "reward_model/head"]);
    const head = trainer.agents[0].valueHead!;
    const before = parameters(head);
    await trainer.train();
    expect(parameters(head).some((t, i) => t.some((v, j) => v !== before[i][j]))).toBe(true);
    await trainer.close();
    await expect(MARLHFTrainer.create(options({ criticModel: base, config: { ...acConfig, rlAlgorithm: "iac", useSeparateCritic: false } }))).rejects.toThrow(/critics can only be provided when useSeparateCritic is true/);
  }, 120_000);

  it("MAAC back-end: one centralized critic from criticModelName, stepped in every agent's update", async () => {
    const trainer = await MARLHFTrainer.create(options({ trainDataset: coverVowelsDataset(4), config: { ...acConfig, rlAlgorithm: "maac", criticModelName: base, criticValueHeadHiddenDim: 8 } }));
    expect(trainer.components.all.map((c) => c.name).slice(4)).toEqual(["critic", "critic/value_head"]);
    const ac = trainer.actorCritic as MAACLearner;
    expect(ac.critics[0].valueHead.info().hiddenDim).toBe(8);
    expect(ac.config.criticDevices).toBeNull();
    await trainer.train();
    const updates = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl")).filter((r) => r.kind === "update");
    const agentSteps = updates.filter((r) => typeof r["agent_0/loss"] === "number" || typeof r["agent_1/loss"] === "number").length;
    expect(agentSteps).toBeGreaterThan(0);
    expect(updates.filter((r) => typeof r["critic/loss"] === "number")).toHaveLength(agentSteps);
    await trainer.saveModel(path.join(trainer.outputDir, "saved"));
    expect(existsSync(path.join(trainer.outputDir, "saved", "critic", "value_head.pt"))).toBe(true);
    await trainer.close();
  }, 120_000);
});
