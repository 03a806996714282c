// GAE(λ) targets of the actor-critic samples, by hand: the λ-return G_t = r_t + γ·((1 − λ)·V_{t+1} + λ·G_{t+1}) whose
// G_t − V_t is the GAE advantage Σ_k (γλ)^k δ_{t+k}; λ = 0 is IAC's and MAAC's TD(0) target bit for bit, λ = 1 the
// discounted return. verl's own compute_gae_advantage_return is the golden (tests/golden/verl.test.ts).
import { describe, expect, it } from "vitest";
import type { RolloutNode } from "../../src/rollout/tree.js";
import { actorCriticSamples, lambdaReturns } from "../../src/trainers/actor-critic/samples.js";

const REWARDS = [1, 2, 4];
const VALUES = [0.5, 0.25, 1];

describe("λ-returns", () => {
  it("γ 0.5, λ 0.5: δ = (0.625, 2.25, 3), A = (1.375, 3, 3), targets A + V", () => {
    // δ_t = r_t + γ·V_{t+1} − V_t; A_t = δ_t + γλ·A_{t+1}; every figure a binary fraction, so exact.
    expect(lambdaReturns(REWARDS, VALUES, 0.5, 0.5)).toEqual([1.375 + 0.5, 3 + 0.25, 3 + 1]);
  });

  it("λ 0 is the TD(0) target r_t + γ·V_{t+1}, and the last turn's is its reward", () => {
    const rewards = [0.1, -0.7, 0.3];
    const values = [0.37, -0.41, 1.9];
    expect(lambdaReturns(rewards, values, 0.9, 0)).toEqual([0.1 + 0.9 * -0.41, -0.7 + 0.9 * 1.9, 0.3]);
  });

  it("λ 1 is the discounted return, whatever the values", () => {
    expect(lambdaReturns(REWARDS, VALUES, 0.5, 1)).toEqual([1 + 0.5 * (2 + 0.5 * 4), 2 + 0.5 * 4, 4]);
    expect(lambdaReturns(REWARDS, [9, -9, 9], 0.5, 1)).toEqual(lambdaReturns(REWARDS, VALUES, 0.5, 1));
  });

  it("an episode of one turn: its reward", () => {
    expect(lambdaReturns([0.75], [3], 0.99, 0.95)).toEqual([0.75]);
  });
});

describe("actor-critic samples take the λ-return as their target", () => {
  const node = (turn: number, reward: number, child: RolloutNode | null): RolloutNode => ({
    turn, prompts: ["p"], historyPrompts: ["p"], promptIds: [[1]], completionIds: [[Int32Array.from([2])]], texts: [["x"]],
    referenceKl: [[0]], jointActions: [[0]], rewards: [reward], agentRewards: null, returns: [reward], children: [child], envStep: turn + 1,
    promptHistory: [["p"]], responseHistory: [["x"]],
  });
  const root = node(0, REWARDS[0], node(1, REWARDS[1], node(2, REWARDS[2], null)));
  const critics = { shared: false, row: () => ({ prompt: [1], completion: Int32Array.from([2]) }), values: async () => VALUES };

  it("y − V_old is the GAE advantage; the logged return stays undiscounted", async () => {
    const samples = await actorCriticSamples(root, 0, critics, { numAgents: 1, discount: 0.5, referenceKlCoef: 0, gaeLambda: 0.5 });
    expect(samples.map((s) => s.target - s.oldValue)).toEqual([1.375, 3, 3]);
    expect(samples.map((s) => s.return)).toEqual([7, 6, 4]);
  });

  it("the rollout's recorded log-probs of each completion travel with its sample", async () => {
    const logprobs = Float32Array.from([-0.5]);
    const recorded = { ...root, samplerLogprobs: [{ policy: [logprobs], processed: [logprobs], updates: 0 }] };
    const [first] = await actorCriticSamples(recorded, 0, critics, { numAgents: 1, discount: 1, referenceKlCoef: 0, gaeLambda: 0 });
    expect(first.sampled).toEqual({ logprobs, policySteps: 0 });
    const [unrecorded] = await actorCriticSamples(root, 0, critics, { numAgents: 1, discount: 1, referenceKlCoef: 0, gaeLambda: 0 });
    expect(unrecorded.sampled).toBeUndefined();
  });
});
