// IAC and MAAC end to end on tiny models made here: the spec's constructor and config errors, the reward broadcast
// rules, TD(0) targets and MAAC's joint critic text against hand computations, the shared-head loss against the
// manual one, CoMLRL's saveModel layouts read by Python, continuing from saved dirs with restored heads.
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { iacConfig, maacConfig } from "../../src/config/index.js";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import type { RewardFunction } from "../../src/rollout/types.js";
import { IACTrainer, type IACTrainerOptions } from "../../src/trainers/actor-critic/iac.js";
import { jointCriticText, MAACTrainer, type MAACTrainerOptions } from "../../src/trainers/actor-critic/maac.js";
import { normalizedAdvantages } from "../../src/trainers/actor-critic/learner.js";
import { smallActorCriticRun } from "../support/actor-critic-run.js";
import { illTyped } from "../support/ill-typed.js";
import { runPython } from "../support/python.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-ac-"));
const base = path.join(scratch, "base");
const other = path.join(scratch, "other");
let tokenizer: ComlrlTokenizer;

beforeAll(async () => {
  tokenizer = await createTinyModel(base, { seed: 17, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
  await createTinyModel(other, { seed: 18, hiddenSize: 48, numLayers: 1, vocabSize: 300 });
});

function iac(overrides: Partial<IACTrainerOptions> = {}): IACTrainerOptions {
  return smallActorCriticRun(base, scratch, overrides);
}

function maac(overrides: Partial<MAACTrainerOptions> = {}): MAACTrainerOptions {
  return { ...(iac() as MAACTrainerOptions), ...overrides, config: { ...(iac().config as object), ...(overrides.config ?? {}) } };
}

describe("configs (COMLRL-SPEC §2.2, §2.3, §9)", () => {
  it("have CoMLRL's defaults (discount 1.0, topK null: the model's generation_config.json decides), and reject what the spec rejects", () => {
    const c = iacConfig();
    expect(c).toMatchObject({ agentLearningRate: 5e-6, criticLearningRate: 5e-6, rolloutBufferSize: 8, trainBatchSize: 8, valueClipRange: 0.2, valueLossCoef: 0.6, numTrainEpochs: 40, useSeparateCritic: true, criticType: "v", numTurns: 2, discount: 1.0, numGenerations: 1, loggingSteps: 1, topK: null, earlyTerminationThreshold: -0.2 });
    expect(iacConfig({ agentLearningRate: 1e-4, criticLearningRate: null }).criticLearningRate).toBe(1e-4);
    expect(() => iacConfig({ numTurns: 2, numGenerations: 2 })).toThrow(/IACConfig\.numGenerations must be 1 when numTurns > 1/);
    expect(() => iacConfig({ criticType: illTyped("x") })).toThrow(/IACConfig\.criticType must be one of "v", "q"/);
    expect(() => iacConfig({ parallelTraining: "mp" })).toThrow(/IACConfig\.agentDevices must be set/);
    expect(() => iacConfig({ parallelTraining: "mp", agentDevices: ["cpu", "cpu"] })).toThrow(/IACConfig\.criticDevices must be set/);
    expect(iacConfig({ parallelTraining: "mp", agentDevices: ["cpu", "cpu"], useSeparateCritic: false }).parallelTraining).toBe("mp");
    expect(() => iacConfig({ parallelTraining: illTyped("auto") })).toThrow(/parallelTraining/);
    expect(() => iacConfig({ rolloutBufferSize: 0 })).toThrow(/rolloutBufferSize must be ≥ 1/);
    expect(iacConfig({ critic_type: "q" }).criticType).toBe("q");
    expect(() => maacConfig({ parallelTraining: "mp", agentDevices: ["cpu", "cpu"] })).toThrow(/MAACConfig\.criticDevices must be set/);
    expect(() => maacConfig({ criticDevices: ["cpu", "cpu"] })).toThrow(/MAACConfig\.criticDevices must name one device/);
    expect(() => maacConfig({ criticLearningRate: illTyped(null) })).toThrow(/criticLearningRate/);
  });
});

describe("constructor errors (COMLRL-SPEC §5.1, §9)", () => {
  it("names the wrong combination of actors, critics and tokenizers", async () => {
    await expect(IACTrainer.create(iac({ rewardFunc: undefined }))).rejects.toThrow(/rewardFunc must be a function/);
    await expect(IACTrainer.create(iac({ agentModel: null }))).rejects.toThrow(/Either agentModel or agents must be provided/);
    await expect(IACTrainer.create(iac({ config: { numTurns: 2, numGenerations: 1 } }))).rejects.toThrow(/Multi-turn IAC requires an externalTransition/);
    await expect(IACTrainer.create(iac({ config: { useSeparateCritic: false } }))).rejects.toThrow(/critics can only be provided when useSeparateCritic is true/);
    await expect(IACTrainer.create(iac({ criticModel: null }))).rejects.toThrow(/Either criticModel or critics must be provided when useSeparateCritic is true/);
    await expect(IACTrainer.create(iac({ criticModel: null, critics: [base] }))).rejects.toThrow(/critics length \(1\) must match numAgents \(2\)/);
    await expect(IACTrainer.create(iac({ critics: [base, other] }))).rejects.toThrow(/criticModel ".*base" conflicts with critics\[1\]/);
    await expect(IACTrainer.create(iac({ agentModel: null, agents: [base, base] }))).rejects.toThrow(/Tokenizer must be provided when using agents/);
    await expect(IACTrainer.create(iac({ agentModel: null, agents: [base, base], tokenizer: [tokenizer] }))).rejects.toThrow(/tokenizers length \(1\) must match agents \(2\)/);
    await expect(IACTrainer.create(iac({ criticModel: path.join(scratch, "nope") }))).rejects.toThrow(/Failed to load critic model from identifier '.*nope'/);
    await expect(MAACTrainer.create(maac({ criticModel: null }))).rejects.toThrow(/Either criticModel or critics must be provided for MAAC/);
    await expect(MAACTrainer.create(maac({ criticModel: null, critics: [base, base] }))).rejects.toThrow(/critics length \(2\) must match 1 critic/);
    await expect(MAACTrainer.create(maac({ modelConfig: { criticValueHeadHiddenDim: 0 } }))).rejects.toThrow(/criticValueHeadHiddenDim must be a positive integer/);
    await expect(MAACTrainer.create(illTyped({ ...maac(), critic: base }))).rejects.toThrow(/has no option "critic" \(did you mean "critic(s|Model)"\?\)/);
  });

  it("a loaded model as criticModel stands for every critic, as CoMLRL's critic_model (IAC: one model, a head each)", async () => {
    const critic = await CausalLM.fromDirectory(other);
    const separate = await IACTrainer.create(iac({ criticModel: critic }));
    expect(separate.critics.map((c) => c.model)).toEqual([critic, critic]);
    expect(separate.critics[0].valueHead).not.toBe(separate.critics[1].valueHead);
    await separate.train();
    await separate.close();
    const central = await MAACTrainer.create(maac({ criticModel: critic }));
    expect(central.critics.map((c) => c.model)).toEqual([critic]);
    await central.close();
    expect(critic.config.hiddenSize).toBe(48);
    critic.dispose();
  });

  it("names a loaded model by where it was loaded from when agentModel conflicts with agents", async () => {
    const model = await CausalLM.fromDirectory(base);
    await expect(IACTrainer.create(iac({ agentModel: model, agents: [base, base], tokenizer }))).rejects.toThrow(/agentModel \(a loaded model from ".*base"\) conflicts with agents\[0\] ".*base"/);
    model.dispose();
  });

  it("MAAC modelConfig: CoMLRL's critic_value_head_hidden_dim is honoured; a key it does not take is refused by name", async () => {
    const trainer = await MAACTrainer.create(maac({ modelConfig: { critic_value_head_hidden_dim: 5 } }));
    expect(trainer.critics[0].valueHead.info().hiddenDim).toBe(5);
    await trainer.close();
    await expect(MAACTrainer.create(maac({ modelConfig: { critic_value_head_hidden_dim: 5, criticValueHeadHiddenDim: 6 } }))).rejects.toThrow(/sets both criticValueHeadHiddenDim and critic_value_head_hidden_dim/);
    await expect(MAACTrainer.create(maac({ modelConfig: { critic_value_head_hidden_dim: 0 } }))).rejects.toThrow(/modelConfig\.critic_value_head_hidden_dim must be a positive integer/);
    await expect(MAACTrainer.create(maac({ modelConfig: illTyped({ torch_dtype: "bfloat16" }) }))).rejects.toThrow(/modelConfig\.torch_dtype is not supported by MAACTrainer \(set config\.dtype\)/);
    await expect(MAACTrainer.create(maac({ modelConfig: illTyped({ attn_implementation: "sdpa" }) }))).rejects.toThrow(/modelConfig\.attn_implementation is not supported/);
  });

  it("refuses a critic whose vocabulary cannot read its tokenizer's ids", async () => {
    const small = path.join(scratch, "small-vocab");
    await createTinyModel(small, { seed: 3, hiddenSize: 32, numLayers: 1, vocabSize: 280 });
    const big = path.join(scratch, "big-vocab");
    const bigTokenizer = await createTinyModel(big, { seed: 3, hiddenSize: 32, numLayers: 1, vocabSize: 400 });
    expect(bigTokenizer.vocabSize).toBeGreaterThan(280);
    await expect(IACTrainer.create(iac({ agentModel: big, criticModel: small }))).rejects.toThrow(/critics\[0\] has a vocabulary of \d+ tokens but reads ids of a tokenizer with \d+/);
    await expect(MAACTrainer.create(maac({ agentModel: big, criticModel: small }))).rejects.toThrow(/critics\[0\] has a vocabulary/);
  });
});

describe("rollouts and targets", () => {
  it("reward broadcast: one value for all, one per generation, or one per agent; G = N reads per generation", async () => {
    const seen: number[][][] = [];
    const make = async (rewardFunc: RewardFunction, numGenerations: number) => {
      const trainer = await IACTrainer.create(iac({ rewardFunc, config: { numGenerations } }));
      const samples = await trainer.collect([{ prompt: "x" }]);
      await trainer.close();
      seen.push([0, 1].map((agent) => samples.filter((s) => s.agent === agent).map((s) => s.environmentReward)));
      return seen.at(-1)!;
    };
    expect(await make(() => [0.5], 3)).toEqual([[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]);
    expect(await make(() => [1, 2, 3], 3)).toEqual([[1, 2, 3], [1, 2, 3]]);
    expect(await make(() => [7, 9], 3)).toEqual([[7, 7, 7], [9, 9, 9]]);
    expect(await make(() => [4, 5], 2)).toEqual([[4, 5], [4, 5]]);
    const bad = await IACTrainer.create(iac({ rewardFunc: () => [1, 2, 3, 4] }));
    await expect(bad.collect([{ prompt: "x" }])).rejects.toThrow(/returned 4 values for 2 joint actions at item 0, turn 1, joint actions 0\.\.1 \(expected 2 or 1\)/);
    await bad.close();
  });

  it("multi-turn: TD(0) targets y_t = r_t + γ·V_old(h_{t+1}), the last y_T = r_T; returns are undiscounted, as CoMLRL logs them", async () => {
    const trainer = await IACTrainer.create(
      iac({
        rewardFunc: (_c, ctx) => [ctx.turn + 1],
        externalTransition: ({ agentCompletions }) => agentCompletions.map((c) => `again: ${c}`),
        config: { numTurns: 3, numGenerations: 1, earlyTerminationThreshold: null, discount: 0.5 },
      }),
    );
    const samples = await trainer.collect([{ prompt: "go" }]);
    await trainer.close();
    expect(samples.length).toBe(2 * 3);
    expect(trainer.progress.envStep).toBe(3);
    for (const agent of [0, 1]) {
      const path_ = samples.filter((s) => s.agent === agent).sort((a, b) => a.turn - b.turn);
      expect(path_.map((s) => s.reward)).toEqual([1, 2, 3]);
      expect(path_[0].target).toBeCloseTo(1 + 0.5 * path_[1].oldValue, 6);
      expect(path_[1].target).toBeCloseTo(2 + 0.5 * path_[2].oldValue, 6);
      expect(path_[2].target).toBe(3);
      expect(path_.map((s) => s.return)).toEqual([1 + 2 + 3, 2 + 3, 3]);
      // The V critic reads the prompt alone: turn 2's prompt holds turn 1's reply.
      expect(path_[1].critic.completion.length).toBe(0);
    }
  });

  it("an episode stops early once a turn's mean reward passes the threshold", async () => {
    const trainer = await IACTrainer.create(iac({ rewardFunc: () => [1], externalTransition: () => ["a", "b"], config: { numTurns: 3, numGenerations: 1, earlyTerminationThreshold: 0.5 } }));
    const samples = await trainer.collect([{ prompt: "go" }]);
    await trainer.close();
    expect(samples.map((s) => s.turn)).toEqual([0, 0]);
  });

  it("evaluation stops early too, as CoMLRL's actor-critic evaluation rolls out like its training", async () => {
    const trainer = await IACTrainer.create(
      iac({ rewardFunc: () => [1], externalTransition: () => ["a", "b"], evalDataset: [{ prompt: "go" }], config: { numTurns: 3, numGenerations: 1, earlyTerminationThreshold: 0.5 } }),
    );
    const metrics = await trainer.evaluate();
    await trainer.close();
    expect(Object.keys(metrics).sort()).toEqual(["eval/turn_1/expected_return", "eval/turn_1/reward_mean"]);
  });

  it("reference KL is subtracted from the reward: 0 for an untouched policy, positive after it moved", async () => {
    const trainer = await IACTrainer.create(iac({ config: { referenceKlEnabled: true, referenceKlCoef: 0.25, agentLearningRate: 5e-2 } }));
    const before = await trainer.collect([{ prompt: "x" }]);
    expect(before.every((s) => s.referenceKl === 0 && s.reward === s.environmentReward)).toBe(true);
    await trainer.train();
    const after = await trainer.collect([{ prompt: "x" }]);
    expect(after.some((s) => s.referenceKl > 0)).toBe(true);
    after.forEach((s) => expect(s.reward).toBeCloseTo(s.environmentReward - 0.25 * s.referenceKl, 6));
    // IAC's references are deep copies of the agents, saved with checkpoints.
    expect(trainer.components.get("reference_0").reloadSource).toBeNull();
    await trainer.close();
  });

  it("advantages: A = y − V_old, z-scored over an update with population std", () => {
    const samples = [{ target: 1, oldValue: 0 }, { target: 0, oldValue: 1 }, { target: 2, oldValue: 0 }];
    expect(normalizedAdvantages(samples, false)).toEqual([1, -1, 2]);
    const z = normalizedAdvantages(samples, true);
    const m = 2 / 3;
    const std = Math.sqrt(((1 - m) ** 2 + (-1 - m) ** 2 + (2 - m) ** 2) / 3);
    z.forEach((v, i) => expect(v).toBeCloseTo(([1, -1, 2][i] - m) / std, 12));
  });

  it("MAAC's critic reads the joint text of §3.5, tokenized with agent 0's tokenizer", async () => {
    expect(jointCriticText(["p0", "p1"], null)).toBe("[Agent 0] p0\n\n[Agent 1] p1");
    expect(jointCriticText(["p0", "p1"], ["a", "b"])).toBe("[Agent 0] p0\n\n[Agent 1] p1\n\n[Joint Action]\n\n[Agent 0 action]\na\n\n[Agent 1 action]\nb");
    const trainer = await MAACTrainer.create(maac({ formatters: [(i) => `first ${i.prompt}`, (i) => `second ${i.prompt}`], config: { criticType: "q", numGenerations: 2 } }));
    const samples = await trainer.collect([{ prompt: "x" }]);
    for (const s of samples) {
      const g = samples.filter((o) => o.agent === s.agent).indexOf(s);
      const actions = [0, 1].map((a) => samples.filter((o) => o.agent === a)[g].completion);
      expect(s.critic.prompt).toEqual(tokenizer.encode(jointCriticText(["first x", "second x"], actions)));
    }
    // One critic: both agents' samples of a joint action share its old value.
    expect(samples.filter((s) => s.agent === 0).map((s) => s.oldValue)).toEqual(samples.filter((s) => s.agent === 1).map((s) => s.oldValue));
    await trainer.close();
  });
});

describe("updates", () => {
  it("shared heads: one backward of actor + coef · clipped value loss, one AdamW step over backbone and head", async () => {
    const trainer = await IACTrainer.create(iac({ criticModel: null, numAgents: 1, rewardFunc: (c) => c[0].map((t) => t.length), config: { useSeparateCritic: false, numAgents: 1, criticType: "q", advantageNormalization: false, valueClipRange: 0.2 } }));
    const [sample] = (await trainer.collect([{ prompt: "x" }])).slice(0, 1);
    const agent = trainer.agents[0];
    const model = await agent.model.clone();
    const { ValueHead } = await import("../../src/models/value-head.js");
    const { Optimizer } = await import("../../src/models/optimizer.js");
    const head = ValueHead.create(model, { hiddenDim: null });
    head.loadStateDict(agent.valueHead!.stateDict());
    await trainer.update([sample]);
    // By hand: A = y − V_old (one sample, no normalization); loss = −A·log π + 0.6 · max((y−V)², (y−V_clip)²).
    const a = sample.target - sample.oldValue;
    const result = await head.actorCriticBackward([sample.promptIds], [sample.completionIds], {
      advantages: [a], targets: [sample.target], valueLossCoef: 0.6, readout: "q", oldValues: [sample.oldValue], clipRange: 0.2,
    });
    const scores = await model.score([sample.promptIds], [sample.completionIds]);
    const values = await head.readout([sample.promptIds], [sample.completionIds], "q");
    const v = values[0];
    const clipped = sample.oldValue + Math.max(-0.2, Math.min(0.2, v - sample.oldValue));
    expect(result.loss).toBeCloseTo(-a * scores.sum[0] + 0.6 * Math.max((sample.target - v) ** 2, (sample.target - clipped) ** 2), 4);
    const optimizer = new Optimizer([{ module: model }, { module: head }], { lr: 1e-3 });
    await optimizer.step();
    for (const { name } of model.native.parameterNames()) expect(Array.from(agent.model.native.getParameter(name)), name).toEqual(Array.from(model.native.getParameter(name)));
    for (const { name } of head.native.parameterNames()) expect(Array.from(agent.valueHead!.native.getParameter(name)), name).toEqual(Array.from(head.native.getParameter(name)));
    optimizer.dispose();
    head.dispose();
    model.dispose();
    await trainer.close();
  });

  it('a non-finite loss is an error naming the agent, item and turn under onNonFinite "error"', async () => {
    const trainer = await IACTrainer.create(iac({ onNonFinite: "error" }));
    const model = trainer.agents[1].model;
    const real = model.policyGradientBackward.bind(model);
    vi.spyOn(model, "policyGradientBackward").mockImplementation(async (...args) => ({ ...(await real(...args)), loss: Number.NaN }));
    await expect(trainer.train()).rejects.toThrow(/^agent 1 \(agent_1\): non-finite loss \(NaN\) on the minibatch of item \d turn 1;/);
    await trainer.close();
  });

  it("a critic's non-finite value is an error naming the agent, item and turn", async () => {
    const trainer = await IACTrainer.create(iac());
    const head = trainer.critics[1].valueHead;
    const real = head.readout.bind(head);
    vi.spyOn(head, "readout").mockImplementation(async (...args) => (await real(...args)).map(() => Number.NaN));
    await expect(trainer.train()).rejects.toThrow(/^the critic of agent 1 gave a non-finite value \(NaN\) at item \d, turn 1$/);
    await trainer.close();
  });

  it('skips a non-finite loss by default (onNonFinite "skip"): said on the console, logged as a step of no samples, weights untouched by it', async () => {
    const trainer = await MAACTrainer.create(maac({ quiet: false, config: { numTrainEpochs: 1, rolloutBufferSize: 1, trainBatchSize: 1 } }));
    const model = trainer.agents[0].model;
    const real = model.policyGradientBackward.bind(model);
    let calls = 0;
    vi.spyOn(model, "policyGradientBackward").mockImplementation(async (...args) => {
      const out = await real(...args);
      return calls++ === 0 ? { ...out, loss: Number.NaN } : out;
    });
    const said = vi.spyOn(console, "error").mockImplementation(() => {});
    const before = model.native.parameterNames().map(({ name }) => Array.from(model.native.getParameter(name)));
    const step = vi.spyOn(trainer.agents[0].optimizer, "step");
    await trainer.train();
    const lines = said.mock.calls.map(([line]) => String(line));
    said.mockRestore();
    expect(lines.some((line) => /\[MAAC\] agent 0 \(agent_0\): non-finite loss \(NaN\); the minibatch of item \d turn \d skipped/.test(line))).toBe(true);
    // The skipped step carries no samples; the later ones train on.
    expect(step.mock.calls[0][0]).toMatchObject({ samples: 0 });
    const updates = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl")).filter((r) => r.kind === "update" && "agent_0/loss" in r);
    expect(updates[0]).toMatchObject({ "agent_0/samples": 0 });
    expect(Number.isFinite(updates[0]["agent_0/loss"])).toBe(false);
    const after = model.native.parameterNames().map(({ name }) => Array.from(model.native.getParameter(name)));
    expect(after.flat().every(Number.isFinite)).toBe(true);
    expect(after).not.toEqual(before);
    await trainer.close();
  });

  it("logs every actor and critic step, and the per-turn value and target means", async () => {
    const trainer = await MAACTrainer.create(maac({ config: { loggingSteps: 1 } }));
    await trainer.train();
    await trainer.close();
    const records = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl"));
    const updates = records.filter((r) => r.kind === "update");
    // 2 items × 2 generations per agent, buffers of 2: one drain per item; each agent's step is followed by a critic step.
    expect(updates.map((u) => Object.keys(u).find((k) => k.endsWith("/loss")))).toEqual(["agent_0/loss", "critic/loss", "agent_1/loss", "critic/loss", "agent_0/loss", "critic/loss", "agent_1/loss", "critic/loss"]);
    expect(records.some((r) => r.kind === "train" && typeof r["turn_1/value_mean"] === "number" && typeof r["turn_1/target_mean"] === "number")).toBe(true);
  });
});

describe("saving and continuing (COMLRL-SPEC §7.1)", () => {
  const loadHeads = (files: string[]) =>
    runPython(`import sys, json, torch\nprint(json.dumps({f: {k: list(v.shape) for k, v in torch.load(f, weights_only=True).items()} for f in sys.argv[1:]}))`, files);

  it("IAC, two agents: agent_i/ and agent_i/critic/ with value_head.pt; a new trainer continues from them with restored heads", async () => {
    const first = await IACTrainer.create(iac({ config: { criticValueHeadHiddenDim: 8 } }));
    await first.train();
    const out = path.join(scratch, "iac-saved");
    await first.saveModel(out);
    for (const f of ["agent_0/config.json", "agent_0/model.safetensors", "agent_0/tokenizer.json", "agent_1/model.safetensors", "agent_0/critic/model.safetensors", "agent_0/critic/value_head.pt", "agent_1/critic/value_head.pt"]) {
      expect(existsSync(path.join(out, f)), f).toBe(true);
    }
    expect(existsSync(path.join(out, "agent_0", "value_head.pt"))).toBe(false);
    const shapes = loadHeads([path.join(out, "agent_0", "critic", "value_head.pt")]);
    expect(Object.values(shapes)[0]).toEqual({ "pre_projection.0.weight": [8, 32], "pre_projection.0.bias": [8], "value_projection.weight": [1, 8], "value_projection.bias": [1] });
    const trainedHead = first.critics[1].valueHead.stateDict();
    const trainedActor = first.agents[1].model.native.getParameter("model.norm.weight");
    await first.close();

    const dirs = (name: string) => [0, 1].map((i) => path.join(out, `agent_${i}`, ...(name ? [name] : [])));
    const second = await IACTrainer.create(iac({ agentModel: null, agents: dirs(""), tokenizer, criticModel: null, critics: dirs("critic"), config: { criticValueHeadHiddenDim: 8 } }));
    expect(Array.from(second.agents[1].model.native.getParameter("model.norm.weight"))).toEqual(Array.from(trainedActor));
    // Backbones come back; heads are fresh until restored explicitly.
    expect(second.critics[1].valueHead.stateDict()["value_projection.weight"].data).not.toEqual(trainedHead["value_projection.weight"].data);
    second.critics[1].valueHead.loadStateDict(path.join(out, "agent_1", "critic", "value_head.pt"));
    expect(second.critics[1].valueHead.stateDict()["value_projection.weight"].data).toEqual(trainedHead["value_projection.weight"].data);
    await second.train();
    await second.close();
    // A head of another architecture is refused, naming the file and both shapes.
    const mismatched = await IACTrainer.create(iac({ critics: dirs("critic"), criticModel: null }));
    expect(() => mismatched.critics[0].valueHead.loadStateDict(path.join(out, "agent_0", "critic", "value_head.pt"))).toThrow(/agent_0\/critic\/value_head\.pt: the saved head has pre_projection\.0\.weight \[8, 32\], pre_projection\.0\.bias \[8\], value_projection\.weight \[1, 8\], value_projection\.bias \[1\]; this value head has value_projection\.weight \[1, 32\], value_projection\.bias \[1\]/);
    await mismatched.close();
  });

  it("IAC, one agent with a shared head: the actor and value_head.pt directly in the dir, beside what it held", async () => {
    const trainer = await IACTrainer.create(iac({ criticModel: null, numAgents: 1, rewardFunc: (c) => c[0].map((t) => t.length), config: { numAgents: 1, useSeparateCritic: false, valueHeadHiddenDim: 4 } }));
    await trainer.train();
    const out = path.join(scratch, "iac-single");
    const { mkdirSync, writeFileSync } = await import("node:fs");
    mkdirSync(out, { recursive: true });
    writeFileSync(path.join(out, "notes.txt"), "keep me");
    await trainer.saveModel(out);
    await trainer.close();
    for (const f of ["config.json", "model.safetensors", "tokenizer.json", "value_head.pt", "notes.txt"]) expect(existsSync(path.join(out, f)), f).toBe(true);
    expect(Object.values(loadHeads([path.join(out, "value_head.pt")]))[0]).toEqual({ "pre_projection.0.weight": [4, 32], "pre_projection.0.bias": [4], "value_projection.weight": [1, 4], "value_projection.bias": [1] });
  });

  it("MAAC: agent_i/ and critic/ with value_head.pt", async () => {
    const trainer = await MAACTrainer.create(maac({ criticModel: other, modelConfig: { criticValueHeadHiddenDim: 6 } }));
    await trainer.train();
    const out = path.join(scratch, "maac-saved");
    await trainer.saveModel(out);
    await trainer.close();
    for (const f of ["agent_0/model.safetensors", "agent_1/tokenizer.json", "critic/config.json", "critic/model.safetensors", "critic/value_head.pt"]) expect(existsSync(path.join(out, f)), f).toBe(true);
    expect(Object.values(loadHeads([path.join(out, "critic", "value_head.pt")]))[0]).toEqual({ "pre_projection.0.weight": [6, 48], "pre_projection.0.bias": [6], "value_projection.weight": [1, 6], "value_projection.bias": [1] });
  });
});
