// The small actor-critic runs the end-to-end tests share: two agents and their critics on one tiny model, a reward
// that grows with both completions' lengths, two items, one epoch of two completions each.
import path from "node:path";
import type { RewardFunction } from "../../src/rollout/types.js";
import type { ActorCriticOptions } from "../../src/trainers/actor-critic/learner.js";

const lengths: RewardFunction = (completions) => completions[0].map((a, j) => (a.length + completions[1][j].length) / 10);

/** Options of a run on `base` writing under `scratch`; `overrides.config` is laid over the run's config. */
export function smallActorCriticRun<C extends object>(base: string, scratch: string, overrides: Partial<ActorCriticOptions<C>> = {}): ActorCriticOptions<C> {
  const config = { numTurns: 1, numTrainEpochs: 1, numGenerations: 2, maxNewTokens: 4, temperature: 1, topP: 1, topK: 0, rolloutBufferSize: 2, evalInterval: 0, agentLearningRate: 1e-3, criticLearningRate: 1e-3, seed: 1 };
  return {
    agentModel: base,
    criticModel: base,
    numAgents: 2,
    rewardFunc: lengths,
    trainDataset: [{ prompt: "one" }, { prompt: "two" }],
    outputDir: path.join(scratch, `run-${Math.random().toString(36).slice(2)}`),
    quiet: true,
    ...overrides,
    // Every trainer's config input takes these fields; C is the config input of the trainer under test.
    config: { ...config, ...overrides.config } as C,
  };
}
