// The shared trainer lifecycle, through MAGRPO: option and train() guards, the agent count rules, ownership of
// models passed in, evaluation that never moves training, per-update metrics, deterministic concurrent updates,
// leak-free failed construction of every trainer kind at any of its model loads, and the reference-KL shaping against a hand computation.
import { cpSync, mkdtempSync, truncateSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { addon } from "../../src/native/loader.js";
import type { NodeSample, RewardFunction } from "../../src/rollout/types.js";
import { MAGRPOTrainer, type MAGRPOTrainerOptions } from "../../src/trainers/reinforce/magrpo.js";
import { ValueHead } from "../../src/models/value-head.js";
import { buildAgents, type Agent } from "../../src/trainers/agents.js";
import { Optimizer } from "../../src/models/optimizer.js";
import { rlAlgorithms, trainerDefinition, type FileRun } from "../../src/trainers/builtins.js";
import type { Trainer } from "../../src/trainers/lifecycle/trainer.js";
import { MARLHFTrainer } from "../../src/trainers/preference/marlhf.js";
import { makeBase, makeTrainer, TRAINER_KINDS } from "../support/checkpoint-run.js";
import { illTyped } from "../support/ill-typed.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-lifecycle-"));
const base = path.join(scratch, "base");
let tokenizer: ComlrlTokenizer;

beforeAll(async () => {
  tokenizer = await createTinyModel(base, { seed: 9, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
});

afterEach(() => {
  vi.restoreAllMocks();
});

// Earnable by a random model: how many letters "a" agent 0 writes, plus agent 1's length.
const letterReward: RewardFunction = (completions) => completions[0].map((a, j) => (a.split("a").length - 1) + completions[1][j].length / 10);

function options(overrides: Partial<MAGRPOTrainerOptions> = {}): MAGRPOTrainerOptions {
  return {
    agents: [base, base],
    rewardFunc: letterReward,
    trainDataset: [{ prompt: "Once upon a time" }, { prompt: "The red fox" }, { prompt: "A cat" }],
    outputDir: path.join(scratch, `run-${Math.random().toString(36).slice(2)}`),
    quiet: true,
    ...overrides,
    config: { numTurns: 1, numTrainEpochs: 1, numGenerations: 3, maxNewTokens: 4, temperature: 1, topP: 1, topK: 0, evalInterval: 0, agentLearningRate: 1e-2, loggingSteps: 1, seed: 5, ...(overrides.config ?? {}) },
  };
}

const weightsOf = (trainer: { agents: readonly Agent[] }) => trainer.agents.flatMap((a) => a.model.native.parameterNames().map(({ name }) => Array.from(a.model.native.getParameter(name))));
const records = (dir: string, kind: string) => readJsonlMetrics(path.join(dir, "metrics.jsonl")).filter((r) => r.kind === kind).map(({ time: _t, ...rest }) => rest);

describe("guards", () => {
  it("refuses unknown options with the nearest valid name, and bad enum-like options", async () => {
    await expect(MAGRPOTrainer.create(illTyped({ ...options(), formatter: () => "x" }))).rejects.toThrow(/has no option "formatter" \(did you mean "formatters"\?\)/);
    await expect(MAGRPOTrainer.create(options({ rewardBatching: illTyped("perNode") }))).rejects.toThrow(/rewardBatching must be one of "node", "jointAction", got "perNode"/);
  });

  it("refuses a second train() while one runs, and bad train() options", async () => {
    const trainer = await MAGRPOTrainer.create(options());
    const first = trainer.train();
    await expect(trainer.train()).rejects.toThrow(/train\(\) is already running on this trainer/);
    await first;
    expect(trainer.progress.epoch).toBe(1);
    for (const keepLast of [-1, 0, 2.5]) {
      await expect(trainer.train({ checkpointDir: path.join(scratch, "k"), keepLast })).rejects.toThrow(/keepLast must be a positive integer/);
    }
    await expect(trainer.train({ checkpointInterval: 0 })).rejects.toThrow(/checkpointInterval must be a positive integer/);
    await expect(trainer.train(illTyped({ checkpointDirectory: "x" }))).rejects.toThrow(/train\(\) has no option "checkpointDirectory" \(did you mean "checkpointDir"\?\)/);
    await trainer.close();
  });

  it("takes the agent count from agents when only they are given; a count that disagrees with the config is an error", async () => {
    const three = await MAGRPOTrainer.create(options({ agents: [base, base, base], rewardFunc: (c) => c[0].map(() => 0) }));
    expect(three.agents.length).toBe(3);
    expect(three.config.numAgents).toBe(3);
    await three.close();
    await expect(MAGRPOTrainer.create(options({ numAgents: 2, config: { numAgents: 0 } }))).rejects.toThrow(/numAgents \(2\) must match config\.numAgents \(0\)/);
    await expect(MAGRPOTrainer.create(options({ config: { numAgents: 0 } }))).rejects.toThrow(/numAgents must be ≥ 1/);
  });
});

describe("ownership", () => {
  it("close() leaves a model the caller passed in usable, so a second trainer can share it", async () => {
    const shared = await CausalLM.fromDirectory(base);
    const first = await MAGRPOTrainer.create(options({ agents: [shared, shared], tokenizer }));
    await first.train();
    await first.close();
    const second = await MAGRPOTrainer.create(options({ agents: [shared, shared], tokenizer }));
    await second.train();
    await second.close();
    expect((await shared.generate([[1, 2]], { maxNewTokens: 2, eosTokenIds: [] })).completions[0].length).toBe(2);
    shared.dispose();
  });

  it("leaves the default sampling stream of a model the caller passed in as it came, and trains as from a loaded one", async () => {
    const given = await CausalLM.fromDirectory(base);
    given.setSeed(1234);
    const before = given.generatorState();
    const trainer = await MAGRPOTrainer.create(options({ agents: [given, base], tokenizer }));
    await trainer.train();
    await trainer.close();
    expect(given.generatorState()).toEqual(before);
    // The trainer samples from a stream of its own seeded as for a model it loads: the same run with agent 0 loaded.
    const loaded = await MAGRPOTrainer.create(options({ agents: [base, base], tokenizer }));
    await loaded.train();
    const fresh = await CausalLM.fromDirectory(base);
    const again = await MAGRPOTrainer.create(options({ agents: [fresh, base], tokenizer, outputDir: loaded.outputDir + "-again" }));
    await again.train();
    expect(weightsOf(again)).toEqual(weightsOf(loaded));
    await loaded.close();
    await again.close();
    given.dispose();
    fresh.dispose();
  });

  it("frees each model it loaded exactly once, and never the caller's model that two agents share", async () => {
    const shared = await CausalLM.fromDirectory(base);
    const dispose = vi.spyOn(CausalLM.prototype, "dispose");
    const trainer = await MAGRPOTrainer.create(options({ agents: [shared, shared, base], tokenizer, config: { numAgents: 3, referenceKlEnabled: true } }));
    // agent_0 and agent_1 reach one model; agent_2's and the three references are the trainer's own.
    expect(trainer.agents[1].model).toBe(shared);
    const owned = [trainer.agents[2].model, ...trainer.agents.map((a) => a.reference!)];
    expect(new Set(owned).size).toBe(4);
    await trainer.close();
    expect(dispose.mock.contexts).toHaveLength(owned.length);
    expect(new Set(dispose.mock.contexts)).toEqual(new Set(owned));
    expect(shared.info().parameterCount).toBeGreaterThan(0);
    shared.dispose();
  });

  it("Agent.dispose frees its optimizer, value head, reference and the model the trainer loaded; a caller's model is only taken off its lane", async () => {
    const given = await CausalLM.fromDirectory(base);
    const sampling = { maxNewTokens: 4, temperature: 1, topP: 1, topK: null, repetitionPenalty: null, maxPromptTokens: null, promptOverflow: "truncate" as const };
    const agents = await buildAgents({
      sources: [given, base], tokenizers: [tokenizer, tokenizer], devices: ["cpu", "cpu"], referenceDevices: ["cpu", "cpu"],
      dtype: "float32", seed: 1, optimizer: { lr: 1e-3 }, sampling, valueHeads: { hiddenDim: null },
    });
    const models = vi.spyOn(CausalLM.prototype, "dispose");
    const heads = vi.spyOn(ValueHead.prototype, "dispose");
    const optimizers = vi.spyOn(Optimizer.prototype, "dispose");
    const lanes = vi.spyOn(CausalLM.prototype, "setComputeLane");
    for (const agent of agents) agent.dispose();
    expect(models.mock.contexts).toHaveLength(3);
    expect(new Set(models.mock.contexts)).toEqual(new Set([agents[1].model, agents[0].reference, agents[1].reference]));
    expect(heads.mock.contexts).toEqual(agents.map((a) => a.valueHead));
    expect(optimizers.mock.contexts).toEqual(agents.map((a) => a.optimizer));
    expect(lanes.mock.contexts).toEqual([given]);
    expect(lanes).toHaveBeenCalledWith(null);
    expect(given.info().parameterCount).toBeGreaterThan(0);
    given.dispose();
  });

  it("`await using` closes the trainer when its scope ends", async () => {
    const close = vi.spyOn(MAGRPOTrainer.prototype, "close");
    {
      await using trainer = await MAGRPOTrainer.create(options());
      expect(close).not.toHaveBeenCalled();
      expect(trainer.agents).toHaveLength(2);
    }
    expect(close).toHaveBeenCalledTimes(1);
  });

  it("a failed create() frees the agents it had already loaded", async () => {
    // Agent 1's directory has its tokenizer and config but truncated weights: it fails while agent 0 loads fine.
    const broken = path.join(scratch, "broken");
    cpSync(base, broken, { recursive: true });
    truncateSync(path.join(broken, "model.safetensors"), 64);
    const dispose = vi.spyOn(CausalLM.prototype, "dispose");
    const load = vi.spyOn(CausalLM, "load");
    await expect(MAGRPOTrainer.create(options({ agents: [base, broken] }))).rejects.toThrow(/Failed to load actor model from identifier/);
    const loaded = await Promise.all(load.mock.results.filter((r) => r.type === "return").map((r) => (r.value as Promise<CausalLM>).catch(() => null)));
    const made = loaded.filter((m): m is CausalLM => m !== null);
    expect(made.length).toBe(1);
    expect(dispose.mock.contexts).toContain(made[0]);
  });
});

describe("non-finite losses", () => {
  it("a minibatch whose loss is non-finite is skipped: its gradient never reaches the weights, and the run says so", async () => {
    // The real backward is asked for with NaN weights: its loss is NaN, so it runs no backward (a step taken in
    // backward, the default, would otherwise have applied the gradient before the loss was seen).
    const backward = CausalLM.prototype.policyGradientBackward;
    vi.spyOn(CausalLM.prototype, "policyGradientBackward").mockImplementation(async function (this: CausalLM, prompts, completions, weights, scale) {
      return backward.call(this, prompts, completions, Array.from(weights, () => NaN), scale);
    });
    const messages: string[] = [];
    vi.spyOn(console, "error").mockImplementation((message) => void messages.push(String(message)));
    const trainer = await MAGRPOTrainer.create(options({ quiet: false }));
    const before = weightsOf(trainer);
    await trainer.train();
    expect(weightsOf(trainer)).toEqual(before);
    for (const agent of [0, 1]) expect(messages.some((m) => new RegExp(`agent ${agent}: non-finite loss \\(NaN\\); a minibatch of \\d+ skipped`).test(m)), `agent ${agent}`).toBe(true);
    await trainer.close();
  });
});

// Every learner that samples while it trains — each registered RL back-end's own trainer, built as a config file
// builds it, and MARLHF's RL phase — on the same task, evaluating every `evalInterval` items (0: never): with 1, once
// per item of 2 epochs of 3 (MARLHF's in its RL phase). MADPO samples only before its first update, so evaluation
// could not move it.
const EVAL_ITEMS = [{ prompt: "E1" }, { prompt: "E2" }];
const PREFERENCE_CONFIG = { numTrainEpochs: 2, preferenceNumCandidates: 3, preferencePairsPerSample: 2, maxNewTokens: 4, temperature: 1, topP: 1, topK: 0, agentLearningRate: 1e-2, trainBatchSize: 2, loggingSteps: 1, seed: 5 };
type Sampling = Trainer & { agents: Agent[] };
const registered = (section: string) => async (evalInterval: number) => {
  const definition = trainerDefinition(section);
  const { config: given, ...task } = options({ evalDataset: EVAL_ITEMS, config: { numTrainEpochs: 2, evalInterval, evalNumSamples: 2 } });
  const config = definition.config(given as Record<string, unknown>, {});
  const critics = { criticModel: definition.critics?.required(config) ? base : null, critics: null };
  return (await definition.create(task as unknown as FileRun, config, critics)) as Sampling;
};
const FAMILIES: Record<string, (evalInterval: number) => Promise<Sampling>> = {
  ...Object.fromEntries(rlAlgorithms().map((section) => [section, registered(section)])),
  marlhf: (evalInterval) =>
    MARLHFTrainer.create({ ...options({ evalDataset: EVAL_ITEMS }), config: { ...PREFERENCE_CONFIG, numGenerations: 2, rewardTrainBatchSize: 2, rewardHeldOutFraction: 0, evalInterval, evalNumSamples: 2 } }),
};

describe("evaluation on its own streams", () => {
  it.each(Object.keys(FAMILIES))("%s: the same seed with and without periodic evaluation trains identically (metrics and weights)", async (family) => {
    const run = async (evalInterval: number) => {
      const trainer = await FAMILIES[family](evalInterval);
      await trainer.train();
      const result = { weights: weightsOf(trainer), train: records(trainer.outputDir, "train"), update: records(trainer.outputDir, "update"), eval: records(trainer.outputDir, "eval") };
      await trainer.close();
      return result;
    };
    const without = await run(0);
    const withEval = await run(1);
    expect(withEval.eval.length).toBe(2 * 3);
    expect(without.eval.length).toBe(0);
    expect(withEval.train).toEqual(without.train);
    expect(withEval.update).toEqual(without.update);
    expect(withEval.weights).toEqual(without.weights);
  });

  it("re-seeds its streams: the same weights always evaluate alike, and evaluation counts in no stage's time", async () => {
    const trainer = await MAGRPOTrainer.create(options({ evalDataset: EVAL_ITEMS }));
    const [a, b] = [await trainer.evaluate(), await trainer.evaluate()];
    expect(a).toEqual(b);
    expect(trainer.timings.stages).toEqual({});
    await trainer.close();
  });
});

describe("per-update metrics", () => {
  it("logs loss, gradient norm, learning rate and samples of every optimizer step per agent", async () => {
    const trainer = await MAGRPOTrainer.create(options({ config: { rolloutBufferSize: 2, trainBatchSize: 1 } }));
    await trainer.train();
    await trainer.close();
    const updates = records(trainer.outputDir, "update");
    // 3 items, buffers of 2: one drain after item 2 (2 samples each → 2 steps per agent), one at the epoch end (1 each).
    expect(updates.length).toBe(2 * 3);
    expect(updates.map((u) => u.update)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(trainer.progress.update).toBe(6);
    for (const u of updates) {
      const agent = Object.keys(u).find((k) => k.endsWith("/loss"))!.split("/")[0];
      expect(["agent_0", "agent_1"]).toContain(agent);
      expect(Number.isFinite(u[`${agent}/loss`] as number)).toBe(true);
      expect(u[`${agent}/grad_norm`] as number).toBeGreaterThan(0);
      expect(u[`${agent}/lr`]).toBe(1e-2);
      expect(u[`${agent}/samples`]).toBe(1);
    }
  });
});

describe("concurrent agents", () => {
  it("update in the same order and to the same weights as sequential ones", async () => {
    const run = async (concurrent: boolean) => {
      const trainer = await MAGRPOTrainer.create(options({ config: { numTrainEpochs: 2 } }));
      trainer.learner.environment.concurrent = concurrent;
      await trainer.train();
      const result = { weights: weightsOf(trainer), update: records(trainer.outputDir, "update") };
      await trainer.close();
      return result;
    };
    const sequential = await run(false);
    const concurrent = await run(true);
    expect(concurrent.update).toEqual(sequential.update);
    expect(concurrent.weights).toEqual(sequential.weights);
  });
});

describe("reference KL", () => {
  it("is 0 for an untouched policy, equals Σ k3 of the token log-probs once it moved, and shapes the returns", async () => {
    const coef = 0.5;
    const trainer = await MAGRPOTrainer.create(options({ agents: [base], config: { numAgents: 1, referenceKlEnabled: true, referenceKlCoef: coef, advantageNormalization: false }, rewardFunc: (c) => c[0].map((t) => t.length) }));
    const agent = trainer.agents[0];
    const before = await trainer.collect([{ prompt: "Hi" }]);
    expect(before[0].referenceKl).toEqual([0, 0, 0]);
    await trainer.train();
    const [sample] = await trainer.collect([{ prompt: "Hi" }]);
    const prompts = sample.completionIds.map(() => sample.promptIds);
    const policy = await agent.model.score(prompts, sample.completionIds, { tokenLogprobs: true });
    const reference = await agent.reference!.score(prompts, sample.completionIds, { tokenLogprobs: true });
    let offset = 0;
    const expected = sample.completionIds.map((ids) => {
      let kl = 0;
      for (let t = 0; t < ids.length; t++, offset++) {
        const d = reference.tokenLogprobs![offset] - policy.tokenLogprobs![offset];
        kl += Math.exp(d) - d - 1;
      }
      return kl;
    });
    expect(expected.some((kl) => kl > 0)).toBe(true);
    sample.referenceKl.forEach((kl, k) => expect(kl).toBeCloseTo(expected[k], 5));

    await trainer.close();
  });

  it("the update trains on R − coef·KL (hand-computed advantages, one AdamW step)", async () => {
    const trainer = await MAGRPOTrainer.create(options({ agents: [base], config: { numAgents: 1, referenceKlEnabled: true, referenceKlCoef: 0.5, advantageNormalization: false } }));
    const model = trainer.agents[0].model;
    const copy = await model.clone();
    const prompt = tokenizer.encode("Hi there");
    const completions = [" red", " blue", " fox"].map((t) => Int32Array.from(tokenizer.encode(t)));
    const sample: NodeSample = { agent: 0, turn: 0, promptIds: prompt, completionIds: completions, returns: [2, 0, 1], referenceKl: [1, 0, 0], nodeMeanReward: 1, nodeMeanReturn: 1, envStep: 3 };
    await trainer.update([sample]);
    // Shaped returns [2 − 0.5·1, 0, 1] = [1.5, 0, 1]; mean baseline 5/6; weights A_k / (K · |minibatch|) with K = 3.
    const a = [1.5, 0, 1].map((r) => r - 2.5 / 3);
    await copy.policyGradientBackward([prompt, prompt, prompt], completions, a.map((x) => x / 3));
    const optimizer = new (addon().NativeOptimizer)(copy.native, { lr: 1e-2 });
    await optimizer.step();
    for (const { name } of model.native.parameterNames()) expect(Array.from(model.native.getParameter(name)), name).toEqual(Array.from(copy.native.getParameter(name)));
    await trainer.close();
  });
});

describe("construction that fails frees what it built", () => {
  // Every trainer kind of the exact-resume suite, failed at each of its model loads in turn (agents, references,
  // critics, reward models): whatever was loaded or created before the failure is disposed, once.
  it.each(Object.keys(TRAINER_KINDS))("%s: a failure at any model load leaks no model or head", async (kind) => {
    const suiteBase = path.join(scratch, "suite-base");
    const suiteTokenizer = await makeBase(suiteBase);
    const made: object[] = [];
    const freed = new Set<object>();
    const fromDirectory = CausalLM.fromDirectory.bind(CausalLM);
    const clone = CausalLM.prototype.clone;
    const createHead = ValueHead.create.bind(ValueHead);
    let loads = 0;
    let failAt = -1;
    vi.spyOn(CausalLM, "fromDirectory").mockImplementation(async (...args) => {
      if (loads++ === failAt) throw new Error("injected load failure");
      const model = await fromDirectory(...args);
      made.push(model);
      return model;
    });
    vi.spyOn(CausalLM.prototype, "clone").mockImplementation(async function (this: CausalLM, ...args) {
      if (loads++ === failAt) throw new Error("injected load failure");
      const model = await clone.apply(this, args);
      made.push(model);
      return model;
    });
    vi.spyOn(ValueHead, "create").mockImplementation((...args) => {
      const head = createHead(...args);
      made.push(head);
      return head;
    });
    vi.spyOn(CausalLM.prototype, "dispose").mockImplementation(function (this: CausalLM) {
      freed.add(this);
    });
    vi.spyOn(ValueHead.prototype, "dispose").mockImplementation(function (this: ValueHead) {
      freed.add(this);
    });
    const trainer = await makeTrainer(suiteBase, suiteTokenizer, path.join(scratch, `leak-${kind.replace(/\W/g, "_")}`), 1, {}, kind);
    await trainer.close();
    const total = loads;
    expect(total).toBeGreaterThan(0);
    expect(made.every((m) => freed.has(m))).toBe(true);
    for (failAt = 0; failAt < total; failAt++) {
      made.length = 0;
      freed.clear();
      loads = 0;
      await expect(makeTrainer(suiteBase, suiteTokenizer, path.join(scratch, `leak-${failAt}`), 1, {}, kind), `failure at load ${failAt}`).rejects.toThrow(/injected load failure/);
      expect(made.filter((m) => !freed.has(m)).length, `failure at load ${failAt} of ${total}: undisposed`).toBe(0);
    }
  });
});
