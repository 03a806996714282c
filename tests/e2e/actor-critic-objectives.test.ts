// The MAGRPO family's objectives on actor-critic actors (docs/objectives.md): IAC and MAAC actors trained through the
// shared policy loss (src/trainers/policy-loss.ts) with the critic's advantages under TRL's clipped-ratio losses, over
// several passes per rollout with the sampler's log-probs as the old ones; the MAGRPO family's group-advantage fields
// not fields of theirs; CoMLRL's loss the default.
import path from "node:path";
import { describe, expect, it } from "vitest";
import { iacConfig, maacConfig, type IACConfigInput, type MAACConfigInput } from "../../src/config/index.js";
import { readJsonlMetrics, type JsonlRecord } from "../../src/logging/jsonl.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { RewardFunction } from "../../src/rollout/types.js";
import { IACTrainer } from "../../src/trainers/actor-critic/iac.js";
import type { ActorCriticOptions } from "../../src/trainers/actor-critic/learner.js";
import { MAACTrainer } from "../../src/trainers/actor-critic/maac.js";
import { tinyRuns } from "../support/runs.js";
import { illTyped } from "../support/ill-typed.js";

const runs = tinyRuns("comlrl-ac-objectives-", (dir) => createTinyModel(dir, { seed: 17, hiddenSize: 32, numLayers: 1, vocabSize: 300 }));
const lengths: RewardFunction = (completions) => completions[0].map((a, j) => (a.length + completions[1][j].length) / 10);

/** Fields both IAC and MAAC take, so that one options builder serves both trainers. */
type SharedConfig = IACConfigInput & MAACConfigInput;

function options(config: SharedConfig): ActorCriticOptions<SharedConfig> {
  return {
    agentModel: runs.base,
    criticModel: runs.base,
    numAgents: 2,
    rewardFunc: lengths,
    trainDataset: [{ prompt: "one" }, { prompt: "two" }],
    outputDir: runs.dir("run"),
    quiet: true,
    config: { numTurns: 1, numTrainEpochs: 1, numGenerations: 2, maxNewTokens: 4, temperature: 1, topP: 1, topK: 0, rolloutBufferSize: 2, evalInterval: 0, agentLearningRate: 1e-3, criticLearningRate: 1e-3, seed: 1, ...config },
  };
}

const ACTOR = "model.layers.0.mlp.up_proj.weight";
const values = (records: JsonlRecord[], key: string) => records.map((r) => r[key]).filter((v): v is number => typeof v === "number");

async function train(trainer: IACTrainer | MAACTrainer) {
  const before = trainer.agents.map((a) => Array.from(a.model.native.getParameter(ACTOR)));
  await trainer.train();
  const moved = trainer.agents.map((a, i) => Array.from(a.model.native.getParameter(ACTOR)).some((x, j) => x !== before[i][j]));
  await trainer.close();
  const updates = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl")).filter((r) => r.kind === "update");
  return { updates, moved, steps: trainer.learner.policySteps };
}

describe("clipped-ratio actors in IAC and MAAC", () => {
  it("IAC (grpo, 2 passes): finite losses, moved actors, clip metrics, the sampler's log-probs agreeing on the first pass and drifting after", async () => {
    const { updates, moved, steps } = await train(await IACTrainer.create(options({ lossType: "grpo", numIterations: 2, epsilonHigh: 0.28 })));
    expect(moved).toEqual([true, true]);
    expect(values(updates, "agent_0/loss").every(Number.isFinite)).toBe(true);
    expect(values(updates, "agent_1/objective/clip_ratio/high_mean").length).toBeGreaterThan(0);
    const mismatch = values(updates, "agent_0/mismatch/mean_abs_logp_diff");
    expect(mismatch.length).toBeGreaterThan(0);
    for (const m of mismatch) expect(m).toBeLessThanOrEqual(1e-5);
    expect(Math.max(...values(updates, "agent_0/drift/max_abs_logp_diff"))).toBeGreaterThan(1e-6);
    // Two items of two completions per agent, one minibatch of each item's two samples, twice: four actor steps.
    expect(steps).toEqual([4, 4]);
    // Each pass steps the critic too.
    expect(values(updates, "agent_0/critic/loss")).toHaveLength(4);
  }, 120_000);

  it("IAC under CoMLRL's loss (the default) takes one pass and logs no objective metrics", async () => {
    const { updates, steps } = await train(await IACTrainer.create(options({})));
    expect(steps).toEqual([2, 2]);
    expect(values(updates, "agent_0/objective/policy_loss")).toEqual([]);
  }, 120_000);

  it("MAAC (dapo, per-agent: agent 1 keeps CoMLRL's loss) trains both actors", async () => {
    const { updates, moved } = await train(await MAACTrainer.create({ ...options({ lossType: ["dapo", "comlrl"], epsilonHigh: 0.28 }), criticModel: runs.base }));
    expect(moved).toEqual([true, true]);
    expect(values(updates, "agent_0/objective/policy_loss").length).toBeGreaterThan(0);
    expect(values(updates, "agent_1/objective/policy_loss")).toEqual([]);
  }, 120_000);
});

describe("actor-critic objective fields", () => {
  it("default to CoMLRL's loss for every actor, take TRL's snake_case names and one value per agent", () => {
    expect(iacConfig({ numAgents: 2 }).objectives.map((o) => o.lossType)).toEqual(["comlrl", "comlrl"]);
    expect(maacConfig({ numAgents: 2, loss_type: ["grpo", "dapo"], num_iterations: 2 }).objectives.map((o) => [o.lossType, o.numIterations])).toEqual([["grpo", 2], ["dapo", 2]]);
    // A built config builds again; its derived objectives must agree with its fields.
    const built = iacConfig({ numAgents: 1, lossType: "cispo", epsilonHigh: 5 });
    expect(iacConfig(built)).toEqual(built);
    expect(() => iacConfig({ ...built, lossType: "grpo" })).toThrow(/IACConfig\.objectives is derived from the objective fields/);
  });

  it("refuse by name what the critic's advantages or the shared head cannot take", () => {
    // The group-advantage fields and the KL-in-the-loss ones are the MAGRPO family's: not fields of an actor-critic config.
    expect(() => iacConfig(illTyped({ scaleRewards: "group" }))).toThrow(/IACConfig has no field "scaleRewards"/);
    expect(() => maacConfig(illTyped({ zero_variance_filter: 0 }))).toThrow(/MAACConfig has no field "zero_variance_filter"/);
    expect(() => iacConfig(illTyped({ klIn: "loss" }))).toThrow(/IACConfig has no field "klIn"/);
    expect(() => iacConfig({ lossType: "grpo", useSeparateCritic: false })).toThrow(/IACConfig\.lossType needs separate critics/);
    expect(() => iacConfig({ maskTruncatedCompletions: true, useSeparateCritic: false })).toThrow(/IACConfig\.maskTruncatedCompletions needs separate critics/);
    expect(() => iacConfig({ numIterations: 2 })).toThrow(/IACConfig\.numIterations must be 1 with lossType "comlrl"/);
  });
});
