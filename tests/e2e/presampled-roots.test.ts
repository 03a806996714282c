// MAGRPO samples the items of one rollout buffer in one generation call per agent (presampleRoots): each agent's
// call holds the buffer's prompts, every call comes before the update that drains the buffer and after the one
// before it, and each item is still rewarded on its own, in order.
import { describe, expect, it } from "vitest";
import { CausalLM } from "../../src/models/causal-lm.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { RewardFunction } from "../../src/rollout/types.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";
import { tinyRuns } from "../support/runs.js";

const runs = tinyRuns("comlrl-presampled-", (dir) => createTinyModel(dir, { seed: 7, hiddenSize: 64, numLayers: 2 }));

/** Runs one epoch and returns, in order, "generate N" (a generate() call over N prompts) and "update" events, and the prompts each reward call saw. */
async function events(config: Record<string, unknown>, items: number) {
  const log: string[] = [];
  const rewarded: string[] = [];
  const rewardFunc: RewardFunction = (completions, context) => {
    rewarded.push(String(context.item.prompt));
    return completions[0].map(() => 0.5);
  };
  const trainer = await MAGRPOTrainer.create({
    ...runs.twoAgents({ ...runs.coverVowels(items), rewardFunc }),
    config: { numTrainEpochs: 1, numGenerations: 2, maxNewTokens: 3, evalInterval: 0, seed: 3, ...config },
  });
  const generate = CausalLM.prototype.generate;
  CausalLM.prototype.generate = async function (this: CausalLM, prompts, options) {
    log.push(`generate ${prompts.length}`);
    return generate.call(this, prompts, options);
  };
  // Every optimizer step passes through the trainer's recordUpdate.
  const hooked = trainer as unknown as { recordUpdate: (component: string, update: unknown) => void };
  const record = hooked.recordUpdate.bind(trainer);
  hooked.recordUpdate = (component, update) => (log.push("update"), record(component, update));
  try {
    await trainer.train();
  } finally {
    CausalLM.prototype.generate = generate;
    await trainer.close();
  }
  return { log, rewarded };
}

describe("a rollout buffer's items in one generation call per agent", () => {
  it("single-turn: one call per agent per buffer of 2, before the buffer's updates", async () => {
    const { log, rewarded } = await events({ numTurns: 1, rolloutBufferSize: 2, trainBatchSize: 2 }, 4);
    expect(log).toEqual(["generate 2", "generate 2", "update", "update", "generate 2", "generate 2", "update", "update"]);
    expect(rewarded).toEqual(runs.coverVowels(4).trainDataset.map((item) => String(item.prompt)));
  }, 120_000);

  it("a last, partial buffer is sampled on its own; a buffer of 1 samples item by item", async () => {
    expect((await events({ numTurns: 1, rolloutBufferSize: 2, trainBatchSize: 2 }, 3)).log).toEqual(["generate 2", "generate 2", "update", "update", "generate 1", "generate 1", "update", "update"]);
    expect((await events({ numTurns: 1, rolloutBufferSize: 1, trainBatchSize: 1 }, 2)).log).toEqual(["generate 1", "generate 1", "update", "update", "generate 1", "generate 1", "update", "update"]);
  }, 120_000);
});
