// MADPO / MARLHF configs (COMLRL-SPEC §2.4–§2.5, §9 test_config_constraints), pair selection and the DPO objective
// against hand computations.
import { describe, expect, it } from "vitest";
import { madpoConfig, marlhfConfig, rewardModelDeviceGiven } from "../../src/config/index.js";
import { dpoObjective, negLogSigmoid } from "../../src/trainers/preference/dpo.js";
import { gatherItems, selectPairs } from "../../src/trainers/preference/pairs.js";
import { jointText } from "../../src/trainers/preference/reward-model.js";
import { SeededRandom } from "../../src/util/random.js";
import { illTyped } from "../support/ill-typed.js";

describe("MADPOConfig", () => {
  it("has CoMLRL's defaults", () => {
    expect(madpoConfig()).toMatchObject({
      numTrainEpochs: 20,
      agentLearningRate: 5e-6,
      loggingSteps: 50,
      numAgents: 2,
      collaborationMode: "decentralized",
      maxNewTokens: 256,
      temperature: 0.6,
      topP: 0.6,
      topK: 50,
      numTurns: 1,
      jointMode: "aligned",
      evalInterval: 16,
      rolloutBufferSize: 2,
      trainBatchSize: 2,
      preferenceNumCandidates: 80,
      preferencePairsPerSample: 16,
      pairSelection: "reward_gap",
      dpoBeta: 0.1,
      useEnvironmentStep: true,
      environmentStepsPerPair: 2,
    });
    expect("numGenerations" in madpoConfig()).toBe(false);
  });

  it("has none of the rollout fields of MARLHF's RL phase, which MARLHF keeps at CoMLRL's defaults", () => {
    const rlPhase = ["discount", "earlyTerminationThreshold", "externalPromptPassthrough", "advantageNormalization", "advantageMode"];
    for (const field of rlPhase) expect(field in madpoConfig()).toBe(false);
    expect(() => madpoConfig(illTyped({ advantage_mode: "mean" }))).toThrow('MADPOConfig has no field "advantage_mode"');
    expect(marlhfConfig()).toMatchObject({ discount: 1, earlyTerminationThreshold: null, externalPromptPassthrough: false, advantageNormalization: true, advantageMode: "mean" });
  });

  it.each([
    [{ numTurns: 2 }, /numTurns must be 1/],
    [{ preferenceNumCandidates: 1 }, /preferenceNumCandidates must be ≥ 2/],
    [{ preferencePairsPerSample: 0 }, /preferencePairsPerSample must be ≥ 1/],
    [{ dpoBeta: 0 }, /dpoBeta must be > 0/],
    [{ environmentStepsPerPair: 0 }, /environmentStepsPerPair must be ≥ 1/],
    [{ pairSelection: "best" }, /pairSelection must be one of/],
    [{ pairSelection: "all" }, /preferencePairsPerSample must be null when pairSelection is "all"/],
    [{ jointMode: "cross" }, /jointMode must be "aligned"/],
    [{ collaborationMode: "both" }, /collaborationMode must be one of/],
    [{ parallelTraining: "auto" }, /parallelTraining must be one of/],
    [{ parallelTraining: "mp" }, /agentDevices must be set/],
  ])("rejects %j", (input, message) => {
    expect(() => madpoConfig(illTyped(input))).toThrow(message);
  });

  it("accepts snake_case keys, pairSelection all with null pairs, and null parallel training", () => {
    const c = madpoConfig({ pair_selection: "all", preference_pairs_per_sample: null, parallel_training: "null", agent_devices: "cpu", collaboration_mode: "centralized" });
    expect(c).toMatchObject({ pairSelection: "all", preferencePairsPerSample: null, parallelTraining: "none", collaborationMode: "centralized" });
  });
});

describe("MARLHFConfig", () => {
  it("has CoMLRL's defaults; rlAlgorithm sets the advantage mode", () => {
    expect(marlhfConfig()).toMatchObject({
      rlAlgorithm: "magrpo",
      advantageMode: "mean",
      numGenerations: 4,
      rewardModelName: null,
      rewardModelDevice: "cuda:0",
      rewardLearningRate: 1e-5,
      rewardNumTrainEpochs: 1,
      rewardTrainBatchSize: 1,
      rewardMaxLength: null,
      rewardFreezeBackbone: false,
      criticLearningRate: null,
      useSeparateCritic: true,
      criticType: "v",
      valueLossCoef: 0.6,
      valueClipRange: 0.2,
    });
    expect(marlhfConfig({ rlAlgorithm: "mareforce" })).toMatchObject({ rlAlgorithm: "mareinforce", advantageMode: "raw" });
    expect(marlhfConfig({ rlAlgorithm: "maremax" }).advantageMode).toBe("max");
    expect(marlhfConfig({ rlAlgorithm: "marloo" }).advantageMode).toBe("rloo");
    expect(marlhfConfig({ rlAlgorithm: "maac", numGenerations: 1, criticType: "q" })).toMatchObject({ rlAlgorithm: "maac", numGenerations: 1, criticType: "q" });
  });

  it.each([
    [{ rewardLearningRate: 0 }, /rewardLearningRate must be > 0/],
    [{ rewardNumTrainEpochs: 0 }, /rewardNumTrainEpochs must be ≥ 1/],
    [{ rewardTrainBatchSize: -1 }, /rewardTrainBatchSize must be ≥ 1/],
    [{ rewardMaxLength: 0 }, /rewardMaxLength must be ≥ 1/],
    [{ numGenerations: 1 }, /numGenerations must be ≥ 2 for rlAlgorithm "magrpo"/],
    [{ rlAlgorithm: "marloo", advantageMode: "mean" }, /advantageMode must be "rloo" for rlAlgorithm "marloo"/],
    [{ rewardModelDevice: ["cpu"] }, /rewardModelDevice must be one device/],
    [{ valueLossCoef: 0 }, /valueLossCoef must be > 0/],
    [{ criticType: "x" }, /criticType must be one of/],
    [{ numTurns: 2 }, /numTurns must be 1/],
  ])("rejects %j", (input, message) => {
    expect(() => marlhfConfig(illTyped(input))).toThrow(message);
  });

  it("tells a defaulted rewardModelDevice from a given one, also through a rebuilt config", () => {
    expect(rewardModelDeviceGiven(marlhfConfig())).toBe(false);
    expect(rewardModelDeviceGiven(marlhfConfig(marlhfConfig()))).toBe(false);
    expect(rewardModelDeviceGiven(marlhfConfig({ reward_model_device: "cuda:0" }))).toBe(true);
    expect(JSON.stringify(marlhfConfig())).not.toContain("Given");
  });
});

describe("pair selection", () => {
  const rewards = [0.2, 0.8, 0.2, 0.5];
  it("all: every ordered pair with r_w > r_l in index order, ties dropped", () => {
    expect(selectPairs(rewards, "all", null, new SeededRandom(0))).toEqual([
      [1, 0],
      [1, 2],
      [1, 3],
      [3, 0],
      [3, 2],
    ]);
  });

  it("reward_gap: largest gap first (ties in index order), cut to pairsPerSample", () => {
    expect(selectPairs(rewards, "reward_gap", 3, new SeededRandom(0))).toEqual([
      [1, 0],
      [1, 2],
      [1, 3],
    ]);
    expect(selectPairs(rewards, "reward_gap", null, new SeededRandom(0)).slice(3)).toEqual([
      [3, 0],
      [3, 2],
    ]);
  });

  it("random: a seeded permutation of the same pairs", () => {
    const a = selectPairs(rewards, "random", null, new SeededRandom(5));
    expect(a).toEqual(selectPairs(rewards, "random", null, new SeededRandom(5)));
    expect([...a].sort()).toEqual(selectPairs(rewards, "all", null, new SeededRandom(0)).sort());
    expect(selectPairs(rewards, "random", 2, new SeededRandom(5))).toEqual(a.slice(0, 2));
  });

  it("gives no pair when every candidate ties", () => {
    expect(selectPairs([0.4, 0.4, 0.4], "reward_gap", 16, new SeededRandom(0))).toEqual([]);
  });
});

describe("gathering collected items across ranks", () => {
  it("keeps each item once, from the lowest rank that ran it, in item order, and every rank takes rank 0's generator", async () => {
    // 5 items over 2 ranks: rank 0 ran 0, 2, 4; rank 1 ran 1, 3 and item 0 again to pad its last round.
    const ranks = [
      { records: [0, 2, 4].map((itemIndex) => ({ itemIndex, rank: 0 })), random: 111 },
      { records: [1, 3, 0].map((itemIndex) => ({ itemIndex, rank: 1 })), random: 222 },
    ];
    const random = new SeededRandom(0);
    random.setState(222);
    const host = { random, gather: async <T>() => ranks as T[] };
    const items = await gatherItems(host, ranks[1].records);
    expect(items).toEqual([
      { itemIndex: 0, rank: 0 },
      { itemIndex: 1, rank: 1 },
      { itemIndex: 2, rank: 0 },
      { itemIndex: 3, rank: 1 },
      { itemIndex: 4, rank: 0 },
    ]);
    expect(random.getState()).toBe(111);
  });
});

describe("DPO objective", () => {
  it("is mean −log σ(βΔ) with winner weights β σ(−βΔ)/n, by hand", () => {
    const beta = 0.5;
    const deltas = [2, -1];
    const { loss, winnerWeights } = dpoObjective(deltas, beta);
    // −log σ(1) = log(1 + e^−1) = 0.31326; −log σ(−0.5) = log(1 + e^0.5) = 0.97408
    expect(loss).toBeCloseTo((0.3132617 + 0.9740770) / 2, 6);
    // σ(−1) = 0.268941, σ(0.5) = 0.622459
    expect(winnerWeights[0]).toBeCloseTo((0.5 * 0.2689414) / 2, 7);
    expect(winnerWeights[1]).toBeCloseTo((0.5 * 0.6224593) / 2, 7);
  });

  it("stays finite for large margins", () => {
    expect(negLogSigmoid(800)).toBe(0);
    expect(negLogSigmoid(-800)).toBe(800);
  });
});

describe("joint text", () => {
  it("lists each agent's prompt and response, numbered from 1, blank-line separated", () => {
    expect(jointText(["p1", "p2"], ["c1", "c2"])).toBe("Joint multi-agent response\n\nAgent 1 prompt:\np1\n\nAgent 1 response:\nc1\n\nAgent 2 prompt:\np2\n\nAgent 2 response:\nc2");
  });
});
