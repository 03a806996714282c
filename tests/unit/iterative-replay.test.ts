// Replay and pairing by hand: shard weights of every replay mode, the sampling rule (a shard per draw, then records
// without replacement, wrapping around), index-aligned pairs and their sort orders, the iterative configs' rules,
// and Python interop of the shard layout both ways.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { madpoIterConfig, marlhfIterConfig } from "../../src/config/index.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { SeededRandom } from "../../src/util/random.js";
import { alignedComparisons } from "../../src/trainers/preference/iterative/candidates.js";
import { PreferenceReplay, readShard, replayWeights, sampleReplay, type IterativePair } from "../../src/trainers/preference/iterative/replay.js";
import { runPython } from "../support/python.js";
import { illTyped } from "../support/ill-typed.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-replay-"));
let tokenizer: ComlrlTokenizer;

beforeAll(async () => {
  tokenizer = await createTinyModel(path.join(scratch, "base"), { seed: 1, hiddenSize: 16, numLayers: 1, vocabSize: 300 });
}, 60_000);

/** A generator replaying fixed uniforms (and identity shuffles), so draws can be followed by hand. */
class ScriptedRandom extends SeededRandom {
  constructor(private readonly uniforms: number[]) {
    super(0);
  }

  override next(): number {
    return this.uniforms.shift()!;
  }

  override shuffle<T>(items: T[]): T[] {
    return items;
  }
}
const scripted = (uniforms: number[]) => new ScriptedRandom(uniforms);

describe("replay modes", () => {
  it("weights: nearest_k uniform over the last k, all_history uniform, lambda_decay ∝ (1−λ)λ^age", () => {
    expect(replayWeights("nearest_k", 4, 2, null)).toEqual([0, 0, 0.5, 0.5]);
    expect(replayWeights("nearest_k", 2, 5, null)).toEqual([0.5, 0.5]);
    expect(replayWeights("all_history", 4, null, null)).toEqual([0.25, 0.25, 0.25, 0.25]);
    // λ = 0.5, ages 2, 1, 0: 0.125, 0.25, 0.5 of 0.875 → 1/7, 2/7, 4/7.
    replayWeights("lambda_decay", 3, null, 0.5).forEach((w, i) => expect(w).toBeCloseTo([1 / 7, 2 / 7, 4 / 7][i], 12));
    expect(replayWeights("lambda_decay", 3, null, 1)).toEqual([1 / 3, 1 / 3, 1 / 3]);
    expect(replayWeights("lambda_decay", 3, null, 0)).toEqual([0, 0, 1]);
  });

  it("sampling: a shard per draw by cumulative weight, then each shard's share from its permutation, wrapping around", () => {
    // Weights 1/7, 2/7, 4/7 (cumulative 0.143, 0.429, 1): draws 0.1 → A, 0.3 → B, 0.9 → C, 0.95 → C, 0.2 → B, 0.35 → B.
    const drawn = sampleReplay([["a0"], ["b0", "b1"], ["c0"]], replayWeights("lambda_decay", 3, null, 0.5), 6, scripted([0.1, 0.3, 0.9, 0.95, 0.2, 0.35]));
    expect(drawn).toEqual(["a0", "b0", "b1", "b0", "c0", "c0"]);
  });

  it("the registry: current mode uses this iteration's pairs; sample size defaults to them, else the latest shard's", async () => {
    const replay = new PreferenceReplay(path.join(scratch, "replay"));
    const pair = (tag: string): IterativePair => ({
      itemIndex: 0,
      prompts: ["p"],
      promptIds: [[1]],
      winnerIds: [Int32Array.from([5])],
      loserIds: [Int32Array.from([6])],
      winnerTexts: [tag],
      loserTexts: ["l"],
      winnerReward: 1,
      loserReward: 0,
      candidateRewardMean: 0.5,
      rawRewards: [1, 0],
      targetRawReward: 1,
      comparatorRawReward: 0,
      winnerFromText: false,
      loserFromText: false,
    });
    const { mkdirSync } = await import("node:fs");
    mkdirSync(replay.dir, { recursive: true });
    await replay.write(0, [pair("a"), pair("b"), pair("c")], true);
    await replay.write(1, [], true);
    expect(replay.records.map((r) => r.iteration)).toEqual([0]);
    expect(replay.select(1, { mode: "current", k: null, lambda: null, sampleSize: null }, new SeededRandom(1))).toEqual([]);
    expect(replay.select(1, { mode: "all_history", k: null, lambda: null, sampleSize: null }, new SeededRandom(1))).toHaveLength(3);
    expect(replay.select(1, { mode: "nearest_k", k: 1, lambda: null, sampleSize: 5 }, new SeededRandom(1))).toHaveLength(5);
  });
});

describe("index-aligned pairs", () => {
  const current = [0.2, 0.9, 0.5, 0.1];
  const comparator = [0.6, 0.9, 0.4, 0.8, 0.7];
  it("compare i < min(counts), drop ties, and sort by the selection", () => {
    const settings = (pairSelection: "comparator_reward" | "reward_gap" | "all", pairsPerSample: number | null = null) => ({ pairSelection, pairsPerSample });
    // Gaps: 0 → 0.4, 2 → 0.1, 3 → 0.7 (index 1 ties, index 4 has no current candidate).
    expect(alignedComparisons(current, comparator, settings("all"), new SeededRandom(0))).toEqual([0, 2, 3]);
    expect(alignedComparisons(current, comparator, settings("reward_gap"), new SeededRandom(0))).toEqual([3, 0, 2]);
    expect(alignedComparisons(current, comparator, settings("comparator_reward"), new SeededRandom(0))).toEqual([3, 0, 2]);
    expect(alignedComparisons(current, comparator, settings("comparator_reward", 2), new SeededRandom(0))).toEqual([3, 0]);
  });
});

describe("iterative configs", () => {
  it("defaults and overrides of §2.6", () => {
    const c = madpoIterConfig();
    expect([c.numIterations, c.numTrainEpochs, c.preferenceNumCandidates, c.preferencePairsPerSample, c.pairSelection, c.comparatorNumCandidates]).toEqual([6, 1, 20, 4, "comparator_reward", 20]);
    const m = marlhfIterConfig({ comparator_policy: "checkpoint", preference_replay_mode: "td-lambda", preference_replay_lambda: 0.5 });
    expect([m.numTrainEpochs, m.rewardNumTrainEpochs, m.comparatorPolicy, m.comparatorHistoryK, m.preferenceReplayMode, m.preferenceScoringReward]).toEqual([2, 2, "history", 1, "lambda_decay", "task"]);
  });

  it.each([
    [{ preferenceReplayMode: "nearest_k" }, /preferenceReplayK is required/],
    [{ preferenceReplayK: 2 }, /preferenceReplayK must be null or 1/],
    [{ preferenceReplayMode: "all_history", preferenceReplayK: 1 }, /preferenceReplayK is only used/],
    [{ preferenceReplayMode: "lambda_decay" }, /preferenceReplayLambda is required/],
    [{ preferenceReplayLambda: 0.5 }, /preferenceReplayLambda is only used/],
    [{ preferenceReplayMode: "lambda_decay", preferenceReplayLambda: 1.5 }, /preferenceReplayLambda must be ≤ 1/],
    [{ preferenceReplaySampleSize: 4 }, /preferenceReplaySampleSize must be null when preferenceReplayMode is "current"/],
    [{ comparatorPolicy: "model" }, /comparatorModelName or comparatorAgents is required/],
    [{ comparatorModelName: "x" }, /comparatorModelName is only used with comparatorPolicy "model"/],
    [{ comparatorHistoryK: 2 }, /comparatorHistoryK is only used/],
    [{ comparatorPolicy: "api" }, /comparatorApiUrl is required/],
    [{ comparatorApiModel: "m" }, /comparatorApiModel is only used with comparatorPolicy "api"/],
    [{ comparatorPolicy: "api", comparatorApiUrl: "http://h", comparatorApiKey: "k", comparatorApiKeyEnv: "K" }, /comparatorApiKeyEnv and comparatorApiKey are both set/],
    [{ comparatorCentralizedAgentIndex: 2 }, /comparatorCentralizedAgentIndex must be < numAgents/],
    [{ collaborationMode: "centralized", comparatorCentralizedAgentIndex: 1 }, /only actor index 0/],
    [{ numIterations: 0 }, /numIterations must be ≥ 1/],
    [{ pairSelection: "all" }, /preferencePairsPerSample must be null/],
  ])("rejects %j", (input, message) => {
    expect(() => madpoIterConfig(illTyped(input))).toThrow(message);
  });
});

describe("Python interop of replay shards", () => {
  it("Python json.loads our shard and finds every field CoMLRL reads; our loader reads a Python-written CoMLRL shard", async () => {
    const dir = path.join(scratch, "interop");
    const replay = new PreferenceReplay(dir);
    const { mkdirSync } = await import("node:fs");
    mkdirSync(dir, { recursive: true });
    const ids = tokenizer.encode("hello world", { addSpecialTokens: false });
    const file = await replay.write(0, [
      {
        itemIndex: 2,
        prompts: ["say hi", "say bye"],
        promptIds: [tokenizer.encode("say hi"), tokenizer.encode("say bye")],
        winnerIds: [Int32Array.from(ids), Int32Array.from(ids)],
        loserIds: [Int32Array.from([7]), Int32Array.from([8])],
        winnerTexts: ["hello world", "hello world"],
        loserTexts: ["x", "y"],
        winnerReward: 0.75,
        loserReward: 0.25,
        candidateRewardMean: 0.5,
        rawRewards: [0.75, 0.25],
        targetRawReward: 0.75,
        comparatorRawReward: 0.25,
        winnerFromText: false,
        loserFromText: true,
      },
    ], true);
    const checked = runPython(
      `import json, sys
shard = json.load(open(sys.argv[1]))
p = shard["pairs"][0]
fields = ["prompts", "winner_completions", "loser_completions", "winner_reward", "loser_reward", "candidate_reward_mean", "raw_rewards", "target_raw_reward", "comparator_raw_reward"]
missing = [f for f in fields if f not in p]
theirs = {"iteration": 2, "num_pairs": 1, "pairs": [{"prompts": ["say hi", "say bye"], "winner_completions": ["hello world", "ok"], "loser_completions": ["x", "y"], "winner_reward": 1.0, "loser_reward": 0.0, "candidate_reward_mean": 0.5, "raw_rewards": [1.0, 0.0], "target_raw_reward": 0.0, "comparator_raw_reward": 1.0}]}
json.dump(theirs, open(sys.argv[2], "w"))
print(json.dumps({"iteration": shard["iteration"], "num_pairs": shard["num_pairs"], "missing": missing, "winner": p["winner_completions"], "raw": p["raw_rewards"]}))`,
      [file, path.join(dir, "iteration_0002.json")],
    );
    expect(checked).toEqual({ iteration: 1, num_pairs: 1, missing: [], winner: ["hello world", "hello world"], raw: [0.75, 0.25] });
    const theirs = readShard(path.join(dir, "iteration_0002.json"), [tokenizer, tokenizer]);
    expect(theirs.iteration).toBe(2);
    const [p] = theirs.pairs;
    expect(Array.from(p.winnerIds[0])).toEqual(ids);
    expect(p.promptIds[1]).toEqual(tokenizer.encode("say bye"));
    expect([p.winnerFromText, p.loserFromText, p.targetRawReward, p.comparatorRawReward]).toEqual([true, true, 0, 1]);
    const ours = readShard(file, [tokenizer, tokenizer]).pairs[0];
    expect([ours.itemIndex, ours.winnerFromText, ours.loserFromText, Array.from(ours.loserIds[1])]).toEqual([2, false, true, [8]]);
  });
});

describe("replay shards with malformed ids", () => {
  const shard = (ids: Record<string, unknown>) => {
    const file = path.join(scratch, `malformed-${Math.random().toString(36).slice(2)}.json`);
    const pair = { prompts: ["p"], winner_completions: ["w"], loser_completions: ["l"], winner_reward: 1, loser_reward: 0, prompt_ids: [[1, 2]], winner_ids: [[5]], loser_ids: [[6]], ...ids };
    writeFileSync(file, JSON.stringify({ iteration: 1, num_pairs: 1, pairs: [pair] }));
    return file;
  };

  it("token ids that are not integer ids in the vocabulary, or not one list per agent, are refused by field", () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ winner_ids: [["abc"]] }, /pair 0: winner_ids\[0\]\[0\] is "abc", not a token id in \[0, \d+\)/],
      [{ loser_ids: [[1.5]] }, /pair 0: loser_ids\[0\]\[0\] is 1\.5, not a token id/],
      [{ prompt_ids: [[-1]] }, /pair 0: prompt_ids\[0\]\[0\] is -1, not a token id/],
      [{ winner_ids: [[10 ** 9]] }, /pair 0: winner_ids\[0\]\[0\] is 1000000000, not a token id/],
      [{ prompt_ids: 5 }, /pair 0: prompt_ids must be a list of one list of token ids per agent \(1\)/],
      [{ winner_ids: [5] }, /pair 0: winner_ids must be a list of one list of token ids per agent \(1\)/],
      [{ loser_ids: [[6], [7]] }, /pair 0: loser_ids must be a list of one list of token ids per agent \(1\)/],
    ];
    for (const [ids, message] of cases) {
      const file = shard(ids);
      expect(() => readShard(file, [tokenizer]), JSON.stringify(ids)).toThrow(new RegExp(`^replay shard ${file}: ${message.source}`));
    }
  });
});
