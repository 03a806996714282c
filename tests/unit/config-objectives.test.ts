// The objective fields of the MAGRPO family's configs (src/config/objectives.ts): defaults that keep CoMLRL's path,
// TRL's snake_case names, per-agent lists, and errors that name the field.
import { describe, expect, it } from "vitest";
import { ConfigError, magrpoConfig } from "../../src/config/index.js";

describe("MAGRPO objective fields", () => {
  it("default to CoMLRL's on-policy path for every agent", () => {
    const c = magrpoConfig({ numAgents: 2 });
    expect(c.objectives).toHaveLength(2);
    for (const o of c.objectives) {
      expect(o).toEqual({
        lossType: "comlrl", importanceSamplingLevel: "token", numIterations: 1, epsilon: 0.2, epsilonHigh: 0.2, delta: null, klEstimator: "k3",
        klIn: "reward", useBiasCorrectionKl: true, entropyCoef: 0, scaleRewards: null, maskTruncatedCompletions: false, zeroVarianceFilter: null, advantageGrouping: "joint",
      });
    }
  });

  it("read TRL's snake_case names and per-agent lists", () => {
    const c = magrpoConfig({
      num_agents: 2, loss_type: ["dapo", "cispo"], importance_sampling_level: "sequence", num_iterations: 2, epsilon_high: [0.28, 5],
      scale_rewards: "batch", mask_truncated_completions: true, zero_variance_filter: 0, advantage_grouping: "agent_turn", entropy_coef: 0.01,
    } as never);
    expect(c.objectives.map((o) => o.lossType)).toEqual(["dapo", "cispo"]);
    expect(c.objectives.map((o) => o.epsilonHigh)).toEqual([0.28, 5]);
    expect(c.objectives[1]).toMatchObject({ importanceSamplingLevel: "sequence", numIterations: 2, scaleRewards: "batch", maskTruncatedCompletions: true, zeroVarianceFilter: 0, advantageGrouping: "agent_turn", entropyCoef: 0.01 });
  });

  const fails = (input: Record<string, unknown>, field: string, message: RegExp) => {
    let error: unknown;
    try {
      magrpoConfig({ numAgents: 2, ...input } as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).field).toBe(field);
    expect((error as Error).message).toMatch(message);
  };

  it("name the field at fault", () => {
    fails({ lossType: "ppo" }, "lossType", /MAGRPOConfig\.lossType must be one of "comlrl", "grpo"/);
    fails({ loss_type: ["grpo", "vespo"] }, "lossType", /lossType \(loss_type\) \[1\] must be one of/);
    fails({ lossType: "grpo", numIterations: 0 }, "numIterations", /numIterations must be ≥ 1/);
    fails({ lossType: "grpo", epsilon: 0.3, epsilonHigh: 0.2 }, "epsilonHigh", /epsilonHigh must be ≥ epsilon \(0\.3\), got 0\.2/);
    fails({ lossType: ["grpo", "dapo"], epsilonHigh: [0.3, 0.1] }, "epsilonHigh", /epsilonHigh \(agent 1\) must be ≥ epsilon/);
    fails({ lossType: ["grpo", "dapo", "bnpo"] }, "lossType", /has 3 values for 2 agents/);
    fails({ numIterations: 2 }, "numIterations", /must be 1 with lossType "comlrl"/);
    fails({ klIn: "loss" }, "klIn", /needs a clipped loss type/);
    fails({ lossType: "grpo", klEstimator: "k1" }, "klEstimator", /must be "k3" with klIn "reward"/);
    fails({ lossType: "grpo", delta: 0.9 }, "delta", /must be > 1/);
  });

  it("cispo's epsilonHigh is a cap on the ratio, not an upper clip ε, so it may be below epsilon", () => {
    expect(magrpoConfig({ numAgents: 1, lossType: "cispo", epsilonHigh: 0.1 } as never).objectives[0].epsilonHigh).toBe(0.1);
  });
});
