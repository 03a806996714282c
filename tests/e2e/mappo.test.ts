// MAPPO end to end on tiny models made here: its config and errors, numIterations passes per update, every objective
// of the MAGRPO family, the clipped value loss, GAE(λ) targets over a multi-turn episode by hand, and per-agent
// critics, their resume included. With its centralized critic MAPPO is in the house's suites through its registry
// entry (exact resume, CPU lanes); the comparison with MAAC over seeds is in tests/e2e/actor-critic-learning.test.ts.
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { mappoConfig } from "../../src/index.js";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { MAPPOTrainer, type MAPPOTrainerOptions } from "../../src/trainers/actor-critic/mappo.js";
import { smallActorCriticRun } from "../support/actor-critic-run.js";
import { illTyped } from "../support/ill-typed.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-mappo-"));
const base = path.join(scratch, "base");
beforeAll(async () => {
  await createTinyModel(base, { seed: 17, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
});

function mappo(overrides: Partial<MAPPOTrainerOptions> = {}): MAPPOTrainerOptions {
  return smallActorCriticRun(base, scratch, overrides);
}

/** Every weight of the trainer's actors and critics. */
function weights(trainer: MAPPOTrainer): Float32Array[] {
  const modules = [...trainer.agents.map((a) => a.model.native), ...trainer.critics.flatMap((c) => [c.model.native, c.valueHead.native])];
  return modules.flatMap((m) => m.parameterNames().map(({ name }) => m.getParameter(name)));
}

function updates(trainer: MAPPOTrainer): Array<Record<string, unknown>> {
  return readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl")).filter((r) => r.kind === "update");
}

async function trained(options: MAPPOTrainerOptions): Promise<MAPPOTrainer> {
  const trainer = await MAPPOTrainer.create(options);
  await trainer.train();
  await trainer.close();
  return trainer;
}

describe("config", () => {
  it("PPO's defaults; MAAC's fields and the actors' objective fields; errors name the field", () => {
    expect(mappoConfig()).toMatchObject({ lossType: "dapo", numIterations: 4, epsilon: 0.2, gaeLambda: 0.95, valueClipRange: 0.2, centralizedCritic: true, criticType: "v", discount: 1 });
    expect(mappoConfig({ gae_lambda: 0.5, loss_type: "grpo" })).toMatchObject({ gaeLambda: 0.5, lossType: "grpo" });
    expect(() => mappoConfig({ gaeLambda: 1.5 })).toThrow(/MAPPOConfig\.gaeLambda must be ≤ 1/);
    expect(() => mappoConfig({ lossType: "comlrl" })).toThrow(/MAPPOConfig\.numIterations must be 1 with lossType "comlrl"/);
    expect(() => mappoConfig({ lossType: ["grpo", "sapo", "dapo"], numAgents: 2 })).toThrow(/MAPPOConfig\.lossType has 3 values for 2 agents/);
    // Group baselines are GRPO's; MAPPO's advantages are the critic's.
    expect(() => mappoConfig(illTyped({ scaleRewards: "group" }))).toThrow(/scaleRewards/);
    // The reference KL is in the reward the critic learns, as IAC's and MAAC's.
    expect(() => mappoConfig(illTyped({ klIn: "loss" }))).toThrow(/klIn/);
    expect(() => mappoConfig({ parallelTraining: "mp" })).toThrow(/MAPPOConfig\.agentDevices must be set/);
    expect(() => mappoConfig({ criticDevices: ["cpu", "cpu"] })).toThrow(/MAPPOConfig\.criticDevices must name one device with centralizedCritic/);
    expect(mappoConfig({ criticDevices: ["cpu", "cpu"], centralizedCritic: false }).criticDevices).toEqual(["cpu", "cpu"]);
  });

  it("refuses a run whose critics are missing, by name", async () => {
    await expect(MAPPOTrainer.create(mappo({ criticModel: null }))).rejects.toThrow(/Either criticModel or critics must be provided for MAPPO/);
    await expect(MAPPOTrainer.create(mappo({ criticModel: null, critics: [base], config: { centralizedCritic: false } }))).rejects.toThrow(/critics length \(1\) must match numAgents \(2\)/);
  });
});

describe("updates", () => {
  it("numIterations passes over each update: one actor and one critic step per minibatch per pass", async () => {
    // 2 items, buffers of 2 samples (one item's 2 completions), minibatches of 1: per agent and item, 2 minibatches.
    const counts = async (numIterations: number) => {
      const trainer = await trained(mappo({ config: { numIterations, trainBatchSize: 1 } }));
      const steps = updates(trainer);
      return [steps.filter((u) => "agent_0/loss" in u).length, steps.filter((u) => "critic/loss" in u).length];
    };
    expect(await counts(1)).toEqual([2 * 2, 2 * 2 * 2]);
    expect(await counts(3)).toEqual([3 * 2 * 2, 3 * 2 * 2 * 2]);
  });

  it.each(["comlrl", "grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo"] as const)("lossType %s trains the actors", async (lossType) => {
    const trainer = await MAPPOTrainer.create(mappo({ config: { lossType, numIterations: lossType === "comlrl" ? 1 : 2, entropyCoef: lossType === "comlrl" ? 0 : 0.01 } }));
    const before = weights(trainer).slice(0, 1);
    await trainer.train();
    const after = weights(trainer).slice(0, 1);
    await trainer.close();
    expect(after[0]).not.toEqual(before[0]);
    for (const u of updates(trainer)) for (const [key, value] of Object.entries(u)) if (key.endsWith("/loss")) expect(Number.isFinite(value), key).toBe(true);
  });

  it("the critic's value clip: a range no value leaves trains as no clip does; a tight one changes the critic", async () => {
    const critic = async (valueClipRange: number | null) => {
      const trainer = await MAPPOTrainer.create(mappo({ config: { valueClipRange, numIterations: 3, criticLearningRate: 5e-2 } }));
      await trainer.train();
      const head = weights(trainer).slice(-2);
      await trainer.close();
      return head;
    };
    // The clipped loss takes another kernel path (its max over the two squared errors), so libtorch versions may
    // round its gradient an ulp apart from the plain one: equal within float32 rounding, not bit for bit.
    const largestChange = (heads: Float32Array[], from: Float32Array[]) => Math.max(...heads.flatMap((head, i) => [...head].map((w, j) => Math.abs(w - from[i]![j]!))));
    const unclipped = await critic(null);
    expect(largestChange(await critic(1e6), unclipped)).toBeLessThan(1e-6);
    expect(largestChange(await critic(1e-4), unclipped)).toBeGreaterThan(1e-3);
  });
});

describe("targets", () => {
  it("multi-turn: y_t = r_t + γ((1 − λ)V_{t+1} + λ y_{t+1}), the last turn's its reward; y − V_old is GAE's advantage", async () => {
    const trainer = await MAPPOTrainer.create(
      mappo({ externalTransition: () => ["more", "more"], config: { numTurns: 3, numGenerations: 1, discount: 0.9, gaeLambda: 0.7, earlyTerminationThreshold: null } }),
    );
    const samples = await trainer.collect([{ prompt: "x" }]);
    await trainer.close();
    for (const agent of [0, 1]) {
      const [s0, s1, s2] = samples.filter((s) => s.agent === agent).sort((a, b) => a.turn - b.turn);
      expect(s2.target).toBe(s2.reward);
      expect(s1.target).toBeCloseTo(s1.reward + 0.9 * (0.3 * s2.oldValue + 0.7 * s2.target), 12);
      expect(s0.target).toBeCloseTo(s0.reward + 0.9 * (0.3 * s1.oldValue + 0.7 * s1.target), 12);
      // The centralized critic reads the joint text: both agents' samples of a turn share its value.
      expect(s0.oldValue).toBe(samples.find((s) => s.agent === 1 - agent && s.turn === 0)!.oldValue);
    }
  });
});

describe("critics", () => {
  it("per-agent Q critics: each agent's own, read on its prompt and completion, registered as critic_i", async () => {
    const trainer = await MAPPOTrainer.create(mappo({ config: { centralizedCritic: false, criticType: "q" } }));
    expect(trainer.critics).toHaveLength(2);
    expect(trainer.components.get("critic_1").name).toBe("critic_1");
    const samples = await trainer.collect([{ prompt: "x" }]);
    for (const s of samples) expect(Array.from(s.critic.completion)).toEqual(Array.from(s.completionIds));
    await trainer.train();
    await trainer.close();
    expect(updates(trainer).some((u) => "critic_1/loss" in u)).toBe(true);
  });

  it("per-agent critics resume from a checkpoint to the weights of an uninterrupted run", async () => {
    const config = { centralizedCritic: false, numTrainEpochs: 2, numIterations: 2 };
    const straight = await MAPPOTrainer.create(mappo({ config }));
    await straight.train();
    const expected = weights(straight);
    await straight.close();
    const outputDir = path.join(scratch, "resumed");
    const first = await MAPPOTrainer.create(mappo({ outputDir, config: { ...config, numTrainEpochs: 1 } }));
    await first.train({ checkpointDir: path.join(outputDir, "checkpoints") });
    await first.close();
    const resumed = await MAPPOTrainer.create(mappo({ outputDir, config }));
    await resumed.train({ checkpointDir: path.join(outputDir, "checkpoints"), resumeFromCheckpoint: "latest" });
    expect(weights(resumed)).toEqual(expected);
    await resumed.close();
    // It resumed rather than started over: its own log holds the second epoch's updates alone.
    const [resumeDir] = readdirSync(outputDir).filter((name) => name.startsWith("resume-"));
    const logged = readJsonlMetrics(path.join(outputDir, resumeDir, "metrics.jsonl")).filter((r) => r.kind === "update");
    expect(logged.length).toBe(updates(straight).length / 2);
  });
});
