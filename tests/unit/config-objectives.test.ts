// The objective fields of the MAGRPO family's configs (src/config/objectives.ts): defaults that keep CoMLRL's path,
// TRL's snake_case names, per-agent lists, and errors that name the field.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, magrpoConfig, marlhfConfig, marlhfIterConfig } from "../../src/config/index.js";
import { loadTrainConfig } from "../../src/cli/config-file.js";
import { trainerDefinition } from "../../src/trainers/builtins.js";
import { illTyped } from "../support/ill-typed.js";

const fails = (input: Record<string, unknown>, field: string, message: RegExp, build: (input: never) => unknown = magrpoConfig) => {
  let error: unknown;
  try {
    build(illTyped({ numAgents: 2, ...input }));
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as ConfigError).field).toBe(field);
  expect((error as Error).message).toMatch(message);
};

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
    });
    expect(c.objectives.map((o) => o.lossType)).toEqual(["dapo", "cispo"]);
    expect(c.objectives.map((o) => o.epsilonHigh)).toEqual([0.28, 5]);
    expect(c.objectives[1]).toMatchObject({ importanceSamplingLevel: "sequence", numIterations: 2, scaleRewards: "batch", maskTruncatedCompletions: true, zeroVarianceFilter: 0, advantageGrouping: "agent_turn", entropyCoef: 0.01 });
  });


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
    expect(magrpoConfig({ numAgents: 1, lossType: "cispo", epsilonHigh: 0.1 }).objectives[0].epsilonHigh).toBe(0.1);
  });

  it("a path that records no log-probs: numIterations > 1 with lossType comlrl is refused by name", () => {
    fails({ lossType: ["grpo", "comlrl"], numIterations: [2, 2] }, "numIterations", /numIterations \(agent 1\) must be 1 with lossType "comlrl"/);
  });
});

describe("MARLHF's RL phase objective", () => {
  it("takes the objective fields and rlNumIterations (rl_num_iterations), per agent, checked when the config is built", () => {
    const c = marlhfConfig({ numAgents: 2, loss_type: "dapo", rl_num_iterations: [2, 3], epsilon_high: 0.28 });
    expect([c.lossType, c.rlNumIterations, c.epsilonHigh]).toEqual(["dapo", [2, 3], 0.28]);
    expect(marlhfConfig().rlNumIterations).toBe(1);
    // MARLHFIter keeps numIterations for its rounds and takes rlNumIterations beside it.
    const iter = marlhfIterConfig({ numIterations: 3, lossType: "grpo", rlNumIterations: 2 });
    expect([iter.numIterations, iter.rlNumIterations]).toEqual([3, 2]);
  });

  it("names MARLHF's field at fault", () => {
    fails({ rlNumIterations: 2 }, "rlNumIterations", /MARLHFConfig\.rlNumIterations must be 1 with lossType "comlrl"/, marlhfConfig);
    fails({ lossType: "grpo", rlNumIterations: 0 }, "rlNumIterations", /rlNumIterations must be ≥ 1/, marlhfConfig);
    fails({ lossType: "dapo", epsilon: 0.3, epsilonHigh: 0.2 }, "epsilonHigh", /MARLHFConfig\.epsilonHigh must be ≥ epsilon/, marlhfConfig);
    fails({ lossType: "ppo" }, "lossType", /MARLHFConfig\.lossType must be one of/, marlhfConfig);
    fails({ lossType: ["grpo", "dapo", "bnpo"] }, "lossType", /has 3 values for 2 agents/, marlhfConfig);
    // A back-end whose learner has no objective fields takes MARLHF's at their defaults (the trainer's check, as a config file's run makes it).
    const marlhfRun = (input: never) => trainerDefinition("marlhf").config(input, {});
    fails({ rlAlgorithm: "iac", numGenerations: 1, klEstimator: "k1" }, "klEstimator", /MARLHFConfig\.klEstimator has no effect with rlAlgorithm "iac", whose learner has no klEstimator/, marlhfRun);
    fails({ rlAlgorithm: "maac", numGenerations: 1, scaleRewards: "group" }, "scaleRewards", /scaleRewards has no effect with rlAlgorithm "maac", whose learner has no scaleRewards: leave it at null/, marlhfRun);
    fails({ numIterations: 2, rlNumIterations: 2 }, "rlNumIterations", /MARLHFIterConfig\.rlNumIterations must be 1 with lossType "comlrl"/, marlhfIterConfig);
  });
});

describe("objective fields in a config file", () => {
  it("a YAML trainer section takes TRL's snake_case names; a wrong value is refused naming the file and the field", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "comlrl-objective-file-"));
    const file = path.join(dir, "dapo.yaml");
    writeFileSync(file, "agent_model:\n  name: some/model\ndataset:\n  type: cover-vowels\nmagrpo:\n  num_agents: 2\n  loss_type: [dapo, cispo]\n  epsilon_high: [0.28, 5]\n  num_iterations: 2\n  scale_rewards: batch\n  zero_variance_filter: 0\n  advantage_grouping: agent\n");
    const loaded = await loadTrainConfig(file);
    const c = magrpoConfig(loaded.trainerConfig, { source: file });
    expect(c.objectives.map((o) => [o.lossType, o.epsilonHigh, o.numIterations, o.scaleRewards, o.zeroVarianceFilter, o.advantageGrouping])).toEqual([
      ["dapo", 0.28, 2, "batch", 0, "agent"],
      ["cispo", 5, 2, "batch", 0, "agent"],
    ]);
    const bad = path.join(dir, "bad.yaml");
    writeFileSync(bad, "agent_model:\n  name: some/model\ndataset:\n  type: cover-vowels\nmarlhf:\n  loss_type: grpo\n  epsilon: 0.3\n  epsilon_high: 0.2\n");
    const badConfig = await loadTrainConfig(bad);
    expect(() => marlhfConfig(badConfig.trainerConfig, { source: bad })).toThrow(/bad\.yaml.*epsilonHigh \(epsilon_high\) must be ≥ epsilon \(0\.3\), got 0\.2/);
  });
});
