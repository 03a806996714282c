// MAGRPO end to end on tiny models made here: reward rises, the loss is the corrected one, save → reload → continue,
// resolution and reward errors, parameter sharing, reference KL, evaluation and multi-turn rollouts.
import { existsSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { addon } from "../../src/native/loader.js";
import type { NodeSample, RewardFunction } from "../../src/rollout/types.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc, SOLO_CEILING } from "../../src/tasks/cover-vowels.js";
import { MAGRPOTrainer, type MAGRPOTrainerOptions } from "../../src/trainers/reinforce/magrpo.js";
import { tinyRuns } from "../support/runs.js";
import { expectRise } from "../support/learning.js";
import { illTyped } from "../support/ill-typed.js";

const runs = tinyRuns("comlrl-magrpo-", (dir) => createTinyModel(dir, { seed: 7, hiddenSize: 64, numLayers: 2 }));
const { scratch, base } = runs;

const lengthReward: RewardFunction = (completions) => completions[0].map((a, j) => Math.min(a.length, completions[1][j].length) / 10);

function options(overrides: Partial<MAGRPOTrainerOptions> = {}): MAGRPOTrainerOptions {
  return {
    ...runs.twoAgents({ rewardFunc: lengthReward, trainDataset: [{ prompt: "Once upon a time" }, { prompt: "The red fox" }] }),
    ...overrides,
    config: { numTurns: 1, numTrainEpochs: 1, numGenerations: 2, maxNewTokens: 4, evalInterval: 0, agentLearningRate: 1e-3, ...(overrides.config ?? {}) },
  };
}

const trainRewards = (dir: string) =>
  readJsonlMetrics(path.join(dir, "metrics.jsonl"))
    .filter((r) => r.kind === "train" && typeof r["turn_1/reward_mean"] === "number")
    .map((r) => r["turn_1/reward_mean"] as number);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

describe("MAGRPO end to end", () => {
  it("two agents learn the cooperative task: the shared reward rises past what one agent can earn alone", async () => {
    const trainer = await MAGRPOTrainer.create({
      ...options(),
      rewardFunc: coverVowelsRewardFunc,
      formatters: coverVowelsFormatters((m) => runs.tokenizer.applyChatTemplate(m, { addGenerationPrompt: true })),
      trainDataset: coverVowelsDataset(16),
      config: { numTurns: 1, numTrainEpochs: 30, numGenerations: 8, maxNewTokens: 4, temperature: 1, topP: 1, topK: 0, agentLearningRate: 2e-3, rolloutBufferSize: 2, trainBatchSize: 2, loggingSteps: 1, evalInterval: 0, seed: 7 },
    });
    await trainer.train();
    await trainer.close();
    const rewards = trainRewards(trainer.outputDir);
    const first = mean(rewards.slice(0, 20));
    const last = mean(rewards.slice(-20));
    expectRise(`MAGRPO (cover-the-vowels, ${rewards.length} updates)`, first, last, 0.25);
    expect(last).toBeGreaterThan(SOLO_CEILING);
  }, 300_000);

  it("each update is the corrected loss: every completion token scored, (1/K)·Σ −A_k·log π, one AdamW step", async () => {
    const trainer = await MAGRPOTrainer.create(options({ config: { numAgents: 1, advantageNormalization: false, agentLearningRate: 1e-2 }, agents: [base] }));
    const model = trainer.agents[0].model;
    const before = await model.clone();
    const eos = runs.tokenizer.eosTokenIds[0];
    const sample: NodeSample = {
      agent: 0, turn: 0, promptIds: runs.tokenizer.encode("Hi there"),
      completionIds: [Int32Array.from([...runs.tokenizer.encode(" red"), eos]), Int32Array.from(runs.tokenizer.encode(" blue fox"))],
      returns: [1, 3], referenceKl: [0, 0], nodeMeanReward: 2, nodeMeanReturn: 2, envStep: 2,
    };
    const [result] = await trainer.update([sample]);
    // mean baseline: A = [1 − 2, 3 − 2] = [−1, 1]; loss = (1/2)(S_0 − S_1).
    const s = await before.score([sample.promptIds, sample.promptIds], sample.completionIds);
    expect(result.loss).toBeCloseTo((s.sum[0] - s.sum[1]) / 2, 4);
    await before.zeroGrad();
    await before.policyGradientBackward([sample.promptIds, sample.promptIds], sample.completionIds, [-0.5, 0.5]);
    const optimizer = new (addon().NativeOptimizer)(before.native, { lr: 1e-2 });
    await optimizer.step();
    for (const { name } of model.native.parameterNames()) {
      expect(Array.from(model.native.getParameter(name))).toEqual(Array.from(before.native.getParameter(name)));
    }
    optimizer.dispose();
    before.dispose();
    await trainer.close();
  });

  it("saves agent_i directories a new trainer continues from", async () => {
    const first = await MAGRPOTrainer.create(options());
    await first.train();
    const saved = path.join(scratch, "saved");
    await first.saveModel(saved);
    const weights = first.agents[1].model.native.getParameter("model.norm.weight");
    await first.close();
    for (const agent of ["agent_0", "agent_1"]) {
      for (const file of ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]) {
        expect(existsSync(path.join(saved, agent, file)), `${agent}/${file}`).toBe(true);
      }
    }
    const second = await MAGRPOTrainer.create(options({ agents: [path.join(saved, "agent_0"), path.join(saved, "agent_1")] }));
    expect(Array.from(second.agents[1].model.native.getParameter("model.norm.weight"))).toEqual(Array.from(weights));
    await second.train();
    expect(second.progress.envStep).toBe(2 * 2);
    await second.close();
  });

  it("shares one model object between agents, each with its own optimizer", async () => {
    const shared = await CausalLM.fromDirectory(base);
    const trainer = await MAGRPOTrainer.create(options({ agents: [shared, shared], tokenizer: runs.tokenizer }));
    expect(trainer.agents[0].model).toBe(trainer.agents[1].model);
    expect(trainer.agents[0].optimizer).not.toBe(trainer.agents[1].optimizer);
    await trainer.train();
    await trainer.close();
  });

  it("steps each agent inside its backward (stepInBackward, the default), with or without gradient checkpointing, with the update of a step after the backward, bit for bit", async () => {
    const run = async (config: { stepInBackward: boolean; gradientCheckpointing?: boolean }) => {
      const trainer = await MAGRPOTrainer.create(options({ config: { numTurns: 1, numTrainEpochs: 2, numGenerations: 2, maxNewTokens: 4, evalInterval: 0, agentLearningRate: 1e-3, loggingSteps: 1, ...config } }));
      expect(trainer.agents.map(({ model }) => model.info().gradientCheckpointing)).toEqual([true, true].map(() => config.gradientCheckpointing === true));
      await trainer.train();
      const weights = trainer.agents.map(({ model }) => model.native.parameterNames().map(({ name }) => model.native.getParameter(name)));
      const gradients = trainer.agents.map(({ model }) => model.native.parameterNames().filter(({ name }) => model.native.getGradient(name) !== null));
      await trainer.close();
      const norms = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl")).flatMap((r) => [r["agent_0/grad_norm"], r["agent_1/grad_norm"]].filter((n) => n !== undefined));
      return { weights, gradients, norms };
    };
    const after = await run({ stepInBackward: false });
    expect(after.norms.length).toBe(2 * 2);
    expect(after.norms.every((n) => typeof n === "number" && n > 0)).toBe(true);
    expect(await run({ stepInBackward: true })).toEqual(after);
    expect(await run({ stepInBackward: true, gradientCheckpointing: true })).toEqual(after);
  });

  it('precision "bf16-mixed" on every agent of a bf16 run: the weights move at lr 5e-6, the same with the step in backward and checkpointing, bit for bit', async () => {
    const run = async (config: { stepInBackward: boolean; gradientCheckpointing?: boolean }) => {
      const trainer = await MAGRPOTrainer.create(
        options({ config: { numTurns: 1, numTrainEpochs: 2, numGenerations: 2, maxNewTokens: 4, evalInterval: 0, agentLearningRate: 5e-6, dtype: "bfloat16", precision: "bf16-mixed", ...config } }),
      );
      expect(trainer.agents.map((agent) => agent.optimizer.precision)).toEqual(["bf16-mixed", "bf16-mixed"]);
      const weights = () => trainer.agents.map(({ model }) => model.native.parameterNames().map(({ name }) => model.native.getParameter(name)));
      const before = weights();
      await trainer.train();
      const after = weights();
      expect(trainer.agents.map((agent) => agent.optimizer.memory().bytesPerParameter)).toEqual([14, 14]);
      await trainer.close();
      return { before, after };
    };
    const stepped = await run({ stepInBackward: false });
    expect(stepped.after).not.toEqual(stepped.before);
    expect(await run({ stepInBackward: true })).toEqual(stepped);
    expect(await run({ stepInBackward: true, gradientCheckpointing: true })).toEqual(stepped);
    // Auto on a CPU keeps CoMLRL's pure bf16.
    const auto = await MAGRPOTrainer.create(options({ config: { dtype: "bfloat16" } }));
    expect(auto.agents.map((agent) => agent.optimizer.precision)).toEqual(["pure-bf16", "pure-bf16"]);
    await auto.close();
  });

  it("reference KL: frozen distinct references, KL metrics logged", async () => {
    const trainer = await MAGRPOTrainer.create(options({ config: { referenceKlEnabled: true, referenceKlCoef: 0.5, loggingSteps: 1 } }));
    expect(trainer.agents[0].reference).not.toBeNull();
    expect(trainer.agents[0].reference!.info().frozen).toBe(true);
    expect(trainer.agents[0].reference).not.toBe(trainer.agents[0].model);
    await trainer.train();
    await trainer.close();
    const records = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl")).filter((r) => r.kind === "train");
    expect(records.some((r) => typeof r["turn_1/reference_kl_mean"] === "number")).toBe(true);
  });

  it("multi-turn rollouts with an external transition log both turns; evaluate() follows one path", async () => {
    const trainer = await MAGRPOTrainer.create(
      options({
        externalTransition: ({ agentCompletions }) => agentCompletions.map((c) => `Revise: ${c}`),
        evalDataset: [{ prompt: "A" }, { prompt: "B" }, { prompt: "C" }],
        evalLogger: ({ agentCompletionsTurns }) => agentCompletionsTurns[0].map((turns) => turns.length),
        evalAggregator: (result) => ({ "turn_1/turns_seen": mean(result as number[]) }),
        config: { numTurns: 2, earlyTerminationThreshold: null, loggingSteps: 1, evalNumSamples: 2 },
      }),
    );
    await trainer.train();
    // Per item: root 2 joint actions + 2 children × 2 = 6 env steps.
    expect(trainer.progress.envStep).toBe(2 * 6);
    const metrics = await trainer.evaluate();
    expect(Object.keys(metrics).sort()).toEqual(["eval/turn_1/expected_return", "eval/turn_1/reward_mean", "eval/turn_1/turns_seen", "eval/turn_2/expected_return", "eval/turn_2/reward_mean"]);
    expect(metrics["eval/turn_1/turns_seen"]).toBe(2);
    await trainer.close();
    const keys = new Set(readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl")).flatMap((r) => Object.keys(r)));
    expect(keys.has("turn_2/reward_mean")).toBe(true);
  });
});

describe("MAGRPO as CoMLRL 1.4.3 evaluates and samples", () => {
  it("evaluation plays every turn although training terminates early; evalLogger gets the items and their prompts", async () => {
    const seen: Array<{ turns: number[]; items: unknown[]; prompts: string[] }> = [];
    const evalDataset = [{ prompt: "A" }, { prompt: "B", topic: "birds" }, { question: "no prompt field" }];
    const trainer = await MAGRPOTrainer.create(
      options({
        externalTransition: ({ agentCompletions }) => agentCompletions.map((c) => `Revise: ${c}`),
        evalDataset,
        formatters: (item) => String(item.prompt ?? item.question),
        evalLogger: ({ agentCompletionsTurns, items, prompts }) => {
          seen.push({ turns: agentCompletionsTurns.flatMap((perAgent) => perAgent.map((turns) => turns.length)), items, prompts });
          return [];
        },
        evalAggregator: () => ({}),
        // Every reward is ≥ 0 > −1: every training node terminates after its first turn.
        config: { numTurns: 2, earlyTerminationThreshold: -1, evalNumSamples: 3 },
      }),
    );
    await trainer.train();
    expect(trainer.progress.envStep).toBe(2 * 2);
    const metrics = await trainer.evaluate();
    await trainer.close();
    expect(metrics).toHaveProperty("eval/turn_2/reward_mean");
    expect(seen).toEqual([{ turns: [2, 2, 2, 2, 2, 2], items: evalDataset, prompts: ["A", "B", ""] }]);
  });

  it("generationKwargs override the sampling settings of training rollouts, not of evaluation", async () => {
    const trainer = await MAGRPOTrainer.create(options({ generationKwargs: { repetition_penalty: 1.3, top_k: 5, temperature: 0.9, do_sample: true } }));
    try {
      expect(trainer.agents[0].sampling).toMatchObject({ repetitionPenalty: 1.3, topK: 5, temperature: 0.9, topP: 0.6 });
      expect(trainer.agents[1].evalSampling).toMatchObject({ repetitionPenalty: null, topK: 50, temperature: 0.6, topP: 0.6 });
    } finally {
      await trainer.close();
    }
  });

  it("generationKwargs: an unknown argument or a bad value is an error naming it, before any model loads", async () => {
    const bad = (generationKwargs: unknown) => MAGRPOTrainer.create(options({ generationKwargs: illTyped(generationKwargs) }));
    await expect(bad({ top_n: 0.9 })).rejects.toThrow(/generationKwargs has no option "top_n" \(did you mean "top_p"\?\)/);
    await expect(bad({ max_new_tokens: 8 })).rejects.toThrow(/generationKwargs has no option "max_new_tokens"/);
    await expect(bad({ repetition_penalty: 0 })).rejects.toThrow(/generationKwargs\.repetition_penalty must be a positive number, got 0/);
    await expect(bad({ top_k: null })).rejects.toThrow(/generationKwargs\.top_k must be a non-negative integer \(0: no top-k filter\), got null/);
    await expect(bad({ do_sample: false })).rejects.toThrow(/generationKwargs\.do_sample must be true/);
    await expect(bad([1.1])).rejects.toThrow(/generationKwargs must be an object/);
  });
});

describe("MAGRPO errors", () => {
  it("refuses bad agent and tokenizer resolutions with clear messages", async () => {
    await expect(MAGRPOTrainer.create(options({ agents: null }))).rejects.toThrow(/Either agentModel or agents must be provided/);
    await expect(MAGRPOTrainer.create(options({ agents: [base], numAgents: 2 }))).rejects.toThrow(/agents length \(1\) must match numAgents \(2\)/);
    await expect(MAGRPOTrainer.create(options({ agentModel: "other/model" }))).rejects.toThrow(/conflicts/);
    await expect(MAGRPOTrainer.create(options({ tokenizer: [runs.tokenizer] }))).rejects.toThrow(/tokenizers length \(1\) must match agents \(2\)/);
    await expect(MAGRPOTrainer.create(options({ numAgents: 3, config: { numAgents: 2 } }))).rejects.toThrow(/numAgents \(3\) must match config\.numAgents/);
    await expect(MAGRPOTrainer.create(options({ config: { numTurns: 2 } }))).rejects.toThrow(/requires an externalTransition/);
    await expect(MAGRPOTrainer.create(options({ rewardFunc: undefined }))).rejects.toThrow(/rewardFunc must be a function/);
    await expect(MAGRPOTrainer.create(options({ agents: [path.join(scratch, "missing"), base] }))).rejects.toThrow(/missing/);
    const loaded = await CausalLM.fromDirectory(base);
    await expect(MAGRPOTrainer.create(options({ agents: [loaded, loaded] }))).rejects.toThrow(/Tokenizer\(s\) must be provided when agents are model objects/);
    loaded.dispose();
  });

  it("reports a reward function that throws or returns NaN with the item, turn and joint action", async () => {
    const throwing = await MAGRPOTrainer.create(options({ rewardFunc: () => { throw new Error("judge offline"); } }));
    await expect(throwing.train()).rejects.toThrow(/reward function threw at item 0, turn 1, joint actions 0\.\.1: judge offline/);
    await throwing.close();
    const nan = await MAGRPOTrainer.create(options({ rewardFunc: (c) => c[0].map((_, j) => (j === 1 ? NaN : 0)) }));
    await expect(nan.train()).rejects.toThrow(/NaN \(not a finite number\) at item 0, turn 1, joint action 1/);
    await nan.close();
  });
});
