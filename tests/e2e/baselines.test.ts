// MAGRPO's baselines at trainer level: with advantage normalization off, the four advantage modes train to four
// different models; with it on (the default), z-scoring makes them train identically (COMLRL-SPEC §3.3).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { RewardFunction } from "../../src/rollout/types.js";
import { MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer } from "../../src/trainers/reinforce/baselines.js";
import { MAGRPOTrainer, type MAGRPOTrainerOptions } from "../../src/trainers/reinforce/magrpo.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-baselines-"));
const base = path.join(scratch, "base");
beforeAll(async () => {
  await createTinyModel(base, { seed: 13, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
});

// Varied, all-positive rewards, so that raw returns, max and leave-one-out baselines all move the weights differently.
const reward: RewardFunction = (completions) => completions[0].map((a, j) => 1 + a.length + 0.5 * completions[1][j].length);

const KINDS = {
  MAGRPO: (o: MAGRPOTrainerOptions) => MAGRPOTrainer.create(o),
  MAREINFORCE: (o: MAGRPOTrainerOptions) => MAREINFORCETrainer.create(o),
  MAReMax: (o: MAGRPOTrainerOptions) => MAReMaxTrainer.create(o),
  MARLOO: (o: MAGRPOTrainerOptions) => MARLOOTrainer.create(o),
};

async function trainedWeights(kind: keyof typeof KINDS, advantageNormalization: boolean): Promise<string> {
  const trainer = await KINDS[kind]({
    agents: [base, base],
    rewardFunc: reward,
    trainDataset: [{ prompt: "one" }, { prompt: "two" }],
    outputDir: path.join(scratch, `${kind}-${advantageNormalization}`),
    quiet: true,
    config: { numTurns: 1, numTrainEpochs: 1, numGenerations: 3, maxNewTokens: 4, temperature: 1, topP: 1, topK: 0, evalInterval: 0, agentLearningRate: 1e-2, weightDecay: 0, seed: 2, advantageNormalization },
  });
  expect(trainer.config.advantageMode).toBe({ MAGRPO: "mean", MAREINFORCE: "raw", MAReMax: "max", MARLOO: "rloo" }[kind]);
  await trainer.train();
  const weights = trainer.agents.map((a) => Buffer.from(a.model.native.getParameter("model.layers.0.mlp.up_proj.weight").buffer).toString("base64")).join();
  await trainer.close();
  return weights;
}

describe("baselines at trainer level", () => {
  it("without advantage normalization the four modes train four different models", async () => {
    const weights = await Promise.all((Object.keys(KINDS) as (keyof typeof KINDS)[]).map((k) => trainedWeights(k, false)));
    expect(new Set(weights).size).toBe(4);
  });

  it("with it (the default) they train the same model", async () => {
    const weights = await Promise.all((Object.keys(KINDS) as (keyof typeof KINDS)[]).map((k) => trainedWeights(k, true)));
    expect(new Set(weights).size).toBe(1);
  });
});
