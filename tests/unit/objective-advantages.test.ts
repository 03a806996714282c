// The advantages of the objectives (src/rollout/advantages.ts, docs/objectives.md): the team groupings joint / agent
// / agent_turn, TRL's reward scaling group / batch / none, the KL in the reward or the loss, the zero-variance filter,
// and the policy loss's truncation test (src/trainers/policy-loss.ts), each against numbers worked out by hand here.
import { describe, expect, it } from "vitest";
import { magrpoConfig } from "../../src/config/index.js";
import type { AgentObjective } from "../../src/config/objectives.js";
import type { NodeSample } from "../../src/rollout/types.js";
import { updateAdvantages, type AdvantageSettings } from "../../src/rollout/advantages.js";
import { isTruncated } from "../../src/trainers/policy-loss.js";

const settings: AdvantageSettings = { advantageMode: "mean", advantageNormalization: false, referenceKlEnabled: false, referenceKlCoef: 0 };

function objective(fields: Record<string, unknown>): AgentObjective {
  return magrpoConfig({ numAgents: 1, lossType: "grpo", ...fields }).objectives[0];
}

function sample(turn: number, returns: number[], referenceKl = returns.map(() => 0)): NodeSample {
  return {
    agent: 0, turn, promptIds: [1], completionIds: returns.map(() => Int32Array.from([2])), returns, referenceKl, nodeMeanReward: 0, nodeMeanReturn: 0, envStep: 0,
  };
}

// Two nodes at turn 0 and one at turn 1, K = 2 each.
const a = sample(0, [1, 3]);
const b = sample(0, [0, 0.5]);
const c = sample(1, [2, 6]);
const samples = [a, b, c];
// Sample std (Bessel, as TRL's nanstd) plus TRL's 1e-4.
const sampleStd = (xs: number[]) => {
  const m = xs.reduce((s, x) => s + x, 0) / xs.length;
  return Math.sqrt(xs.reduce((s, x) => s + (x - m) ** 2, 0) / (xs.length - 1));
};

function expectClose(actual: readonly number[] | undefined, expected: number[]) {
  expect(actual).toBeDefined();
  expect(actual!.length).toBe(expected.length);
  actual!.forEach((x, i) => expect(x).toBeCloseTo(expected[i], 10));
}

describe("advantage groupings", () => {
  it("joint: each node's K completions are one group (scaleRewards none: R − mean of the node)", () => {
    const { of } = updateAdvantages(samples, objective({ scaleRewards: "none", advantageGrouping: "joint" }), settings);
    expectClose(of.get(a), [-1, 1]);
    expectClose(of.get(b), [-0.25, 0.25]);
    expectClose(of.get(c), [-2, 2]);
  });

  it("agent: every completion of the agent's update is one group (mean of all six returns: 12.5 / 6)", () => {
    const m = 12.5 / 6;
    const { of } = updateAdvantages(samples, objective({ scaleRewards: "none", advantageGrouping: "agent" }), settings);
    expectClose(of.get(a), [1 - m, 3 - m]);
    expectClose(of.get(b), [0 - m, 0.5 - m]);
    expectClose(of.get(c), [2 - m, 6 - m]);
  });

  it("agent_turn: the agent's completions of one turn are one group (turn 0: mean 1.125; turn 1: mean 4)", () => {
    const { of } = updateAdvantages(samples, objective({ scaleRewards: "none", advantageGrouping: "agent_turn" }), settings);
    expectClose(of.get(a), [1 - 1.125, 3 - 1.125]);
    expectClose(of.get(b), [0 - 1.125, 0.5 - 1.125]);
    expectClose(of.get(c), [-2, 2]);
  });

  it("scaleRewards null keeps CoMLRL's advantages of the group (advantageMode max: R − max)", () => {
    const { of } = updateAdvantages(samples, objective({ scaleRewards: null, advantageGrouping: "agent_turn" }), { ...settings, advantageMode: "max" });
    expectClose(of.get(a), [-2, 0]);
    expectClose(of.get(b), [-3, -2.5]);
    expectClose(of.get(c), [-4, 0]);
  });

  it("a grouping that leaves a group of one completion is refused by name", () => {
    expect(() => updateAdvantages([sample(0, [1])], objective({ advantageGrouping: "joint" }), settings)).toThrow(/advantageGrouping "joint" left a group of one completion/);
    expect(() => updateAdvantages([sample(0, [1, 2]), sample(1, [3])], objective({ advantageGrouping: "agent_turn" }), settings)).toThrow(/advantageGrouping "agent_turn" left a group of one/);
    // The same completions in one group of three have a baseline.
    expect(() => updateAdvantages([sample(0, [1, 2]), sample(1, [3])], objective({ advantageGrouping: "agent" }), settings)).not.toThrow();
  });
});

describe("reward scaling", () => {
  it("group: (R − mean) / (std of the group + 1e-4)", () => {
    const { of } = updateAdvantages(samples, objective({ scaleRewards: "group" }), settings);
    expectClose(of.get(a), [-1 / (sampleStd([1, 3]) + 1e-4), 1 / (sampleStd([1, 3]) + 1e-4)]);
    expectClose(of.get(c), [-2 / (sampleStd([2, 6]) + 1e-4), 2 / (sampleStd([2, 6]) + 1e-4)]);
  });

  it("batch: (R − mean of the group) / (std of every completion of the update + 1e-4)", () => {
    const s = sampleStd([1, 3, 0, 0.5, 2, 6]) + 1e-4;
    const { of } = updateAdvantages(samples, objective({ scaleRewards: "batch" }), settings);
    expectClose(of.get(a), [-1 / s, 1 / s]);
    expectClose(of.get(b), [-0.25 / s, 0.25 / s]);
    expectClose(of.get(c), [-2 / s, 2 / s]);
  });
});

describe("the reference KL in the reward or in the loss", () => {
  const withKl = sample(0, [1, 3], [2, 0]);
  const kl = { ...settings, referenceKlEnabled: true, referenceKlCoef: 0.5 };

  it('klIn "reward": the returns are shaped R − coef · KL before the baseline', () => {
    // Shaped returns 1 − 1 = 0 and 3 − 0 = 3: advantages ∓1.5.
    expectClose(updateAdvantages([withKl], objective({ scaleRewards: "none", klIn: "reward" }), kl).of.get(withKl), [-1.5, 1.5]);
  });

  it('klIn "loss": the returns are not shaped (the KL is a loss term instead)', () => {
    expectClose(updateAdvantages([withKl], objective({ scaleRewards: "none", klIn: "loss" }), kl).of.get(withKl), [-1, 1]);
  });
});

describe("the zero-variance filter", () => {
  it("skips the nodes whose returns' population std is at most the threshold, and counts them", () => {
    const flat = sample(0, [2, 2]);
    const small = sample(0, [1, 1.2]); // population std 0.1
    const update = updateAdvantages([flat, small, a], objective({ scaleRewards: "none", advantageGrouping: "agent", zeroVarianceFilter: 0.1 }), settings);
    expect(update.groups).toBe(3);
    expect(update.filtered).toBe(2);
    expect(update.of.has(flat)).toBe(false);
    expect(update.of.has(small)).toBe(false);
    // Skipped nodes count in no group: the baseline is the kept node's mean alone.
    expectClose(update.of.get(a), [-1, 1]);
  });
});

describe("truncated completions", () => {
  it("are those that reach maxNewTokens without a stop id at the end", () => {
    expect(isTruncated(Int32Array.from([5, 6, 7]), 3, [0, 1])).toBe(true);
    expect(isTruncated(Int32Array.from([5, 6, 0]), 3, [0, 1])).toBe(false);
    expect(isTruncated(Int32Array.from([5, 1]), 3, [0, 1])).toBe(false);
    expect(isTruncated(Int32Array.from([5, 6]), 3, [0, 1])).toBe(false);
  });
});
