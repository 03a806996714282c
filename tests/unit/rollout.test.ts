// The MAGRPO rollout layer (COMLRL-SPEC §3.2, §4.1–§4.3) driven by deterministic fake policies: joint actions,
// env steps, returns and per-agent credit, early termination, post-order samples, external transitions, rewards,
// reward processors and formatters. Every expected number is computed by hand in the comments next to it.
import { describe, expect, it } from "vitest";
import { buildFormatters, defaultFormatter, formatPrompt } from "../../src/rollout/formatters.js";
import { computeRewards, RewardError, RewardProcessors } from "../../src/rollout/rewards.js";
import {
  computeReturns,
  creditReturns,
  rolloutItem,
  type RolloutEnvironment,
  type RolloutNode,
  type RolloutPolicy,
  type RolloutSettings,
} from "../../src/rollout/tree.js";
import type { ExternalTransition, Formatter, Item, RewardContext, RewardFunction, TransitionInput } from "../../src/rollout/types.js";
import { illTyped } from "../support/ill-typed.js";

// ---------------------------------------------------------------------------------------------------------------
// Fake policies and helpers
// ---------------------------------------------------------------------------------------------------------------

interface FakePolicy extends RolloutPolicy {
  agent: number;
  calls: { prompts: string[]; k: number }[];
  klCalls: { promptIds: number[][]; completions: Int32Array[][] }[];
}

/** promptIds = [agent, ...char codes of the prompt], so a sample's prompt can be decoded back. */
const encodePrompt = (agent: number, prompt: string) => [agent, ...Array.from(prompt, (ch) => ch.charCodeAt(0))];
const decodePrompt = (ids: number[]) => String.fromCharCode(...ids.slice(1));

/**
 * Agent `agent` answers prompt p with K texts `${agent}:${p}:${j}` (j = 0..K−1); completion ids are
 * [agent, call number, prompt index, j]. With `kl`, referenceKl gives completion j of agent a: (a+1)/10 + j/100.
 */
function fakePolicy(agent: number, options: { kl?: boolean; events?: string[]; delayMs?: number } = {}): FakePolicy {
  const policy: FakePolicy = {
    agent,
    calls: [],
    klCalls: [],
    async sample(prompts: string[], k: number) {
      const call = policy.calls.length;
      policy.calls.push({ prompts: [...prompts], k });
      options.events?.push(`start ${agent}`);
      if (options.delayMs !== undefined) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
      options.events?.push(`end ${agent}`);
      return {
        promptIds: prompts.map((p) => encodePrompt(agent, p)),
        completionIds: prompts.map((_, p) => Array.from({ length: k }, (_, j) => Int32Array.of(agent, call, p, j))),
        texts: prompts.map((p) => Array.from({ length: k }, (_, j) => `${agent}:${p}:${j}`)),
      };
    },
  };
  if (options.kl) {
    policy.referenceKl = async (promptIds, completions) => {
      policy.klCalls.push({ promptIds, completions });
      return completions.map((perPrompt) => perPrompt.map((ids) => (agent + 1) / 10 + ids[3] / 100));
    };
  }
  return policy;
}

/** Sum of every decimal digit in a string: "1:1:Q:0>:1" → 1+1+0+1 = 3. */
const digitSum = (text: string) => Array.from(text).reduce((s, ch) => (ch >= "0" && ch <= "9" ? s + Number(ch) : s), 0);

/**
 * The reward of most tree tests: r = (turn+1)·(ds(agent 0's text) + 2·ds(agent 1's text)), ds = digitSum.
 * Depends on the turn, both agents' texts and (through the texts, which embed the prompt) the branch.
 */
const turnDigitReward: RewardFunction = (completions, context) =>
  completions[0].map((c0, j) => (context.turn + 1) * (digitSum(c0) + 2 * digitSum(completions[1][j])));

/** Next prompt of agent a = its own completion followed by ">" (so a child's texts embed the parent's). */
const appendTransition: ExternalTransition = ({ agentCompletions }) => agentCompletions.map((c) => `${c}>`);

function recordingReward(fn: RewardFunction) {
  const calls: { completions: string[][]; context: RewardContext }[] = [];
  const reward: RewardFunction = (completions, context) => {
    calls.push({ completions: completions.map((c) => [...c]), context });
    return fn(completions, context);
  };
  return { reward, calls };
}

function recordingTransition(fn: ExternalTransition) {
  const calls: TransitionInput[] = [];
  const transition: ExternalTransition = (input) => {
    calls.push(structuredClone(input));
    return fn(input);
  };
  return { transition, calls };
}

function makeEnv(numAgents: number, overrides: Partial<RolloutEnvironment> = {}): RolloutEnvironment & { policies: FakePolicy[] } {
  const policies = Array.from({ length: numAgents }, (_, a) => fakePolicy(a));
  return {
    formatters: Array(numAgents).fill(defaultFormatter),
    rewardFunc: (completions) => completions[0].map(() => 0),
    rewardProcessor: RewardProcessors.identity(),
    externalTransition: null,
    concurrent: false,
    ...overrides,
    policies: (overrides.policies as FakePolicy[] | undefined) ?? policies,
  };
}

function makeSettings(overrides: Partial<RolloutSettings> = {}): RolloutSettings {
  return {
    numGenerations: 2,
    numTurns: 1,
    jointMode: "aligned",
    earlyTerminationThreshold: null,
    externalPromptPassthrough: false,
    rewardBatching: "node",
    ...overrides,
  };
}

const ITEM: Item = { prompt: "Q" };

function child(node: RolloutNode, j: number): RolloutNode {
  const c = node.children[j];
  if (!c) throw new Error(`node has no child ${j}`);
  return c;
}

const context0: RewardContext = { itemIndex: 3, item: ITEM, turn: 1, prompts: ["Q", "Q"], promptHistory: [[], []], responseHistory: [[], []] };

// ---------------------------------------------------------------------------------------------------------------
// Joint actions
// ---------------------------------------------------------------------------------------------------------------

describe("joint actions", () => {
  it("aligned N=2, K=3 forms 3 joint actions (j, j) and pairs agent texts by index", async () => {
    // r_j = 10·ds("0:Q:j") + ds("1:Q:j") = 10j + (1+j) = 11j + 1 → [1, 12, 23]
    const { reward, calls } = recordingReward((c) => c[0].map((t, j) => 10 * digitSum(t) + digitSum(c[1][j])));
    const env = makeEnv(2, { rewardFunc: reward });
    const out = await rolloutItem(ITEM, 0, env, makeSettings({ numGenerations: 3 }), 0);
    expect(out.root.jointActions).toEqual([
      [0, 0],
      [1, 1],
      [2, 2],
    ]);
    expect(calls).toHaveLength(1);
    expect(calls[0].completions).toEqual([
      ["0:Q:0", "0:Q:1", "0:Q:2"],
      ["1:Q:0", "1:Q:1", "1:Q:2"],
    ]);
    expect(out.root.rewards).toEqual([1, 12, 23]);
    expect(out.root.returns).toEqual([1, 12, 23]);
    // aligned credit: completion j of every agent gets R_j
    expect(out.samples.map((s) => s.returns)).toEqual([
      [1, 12, 23],
      [1, 12, 23],
    ]);
    expect(out.envSteps).toBe(3);
  });

  it("cross N=2, K=3 forms all 9 combinations in lexicographic order", async () => {
    const { reward, calls } = recordingReward((c) => c[0].map(() => 1));
    const out = await rolloutItem(ITEM, 0, makeEnv(2, { rewardFunc: reward }), makeSettings({ numGenerations: 3, jointMode: "cross" }), 0);
    expect(out.root.jointActions).toEqual([
      [0, 0],
      [0, 1],
      [0, 2],
      [1, 0],
      [1, 1],
      [1, 2],
      [2, 0],
      [2, 1],
      [2, 2],
    ]);
    expect(calls[0].completions).toEqual([
      ["0:Q:0", "0:Q:0", "0:Q:0", "0:Q:1", "0:Q:1", "0:Q:1", "0:Q:2", "0:Q:2", "0:Q:2"],
      ["1:Q:0", "1:Q:1", "1:Q:2", "1:Q:0", "1:Q:1", "1:Q:2", "1:Q:0", "1:Q:1", "1:Q:2"],
    ]);
    // every combination is one env step: 3² = 9
    expect(out.envSteps).toBe(9);
    // cross credit with all R = 1: each completion takes part in 3 combos → 1+1+1 = 3 (a sum, not the mean 1)
    expect(out.samples.map((s) => s.returns)).toEqual([
      [3, 3, 3],
      [3, 3, 3],
    ]);
  });

  it("cross N=3, K=2 forms 2³ = 8 combinations and sums credit over each agent's index", async () => {
    // r_combo = its index j (0..7)
    const { reward, calls } = recordingReward((c) => c[0].map((_, j) => j));
    const out = await rolloutItem(ITEM, 0, makeEnv(3, { rewardFunc: reward }), makeSettings({ jointMode: "cross" }), 0);
    expect(out.root.jointActions).toEqual([
      [0, 0, 0],
      [0, 0, 1],
      [0, 1, 0],
      [0, 1, 1],
      [1, 0, 0],
      [1, 0, 1],
      [1, 1, 0],
      [1, 1, 1],
    ]);
    expect(calls[0].completions[2]).toEqual(["2:Q:0", "2:Q:1", "2:Q:0", "2:Q:1", "2:Q:0", "2:Q:1", "2:Q:0", "2:Q:1"]);
    expect(out.envSteps).toBe(8);
    // agent 0: k=0 ← j 0,1,2,3 → 6;  k=1 ← j 4,5,6,7 → 22
    // agent 1: k=0 ← j 0,1,4,5 → 10; k=1 ← j 2,3,6,7 → 18
    // agent 2: k=0 ← j 0,2,4,6 → 12; k=1 ← j 1,3,5,7 → 16
    expect(out.samples.map((s) => [s.agent, ...s.returns])).toEqual([
      [0, 6, 22],
      [1, 10, 18],
      [2, 12, 16],
    ]);
  });

  it("a single agent (N=1) gets K joint actions in either joint mode", async () => {
    for (const jointMode of ["aligned", "cross"] as const) {
      const { reward, calls } = recordingReward((c) => c[0].map((t) => digitSum(t)));
      const out = await rolloutItem(ITEM, 0, makeEnv(1, { rewardFunc: reward }), makeSettings({ numGenerations: 3, jointMode }), 0);
      expect(out.root.jointActions).toEqual([[0], [1], [2]]);
      expect(calls[0].completions).toEqual([["0:Q:0", "0:Q:1", "0:Q:2"]]);
      // ds("0:Q:j") = j
      expect(out.root.rewards).toEqual([0, 1, 2]);
      expect(out.samples).toHaveLength(1);
      expect(out.samples[0].returns).toEqual([0, 1, 2]);
      expect(out.envSteps).toBe(3);
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------
// A 2-turn aligned tree and a 2-turn cross tree, by hand
// ---------------------------------------------------------------------------------------------------------------

describe("two-turn aligned tree (N=2, K=2)", () => {
  // Root texts: agent 0 "0:Q:j" (ds = j), agent 1 "1:Q:j" (ds = 1+j).
  //   r_j = 1·(j + 2(1+j)) = 2 + 3j → r = [2, 5]
  // Transition for branch j: ["0:Q:j>", "1:Q:j>"]. Child j texts: agent 0 "0:0:Q:j>:m" (ds = j+m),
  //   agent 1 "1:1:Q:j>:m" (ds = 2+j+m).
  //   r = 2·((j+m) + 2(2+j+m)) = 8 + 6j + 6m
  //   child 0: m=0 → 8,  m=1 → 14; mean 11
  //   child 1: m=0 → 14, m=1 → 20; mean 17
  // Root returns: R_0 = 2 + 11 = 13, R_1 = 5 + 17 = 22 (undiscounted)
  // Env steps: root +2 → 2, child 0 +2 → 4, child 1 +2 → 6; total 2 + 2·2 = 6.
  const run = async (firstEnvStep = 0) => {
    const env = makeEnv(2, { rewardFunc: turnDigitReward, externalTransition: appendTransition });
    return { env, out: await rolloutItem(ITEM, 0, env, makeSettings({ numTurns: 2 }), firstEnvStep) };
  };

  it("has one root and one child per joint action, with the expected texts", async () => {
    const { out } = await run();
    expect(out.root.turn).toBe(0);
    expect(out.root.prompts).toEqual(["Q", "Q"]);
    expect(out.root.children).toHaveLength(2);
    for (const j of [0, 1]) {
      const c = child(out.root, j);
      expect(c.turn).toBe(1);
      expect(c.prompts).toEqual([`0:Q:${j}>`, `1:Q:${j}>`]);
      expect(c.texts).toEqual([
        [`0:0:Q:${j}>:0`, `0:0:Q:${j}>:1`],
        [`1:1:Q:${j}>:0`, `1:1:Q:${j}>:1`],
      ]);
      expect(c.children).toEqual([null, null]);
    }
  });

  it("computes rewards and undiscounted returns R_j = r_j + mean(child j returns)", async () => {
    const { out } = await run();
    expect(out.root.rewards).toEqual([2, 5]);
    expect(child(out.root, 0).rewards).toEqual([8, 14]);
    expect(child(out.root, 1).rewards).toEqual([14, 20]);
    expect(child(out.root, 0).returns).toEqual([8, 14]);
    expect(child(out.root, 1).returns).toEqual([14, 20]);
    expect(out.root.returns[0]).toBeCloseTo(13, 12);
    expect(out.root.returns[1]).toBeCloseTo(22, 12);
  });

  it("counts env steps: 2 + 2·2 = 6, numbered per node from firstEnvStep", async () => {
    const { out } = await run();
    expect(out.envSteps).toBe(6);
    expect(out.root.envStep).toBe(2);
    expect(child(out.root, 0).envStep).toBe(4);
    expect(child(out.root, 1).envStep).toBe(6);

    const shifted = (await run(100)).out;
    expect(shifted.envSteps).toBe(6);
    expect([shifted.root.envStep, child(shifted.root, 0).envStep, child(shifted.root, 1).envStep]).toEqual([102, 104, 106]);
  });

  it("emits one sample per agent per node, post-order, with hand-computed fields", async () => {
    const { out } = await run();
    expect(out.samples).toHaveLength(6);
    // post-order: child 0 (agents 0,1), child 1 (agents 0,1), root (agents 0,1)
    expect(out.samples.map((s) => [s.agent, s.turn, s.envStep])).toEqual([
      [0, 1, 4],
      [1, 1, 4],
      [0, 1, 6],
      [1, 1, 6],
      [0, 0, 2],
      [1, 0, 2],
    ]);
    expect(out.samples.map((s) => decodePrompt(s.promptIds))).toEqual(["0:Q:0>", "1:Q:0>", "0:Q:1>", "1:Q:1>", "Q", "Q"]);
    expect(out.samples.map((s) => s.promptIds[0])).toEqual([0, 1, 0, 1, 0, 1]);
    // child 0: rewards [8,14] → mean 11; child 1: [14,20] → 17; root: rewards [2,5] → 3.5, returns [13,22] → 17.5
    const expected = [
      { returns: [8, 14], reward: 11, ret: 11 },
      { returns: [8, 14], reward: 11, ret: 11 },
      { returns: [14, 20], reward: 17, ret: 17 },
      { returns: [14, 20], reward: 17, ret: 17 },
      { returns: [13, 22], reward: 3.5, ret: 17.5 },
      { returns: [13, 22], reward: 3.5, ret: 17.5 },
    ];
    out.samples.forEach((s, i) => {
      expect(s.returns).toHaveLength(2);
      s.returns.forEach((r, k) => expect(r).toBeCloseTo(expected[i].returns[k], 12));
      expect(s.nodeMeanReward).toBeCloseTo(expected[i].reward, 12);
      expect(s.nodeMeanReturn).toBeCloseTo(expected[i].ret, 12);
      expect(s.completionIds).toHaveLength(2);
      // reference KL is off for these policies: zeros
      expect(s.referenceKl).toEqual([0, 0]);
    });
    // the completion ids are the policy's: [agent, call number, prompt index in the level, j]
    expect(Array.from(out.samples[2].completionIds[1])).toEqual([0, 1, 1, 1]); // agent 0, 2nd call (level 1), child 1, j=1
    expect(Array.from(out.samples[5].completionIds[0])).toEqual([1, 0, 0, 0]); // agent 1, 1st call (root), j=0
  });

  it("sends a whole level's prompts to each agent in one generation call", async () => {
    const { env } = await run();
    expect(env.policies[0].calls).toEqual([
      { prompts: ["Q"], k: 2 },
      { prompts: ["0:Q:0>", "0:Q:1>"], k: 2 },
    ]);
    expect(env.policies[1].calls).toEqual([
      { prompts: ["Q"], k: 2 },
      { prompts: ["1:Q:0>", "1:Q:1>"], k: 2 },
    ]);
  });
});

describe("two-turn cross tree (N=2, K=2)", () => {
  // Root combos (i0,i1) in order (0,0),(0,1),(1,0),(1,1): ds("0:Q:i0") = i0, ds("1:Q:i1") = 1+i1
  //   r = i0 + 2(1+i1) = 2 + i0 + 2·i1 → [2, 4, 3, 5]
  // Child of (i0,i1): prompts ["0:Q:i0>", "1:Q:i1>"]; texts "0:0:Q:i0>:m0" (ds i0+m0), "1:1:Q:i1>:m1" (ds 2+i1+m1)
  //   r = 2·((i0+m0) + 2(2+i1+m1)) = 2(4 + i0 + 2·i1) + 2(m0 + 2·m1), and 2(m0+2m1) over the combos = [0, 4, 2, 6]
  //   child (0,0): base 8  → [8, 12, 10, 14], mean 11
  //   child (0,1): base 12 → [12, 16, 14, 18], mean 15
  //   child (1,0): base 10 → [10, 14, 12, 16], mean 13
  //   child (1,1): base 14 → [14, 18, 16, 20], mean 17
  // Root returns: [2+11, 4+15, 3+13, 5+17] = [13, 19, 16, 22]; mean reward 14/4 = 3.5, mean return 70/4 = 17.5
  // Env steps: 4 + 4·4 = 20 (root 4, children 8, 12, 16, 20)
  const run = () =>
    rolloutItem(ITEM, 0, makeEnv(2, { rewardFunc: turnDigitReward, externalTransition: appendTransition }), makeSettings({ numTurns: 2, jointMode: "cross" }), 0);

  it("has 4 children with hand-computed rewards and returns", async () => {
    const out = await run();
    expect(out.root.rewards).toEqual([2, 4, 3, 5]);
    expect(out.root.children).toHaveLength(4);
    expect(out.root.children.map((c) => c?.rewards)).toEqual([
      [8, 12, 10, 14],
      [12, 16, 14, 18],
      [10, 14, 12, 16],
      [14, 18, 16, 20],
    ]);
    expect(child(out.root, 1).prompts).toEqual(["0:Q:0>", "1:Q:1>"]);
    [13, 19, 16, 22].forEach((r, j) => expect(out.root.returns[j]).toBeCloseTo(r, 12));
  });

  it("counts 4 + 4·4 = 20 env steps", async () => {
    const out = await run();
    expect(out.envSteps).toBe(20);
    expect(out.root.envStep).toBe(4);
    expect(out.root.children.map((c) => c?.envStep)).toEqual([8, 12, 16, 20]);
  });

  it("credits each agent's completion with the SUM of the returns of its combos", async () => {
    const out = await run();
    expect(out.samples).toHaveLength(10);
    const root0 = out.samples[8];
    const root1 = out.samples[9];
    expect([root0.agent, root0.turn, root1.agent, root1.turn]).toEqual([0, 0, 1, 0]);
    // agent 0: k=0 ← (0,0),(0,1): 13+19 = 32; k=1 ← (1,0),(1,1): 16+22 = 38   (means would be 16, 19)
    expect(root0.returns[0]).toBeCloseTo(32, 12);
    expect(root0.returns[1]).toBeCloseTo(38, 12);
    // agent 1: k=0 ← (0,0),(1,0): 13+16 = 29; k=1 ← (0,1),(1,1): 19+22 = 41
    expect(root1.returns[0]).toBeCloseTo(29, 12);
    expect(root1.returns[1]).toBeCloseTo(41, 12);
    expect(root0.nodeMeanReward).toBeCloseTo(3.5, 12);
    expect(root0.nodeMeanReturn).toBeCloseTo(17.5, 12);
    // child (0,1) = samples 2,3; rewards [12,16,14,18] over (0,0),(0,1),(1,0),(1,1)
    // agent 0: k=0: 12+16 = 28, k=1: 14+18 = 32; agent 1: k=0: 12+14 = 26, k=1: 16+18 = 34
    expect(out.samples[2].returns).toEqual([28, 32]);
    expect(out.samples[3].returns).toEqual([26, 34]);
    expect(out.samples[2].nodeMeanReward).toBeCloseTo(15, 12);
    expect(out.samples.map((s) => s.envStep)).toEqual([8, 8, 12, 12, 16, 16, 20, 20, 4, 4]);
  });
});

describe("computeReturns / creditReturns on a hand-built node", () => {
  const leaf = (rewards: number[]): RolloutNode => ({
    turn: 1,
    prompts: [],
    historyPrompts: [],
    promptIds: [],
    completionIds: [],
    texts: [],
    referenceKl: [],
    jointActions: rewards.map((_, j) => [j]),
    rewards,
    agentRewards: null,
    returns: [],
    children: rewards.map(() => null),
    envStep: 0,
    promptHistory: [],
    responseHistory: [],
  });

  it("mixes leaves and expanded joint actions", () => {
    // root rewards [1, -2, 0.5]; child 0 returns [3, 5] (mean 4); joint action 1 has no child; child 2 returns [−1] (mean −1)
    // R = [1+4, −2, 0.5−1] = [5, −2, −0.5]
    const root = { ...leaf([1, -2, 0.5]), turn: 0 };
    root.children = [leaf([3, 5]), null, leaf([-1])];
    computeReturns(root);
    expect(root.returns).toEqual([5, -2, -0.5]);
    expect(child(root, 0).returns).toEqual([3, 5]);
  });

  it("credits aligned by index and cross by sum", () => {
    const node = leaf([1, 2, 3, 4]);
    node.jointActions = [
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
    ];
    node.returns = [1, 2, 3, 4];
    // agent 0: [1+2, 3+4] = [3, 7]; agent 1: [1+3, 2+4] = [4, 6]
    expect(creditReturns(node, 0, 2)).toEqual([3, 7]);
    expect(creditReturns(node, 1, 2)).toEqual([4, 6]);
    node.jointActions = [
      [0, 0],
      [1, 1],
    ];
    node.returns = [7, 9];
    expect(creditReturns(node, 1, 2)).toEqual([7, 9]);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Early termination
// ---------------------------------------------------------------------------------------------------------------

describe("early termination", () => {
  // Root rewards [1, 2] (mean 1.5) for a single agent; deeper turns reward 10.
  const rootReward: RewardFunction = (c, ctx) => (ctx.turn === 0 ? [1, 2] : c[0].map(() => 10));

  it("never terminates with threshold null, even with large rewards", async () => {
    const out = await rolloutItem(
      ITEM,
      0,
      makeEnv(1, { rewardFunc: (c) => c[0].map(() => 1e6), externalTransition: appendTransition }),
      makeSettings({ numTurns: 3, earlyTerminationThreshold: null }),
      0,
    );
    // full tree: 1 + 2 + 4 nodes, 2 + 2·2 + 4·2 = 14 env steps
    expect(out.envSteps).toBe(14);
    expect(out.samples).toHaveLength(7);
  });

  it("terminates only when the node's mean reward is strictly above the threshold", async () => {
    const atThreshold = await rolloutItem(
      ITEM,
      0,
      makeEnv(1, { rewardFunc: rootReward, externalTransition: appendTransition }),
      makeSettings({ numTurns: 2, earlyTerminationThreshold: 1.5 }),
      0,
    );
    // mean 1.5 is not > 1.5 → children; returns [1 + 10, 2 + 10]
    expect(atThreshold.root.children.every((c) => c !== null)).toBe(true);
    expect(atThreshold.envSteps).toBe(6);
    expect(atThreshold.root.returns).toEqual([11, 12]);

    const { transition, calls } = recordingTransition(appendTransition);
    const below = await rolloutItem(
      ITEM,
      0,
      makeEnv(1, { rewardFunc: rootReward, externalTransition: transition }),
      makeSettings({ numTurns: 2, earlyTerminationThreshold: 1.49 }),
      0,
    );
    // mean 1.5 > 1.49 → no children, no transition call; returns = rewards
    expect(below.root.children).toEqual([null, null]);
    expect(calls).toHaveLength(0);
    expect(below.envSteps).toBe(2);
    expect(below.root.returns).toEqual([1, 2]);
    expect(below.samples).toHaveLength(1);
    expect(below.samples[0].returns).toEqual([1, 2]);
  });

  it("with a default-like −0.2 threshold and non-negative rewards, ends after turn 1", async () => {
    const out = await rolloutItem(
      ITEM,
      0,
      makeEnv(2, { rewardFunc: (c) => c[0].map(() => 0), externalTransition: appendTransition }),
      makeSettings({ numTurns: 3, earlyTerminationThreshold: -0.2 }),
      0,
    );
    // mean 0 > −0.2 → terminated at the root
    expect(out.root.children).toEqual([null, null]);
    expect(out.envSteps).toBe(2);
    expect(out.samples).toHaveLength(2);

    // negative rewards (mean −1 ≤ −0.2) keep expanding
    const negative = await rolloutItem(
      ITEM,
      0,
      makeEnv(2, { rewardFunc: (c) => c[0].map(() => -1), externalTransition: appendTransition }),
      makeSettings({ numTurns: 2, earlyTerminationThreshold: -0.2 }),
      0,
    );
    expect(negative.envSteps).toBe(6);
  });

  it("terminates branches independently; returns and samples follow the partial tree", async () => {
    // N=1, K=2, 3 turns, threshold 0.5. Prompts: root "Q"; child j "0:Q:j>"; grandchild (j,m) "0:0:Q:j>:m>".
    // Rewards: turn 0 → [0, 0] (mean 0, expand)
    //          turn 1 → 2·ds(prompt) = 2j for both completions: child 0 [0,0] (mean 0, expand), child 1 [2,2] (mean 2 > 0.5, stop)
    //          turn 2 → ds(text) = ds("0:0:0:Q:0>:m>:n") = m + n: grandchild (0,0) [0,1], grandchild (0,1) [1,2]
    // Returns: gc(0,0) [0,1] (mean 0.5), gc(0,1) [1,2] (mean 1.5)
    //          child 0: [0 + 0.5, 0 + 1.5] = [0.5, 1.5] (mean 1); child 1: [2, 2] (mean 2)
    //          root: [0 + 1, 0 + 2] = [1, 2]
    const reward: RewardFunction = (c, ctx) =>
      c[0].map((text) => (ctx.turn === 0 ? 0 : ctx.turn === 1 ? 2 * digitSum(ctx.prompts[0]) : digitSum(text)));
    const out = await rolloutItem(
      ITEM,
      0,
      makeEnv(1, { rewardFunc: reward, externalTransition: appendTransition }),
      makeSettings({ numTurns: 3, earlyTerminationThreshold: 0.5 }),
      0,
    );
    const c0 = child(out.root, 0);
    const c1 = child(out.root, 1);
    expect(c1.children).toEqual([null, null]);
    expect(child(c0, 0).rewards).toEqual([0, 1]);
    expect(child(c0, 1).rewards).toEqual([1, 2]);
    expect(c0.returns).toEqual([0.5, 1.5]);
    expect(c1.returns).toEqual([2, 2]);
    expect(out.root.returns).toEqual([1, 2]);
    // 5 nodes × 2 joint actions = 10 env steps
    expect(out.envSteps).toBe(10);
    // post-order: gc(0,0), gc(0,1), child 0, child 1, root
    expect(out.samples.map((s) => s.turn)).toEqual([2, 2, 1, 1, 0]);
    expect(out.samples.map((s) => s.returns)).toEqual([
      [0, 1],
      [1, 2],
      [0.5, 1.5],
      [2, 2],
      [1, 2],
    ]);
    expect(out.samples.map((s) => s.nodeMeanReturn)).toEqual([0.5, 1.5, 1, 2, 1.5]);
    // Node env steps are numbered depth first, as CoMLRL's recursive expansion counts them: root 2, child 0 4,
    // gc(0,0) 6, gc(0,1) 8, child 1 10 (level by level, as the tree is expanded, they would be 2; 4, 6; 8, 10).
    expect(out.samples.map((s) => s.envStep)).toEqual([6, 8, 4, 10, 2]);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// External transitions
// ---------------------------------------------------------------------------------------------------------------

describe("external transitions", () => {
  it("receive item.prompt, the branch's completions, numAgents, the item and histories including this turn", async () => {
    const item: Item = { prompt: "Q", extra: 7 };
    const { transition, calls } = recordingTransition(appendTransition);
    const formatter: Formatter = (it, ext) => `F(${ext ?? String(it.prompt)})`;
    const { reward, calls: rewardCalls } = recordingReward(turnDigitReward);
    await rolloutItem(
      item,
      5,
      makeEnv(2, { formatters: [formatter, formatter], rewardFunc: reward, externalTransition: transition }),
      makeSettings({ numTurns: 2 }),
      0,
    );
    expect(calls).toHaveLength(2);
    for (const j of [0, 1]) {
      expect(calls[j]).toEqual({
        prompt: "Q", // the raw item prompt, not the formatted one
        agentCompletions: [`0:F(Q):${j}`, `1:F(Q):${j}`],
        numAgents: 2,
        promptHistoryPerAgent: [["F(Q)"], ["F(Q)"]],
        responseHistoryPerAgent: [[`0:F(Q):${j}`], [`1:F(Q):${j}`]],
        item: { prompt: "Q", extra: 7 },
      });
    }
    // the children's reward contexts carry the branch histories
    expect(rewardCalls).toHaveLength(3);
    expect(rewardCalls[0].context).toMatchObject({ itemIndex: 5, turn: 0, prompts: ["F(Q)", "F(Q)"], promptHistory: [[], []], responseHistory: [[], []] });
    expect(rewardCalls[2].context).toMatchObject({
      itemIndex: 5,
      turn: 1,
      prompts: ["F(0:F(Q):1>)", "F(1:F(Q):1>)"],
      promptHistory: [["F(Q)"], ["F(Q)"]],
      responseHistory: [["0:F(Q):1"], ["1:F(Q):1"]],
    });
    expect(rewardCalls[2].context.item).toBe(item);
  });

  it("pass '' as the prompt when the item has no string prompt", async () => {
    const { transition, calls } = recordingTransition(() => ["next"]);
    await rolloutItem({ question: "?" }, 0, makeEnv(1, { externalTransition: transition }), makeSettings({ numTurns: 2 }), 0);
    expect(calls[0].prompt).toBe("");
  });

  it("see the cross branch's own pair of completions and histories", async () => {
    const { transition, calls } = recordingTransition(appendTransition);
    await rolloutItem(ITEM, 0, makeEnv(2, { externalTransition: transition }), makeSettings({ numTurns: 2, jointMode: "cross" }), 0);
    expect(calls.map((c) => c.agentCompletions)).toEqual([
      ["0:Q:0", "1:Q:0"],
      ["0:Q:0", "1:Q:1"],
      ["0:Q:1", "1:Q:0"],
      ["0:Q:1", "1:Q:1"],
    ]);
    expect(calls[2].responseHistoryPerAgent).toEqual([["0:Q:1"], ["1:Q:0"]]);
  });

  it("accumulate histories over three turns", async () => {
    // N=1, K=1, default formatter (so formatted = raw): prompts Q → "0:Q:0>" → "0:0:Q:0>:0>"
    const { transition, calls } = recordingTransition(appendTransition);
    const out = await rolloutItem(ITEM, 0, makeEnv(1, { externalTransition: transition }), makeSettings({ numGenerations: 1, numTurns: 3 }), 0);
    expect(calls).toHaveLength(2);
    expect(calls[1].promptHistoryPerAgent).toEqual([["Q", "0:Q:0>"]]);
    expect(calls[1].responseHistoryPerAgent).toEqual([["0:Q:0", "0:0:Q:0>:0"]]);
    const grandchild = child(child(out.root, 0), 0);
    expect(grandchild.prompts).toEqual(["0:0:Q:0>:0>"]);
    expect(grandchild.promptHistory).toEqual([["Q", "0:Q:0>"]]);
    expect(out.envSteps).toBe(3);
  });

  it("reject a wrong-length result, naming the item, turn and joint action", async () => {
    const transition: ExternalTransition = () => ["only one"];
    const run = rolloutItem(ITEM, 7, makeEnv(2, { externalTransition: transition }), makeSettings({ numTurns: 2 }), 0);
    await expect(run).rejects.toThrow(/External transition must return per-agent prompts/);
    await expect(
      rolloutItem(ITEM, 7, makeEnv(2, { externalTransition: transition }), makeSettings({ numTurns: 2 }), 0),
    ).rejects.toThrow(/item 7, turn 1, joint action 0/);
  });

  it("reject non-string prompts and non-array results, naming the failing joint action", async () => {
    let call = 0;
    // the first branch is fine, the second returns a number for agent 1
    const transition = illTyped<ExternalTransition>(() => (call++ === 0 ? ["a", "b"] : ["a", 3]));
    await expect(rolloutItem(ITEM, 2, makeEnv(2, { externalTransition: transition }), makeSettings({ numTurns: 2 }), 0)).rejects.toThrow(
      /External transition must return per-agent prompts.*item 2, turn 1, joint action 1/,
    );
    const notArray = illTyped<ExternalTransition>(() => "a prompt");
    await expect(rolloutItem(ITEM, 0, makeEnv(1, { externalTransition: notArray }), makeSettings({ numTurns: 2 }), 0)).rejects.toThrow(
      /External transition must return per-agent prompts/,
    );
  });

  it("name the 1-based turn just completed when a later transition fails", async () => {
    const transition: ExternalTransition = ({ promptHistoryPerAgent }) => (promptHistoryPerAgent[0].length === 1 ? ["x"] : []);
    await expect(
      rolloutItem(ITEM, 4, makeEnv(1, { externalTransition: transition }), makeSettings({ numGenerations: 1, numTurns: 3 }), 0),
    ).rejects.toThrow(/item 4, turn 2, joint action 0/);
  });

  it("may be async", async () => {
    const transition: ExternalTransition = async ({ agentCompletions }) => {
      await new Promise((resolve) => setTimeout(resolve, 1));
      return agentCompletions.map((c) => `async ${c}`);
    };
    const out = await rolloutItem(ITEM, 0, makeEnv(1, { externalTransition: transition }), makeSettings({ numTurns: 2 }), 0);
    expect(child(out.root, 1).prompts).toEqual(["async 0:Q:1"]);
  });

  it("with externalPromptPassthrough use the returned prompt verbatim (formatters only at the root)", async () => {
    const formatterCalls: unknown[][] = [];
    const formatter: Formatter = (...args) => {
      formatterCalls.push(args);
      return `F(${String(args[0].prompt)})`;
    };
    const transition: ExternalTransition = ({ agentCompletions }) => agentCompletions.map((c) => `raw ${c}`);
    const out = await rolloutItem(
      ITEM,
      0,
      makeEnv(2, { formatters: [formatter, formatter], externalTransition: transition }),
      makeSettings({ numTurns: 2, externalPromptPassthrough: true }),
      0,
    );
    expect(out.root.prompts).toEqual(["F(Q)", "F(Q)"]);
    expect(child(out.root, 0).prompts).toEqual(["raw 0:F(Q):0", "raw 1:F(Q):0"]);
    expect(formatterCalls).toHaveLength(2);
    // the root call passes only the item
    expect(formatterCalls[0]).toEqual([ITEM]);
  });

  it("without passthrough format {...item, prompt: returned, _original_prompt} with the returned string", async () => {
    const item: Item = { prompt: "Q", tag: "t" };
    const calls: { agent: number; args: unknown[] }[] = [];
    const formatterFor =
      (agent: number): Formatter =>
      (...args) => {
        calls.push({ agent, args: structuredClone(args) });
        return `A${agent}[${args[1] ?? String(args[0].prompt)}]`;
      };
    const transition: ExternalTransition = ({ agentCompletions }) => agentCompletions.map((c, a) => `t${a}:${c}`);
    const out = await rolloutItem(
      item,
      0,
      makeEnv(2, { formatters: [formatterFor(0), formatterFor(1)], externalTransition: transition }),
      makeSettings({ numTurns: 2, numGenerations: 1 }),
      0,
    );
    expect(out.root.prompts).toEqual(["A0[Q]", "A1[Q]"]);
    // branch 0 of K=1: the transition returns ["t0:0:A0[Q]:0", "t1:1:A1[Q]:0"]
    expect(calls.slice(2)).toEqual([
      { agent: 0, args: [{ prompt: "t0:0:A0[Q]:0", tag: "t", _original_prompt: "Q" }, "t0:0:A0[Q]:0"] },
      { agent: 1, args: [{ prompt: "t1:1:A1[Q]:0", tag: "t", _original_prompt: "Q" }, "t1:1:A1[Q]:0"] },
    ]);
    expect(child(out.root, 0).prompts).toEqual(["A0[t0:0:A0[Q]:0]", "A1[t1:1:A1[Q]:0]"]);
    // the caller's item is untouched
    expect(item).toEqual({ prompt: "Q", tag: "t" });
  });

  it("the prompt history records the raw transition prompt, not the formatted one (spec §4.2)", async () => {
    // Spec §4.2 / upstream magrpo.py: with externalPromptPassthrough=false, "MAGRPO then records the *raw* transition
    // prompt (not the formatted one) in the prompt history" (the root's entry is the formatted root prompt).
    // N=1, K=1, 3 turns, formatter "<…>", transition returns "T<history length>".
    //   root prompt "<Q>"; transition 1 → "T1" → child prompt "<T1>"; transition 2 sees history [<Q>, T1]
    const formatter: Formatter = (it, ext) => `<${ext ?? String(it.prompt)}>`;
    const { transition, calls } = recordingTransition(({ promptHistoryPerAgent }) => [`T${promptHistoryPerAgent[0].length}`]);
    const out = await rolloutItem(
      ITEM,
      0,
      makeEnv(1, { formatters: [formatter], externalTransition: transition }),
      makeSettings({ numGenerations: 1, numTurns: 3 }),
      0,
    );
    expect(child(out.root, 0).prompts).toEqual(["<T1>"]); // the node itself samples from the formatted prompt
    // Actual (tree.ts line 149 records node.prompts[agent], the formatted prompt): [["<Q>", "<T1>"]]
    expect(calls[1].promptHistoryPerAgent).toEqual([["<Q>", "T1"]]);
  });

  it("a multi-turn setting without a transition errors (unless the root terminates early)", async () => {
    await expect(rolloutItem(ITEM, 0, makeEnv(2), makeSettings({ numTurns: 2 }), 0)).rejects.toThrow(/externalTransition/);
    // single turn needs none
    await expect(rolloutItem(ITEM, 0, makeEnv(2), makeSettings({ numTurns: 1 }), 0)).resolves.toBeDefined();
    // the check happens only when a node is about to expand: an early-terminated root needs none
    const out = await rolloutItem(
      ITEM,
      0,
      makeEnv(2, { rewardFunc: (c) => c[0].map(() => 1) }),
      makeSettings({ numTurns: 2, earlyTerminationThreshold: 0 }),
      0,
    );
    expect(out.envSteps).toBe(2);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Rewards
// ---------------------------------------------------------------------------------------------------------------

describe("computeRewards", () => {
  const completions = [
    ["a0", "a1", "a2"],
    ["b0", "b1", "b2"],
  ];

  it('"node" batching makes one call with completions[agent][j] and the context', async () => {
    const { reward, calls } = recordingReward((c) => c[0].map((_, j) => j * 2));
    const out = await computeRewards(reward, completions, context0, "node", RewardProcessors.identity());
    expect(out).toEqual([0, 2, 4]);
    expect(calls).toHaveLength(1);
    expect(calls[0].completions).toEqual(completions);
    expect(calls[0].context).toBe(context0);
  });

  it('"jointAction" batching makes one call per joint action with one-element lists', async () => {
    // r = digit of agent 0's text + 10·digit of agent 1's: [0, 11, 22]
    const { reward, calls } = recordingReward((c) => [digitSum(c[0][0]) + 10 * digitSum(c[1][0])]);
    const out = await computeRewards(reward, completions, context0, "jointAction", RewardProcessors.identity());
    expect(out).toEqual([0, 11, 22]);
    expect(calls.map((c) => c.completions)).toEqual([
      [["a0"], ["b0"]],
      [["a1"], ["b1"]],
      [["a2"], ["b2"]],
    ]);
  });

  it("accepts a scalar for a single joint action, and a typed array", async () => {
    expect(await computeRewards(() => 4.5, completions, context0, "jointAction", RewardProcessors.identity())).toEqual([4.5, 4.5, 4.5]);
    expect(await computeRewards(() => 4.5, [["x"]], context0, "node", RewardProcessors.identity())).toEqual([4.5]);
    const typed = illTyped<RewardFunction>(() => Float64Array.of(1, 2, 3));
    expect(await computeRewards(typed, completions, context0, "node", RewardProcessors.identity())).toEqual([1, 2, 3]);
  });

  it("rejects a scalar for several joint actions (wrong count)", async () => {
    await expect(computeRewards(() => 1, completions, context0, "node", RewardProcessors.identity())).rejects.toThrow(
      /returned 1 values for 3 joint actions at item 3, turn 2, joint actions 0..2/,
    );
  });

  it("rejects a wrong count", async () => {
    const p = computeRewards(() => [1, 2], completions, context0, "node", RewardProcessors.identity());
    await expect(p).rejects.toBeInstanceOf(RewardError);
    await expect(computeRewards(() => [1, 2], completions, context0, "node", RewardProcessors.identity())).rejects.toThrow(
      /2 values for 3 joint actions/,
    );
    await expect(computeRewards(() => [1, 2], completions, context0, "jointAction", RewardProcessors.identity())).rejects.toThrow(
      /2 values for 1 joint actions at item 3, turn 2, joint action 0/,
    );
  });

  it("wraps a thrown error in a RewardError naming item, 1-based turn and joint actions, keeping the cause", async () => {
    const boom = new Error("boom");
    const thrower: RewardFunction = () => {
      throw boom;
    };
    const error = await computeRewards(thrower, completions, context0, "node", RewardProcessors.identity()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RewardError);
    expect((error as RewardError).name).toBe("RewardError");
    expect((error as RewardError).message).toBe("reward function threw at item 3, turn 2, joint actions 0..2: boom");
    expect((error as RewardError).cause).toBe(boom);

    // per joint action: only joint action 1 fails
    const picky: RewardFunction = (c) => {
      if (c[0][0] === "a1") throw new Error("bad a1");
      return [0];
    };
    await expect(computeRewards(picky, completions, context0, "jointAction", RewardProcessors.identity())).rejects.toThrow(
      "reward function threw at item 3, turn 2, joint action 1: bad a1",
    );
    // non-Error throws are stringified
    const throwsString: RewardFunction = () => {
      throw "plain";
    };
    await expect(computeRewards(throwsString, [["x"]], context0, "node", RewardProcessors.identity())).rejects.toThrow(/: plain$/);
  });

  it("rejects NaN, Infinity and non-numbers, naming the joint action", async () => {
    for (const [bad, shown] of [
      [Number.NaN, "NaN"],
      [Number.POSITIVE_INFINITY, "Infinity"],
      [Number.NEGATIVE_INFINITY, "-Infinity"],
      ["1", "1"],
      [null, "null"],
    ] as const) {
      const fn = illTyped<RewardFunction>(() => [0, bad, 2]);
      const error = await computeRewards(fn, completions, context0, "node", RewardProcessors.identity()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RewardError);
      expect((error as Error).message).toBe(`reward function returned ${shown} (not a finite number) at item 3, turn 2, joint action 1`);
    }
    const nanScalar = (() => Number.NaN) as RewardFunction;
    await expect(computeRewards(nanScalar, completions, context0, "jointAction", RewardProcessors.identity())).rejects.toThrow(
      /NaN \(not a finite number\) at item 3, turn 2, joint action 0/,
    );
  });

  it("rejects a non-array, non-number result", async () => {
    for (const value of ["3", { reward: 1 }, undefined]) {
      const fn = illTyped<RewardFunction>(() => value);
      await expect(computeRewards(fn, completions, context0, "node", RewardProcessors.identity())).rejects.toThrow(
        new RegExp(`returned ${typeof value} at item 3, turn 2, joint actions 0..2; expected an array of numbers`),
      );
    }
  });

  it("awaits async reward functions (both batchings)", async () => {
    const asyncReward: RewardFunction = async (c) => {
      await new Promise((resolve) => setTimeout(resolve, 1));
      return c[0].map((t) => digitSum(t) + 0.5);
    };
    expect(await computeRewards(asyncReward, completions, context0, "node", RewardProcessors.identity())).toEqual([0.5, 1.5, 2.5]);
    expect(await computeRewards(asyncReward, completions, context0, "jointAction", RewardProcessors.identity())).toEqual([0.5, 1.5, 2.5]);
    const rejecting: RewardFunction = async () => {
      throw new Error("async boom");
    };
    await expect(computeRewards(rejecting, completions, context0, "node", RewardProcessors.identity())).rejects.toThrow(
      /threw at item 3, turn 2, joint actions 0..2: async boom/,
    );
  });

  it("applies the processor to every reward", async () => {
    // [1, 2, 3] · 2 = [2, 4, 6]; clamp(0, 2.5) → [1, 2, 2.5]
    expect(await computeRewards(() => [1, 2, 3], completions, context0, "node", RewardProcessors.scale(2))).toEqual([2, 4, 6]);
    expect(await computeRewards(() => [1, 2, 3], completions, context0, "node", RewardProcessors.clamp(0, 2.5))).toEqual([1, 2, 2.5]);
  });

  it("rejects a processor that produces NaN or Infinity, naming the joint action", async () => {
    const sqrt = (x: number) => Math.sqrt(x);
    await expect(computeRewards(() => [4, -1, 9], completions, context0, "node", sqrt)).rejects.toThrow(
      "reward processor turned -1 into NaN at item 3, turn 2, joint action 1",
    );
    // e^(1000·1) − 1 overflows to Infinity
    const error = await computeRewards(() => [0, 0, 1], completions, context0, "node", RewardProcessors.exponentialScale(1000)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RewardError);
    expect((error as Error).message).toBe("reward processor turned 1 into Infinity at item 3, turn 2, joint action 2");
  });
});

describe("RewardProcessors", () => {
  it("identity", () => {
    expect(RewardProcessors.identity()(3.7)).toBe(3.7);
    expect(RewardProcessors.identity()(-2)).toBe(-2);
  });

  it("clamp defaults to −10..10", () => {
    const clamp = RewardProcessors.clamp();
    expect(clamp(15)).toBe(10);
    expect(clamp(-12)).toBe(-10);
    expect(clamp(3)).toBe(3);
    expect(clamp(10)).toBe(10);
    expect(RewardProcessors.clamp(0, 1)(2)).toBe(1);
    expect(RewardProcessors.clamp(0, 1)(-0.5)).toBe(0);
  });

  it("scale", () => {
    expect(RewardProcessors.scale(2.5)(4)).toBe(10);
    expect(RewardProcessors.scale(-0.5)(3)).toBe(-1.5);
    expect(RewardProcessors.scale()(7)).toBe(7); // default factor 1
  });

  it("sigmoidScale = 1/(1+e^−x)", () => {
    const s = RewardProcessors.sigmoidScale();
    expect(s(0)).toBeCloseTo(0.5, 12);
    // x = ln 3: 1/(1 + 1/3) = 0.75;  x = −ln 3: 1/(1 + 3) = 0.25
    expect(s(Math.log(3))).toBeCloseTo(0.75, 12);
    expect(s(-Math.log(3))).toBeCloseTo(0.25, 12);
  });

  it("exponentialScale: x>0 → e^{fx}−1, else 1−e^{−fx}", () => {
    const e2 = RewardProcessors.exponentialScale(2);
    // f=2, x=0.5: e^1 − 1 = 1.718281828…
    expect(e2(0.5)).toBeCloseTo(Math.E - 1, 12);
    expect(e2(0.5)).toBeCloseTo(1.718281828459045, 12);
    // f=2, x=−0.5: 1 − e^{1} = −1.718281828…
    expect(e2(-0.5)).toBeCloseTo(1 - Math.E, 12);
    // x=0 takes the "else" branch: 1 − e^0 = 0
    expect(e2(0)).toBe(0);
    // default f=1, x=1: e − 1; x=−2: 1 − e² = −6.389056…
    expect(RewardProcessors.exponentialScale()(1)).toBeCloseTo(Math.E - 1, 12);
    expect(RewardProcessors.exponentialScale()(-2)).toBeCloseTo(1 - Math.E ** 2, 12);
    expect(RewardProcessors.exponentialScale()(-2)).toBeCloseTo(-6.38905609893065, 12);
  });
});

describe("rewards inside rolloutItem", () => {
  it('"node" batching: one reward call per node (2-turn aligned K=2 → 3 calls)', async () => {
    const { reward, calls } = recordingReward(turnDigitReward);
    await rolloutItem(ITEM, 0, makeEnv(2, { rewardFunc: reward, externalTransition: appendTransition }), makeSettings({ numTurns: 2 }), 0);
    expect(calls).toHaveLength(3);
    expect(calls.map((c) => c.context.turn)).toEqual([0, 1, 1]);
    expect(calls[1].completions).toEqual([
      ["0:0:Q:0>:0", "0:0:Q:0>:1"],
      ["1:1:Q:0>:0", "1:1:Q:0>:1"],
    ]);
  });

  it('"jointAction" batching: one call per joint action with one-element lists (aligned 2+2·2 = 6, cross 4+4·4 = 20)', async () => {
    const aligned = recordingReward(turnDigitReward);
    const out = await rolloutItem(
      ITEM,
      0,
      makeEnv(2, { rewardFunc: aligned.reward, externalTransition: appendTransition }),
      makeSettings({ numTurns: 2, rewardBatching: "jointAction" }),
      0,
    );
    expect(aligned.calls).toHaveLength(6);
    expect(aligned.calls.every((c) => c.completions.length === 2 && c.completions.every((l) => l.length === 1))).toBe(true);
    expect(aligned.calls[1].completions).toEqual([["0:Q:1"], ["1:Q:1"]]);
    // same numbers as with node batching
    expect(out.root.rewards).toEqual([2, 5]);
    expect(out.root.returns).toEqual([13, 22]);

    const cross = recordingReward(turnDigitReward);
    const crossOut = await rolloutItem(
      ITEM,
      0,
      makeEnv(2, { rewardFunc: cross.reward, externalTransition: appendTransition }),
      makeSettings({ numTurns: 2, jointMode: "cross", rewardBatching: "jointAction" }),
      0,
    );
    expect(cross.calls).toHaveLength(20);
    expect(cross.calls[2].completions).toEqual([["0:Q:1"], ["1:Q:0"]]);
    expect(crossOut.root.returns).toEqual([13, 19, 16, 22]);
  });

  it("applies the reward processor before returns and termination", async () => {
    // turnDigitReward scaled by 0.5: root [1, 2.5]; children [4, 7], [7, 10] (means 5.5, 8.5); R = [6.5, 11]
    const out = await rolloutItem(
      ITEM,
      0,
      makeEnv(2, { rewardFunc: turnDigitReward, rewardProcessor: RewardProcessors.scale(0.5), externalTransition: appendTransition }),
      makeSettings({ numTurns: 2 }),
      0,
    );
    expect(out.root.rewards).toEqual([1, 2.5]);
    expect(out.root.returns).toEqual([6.5, 11]);
    // clamp(3, 10): root raw [2, 5] → [3, 5], mean 4 > 3.6 → terminated (the raw mean 3.5 would not be)
    const clamped = await rolloutItem(
      ITEM,
      0,
      makeEnv(2, { rewardFunc: turnDigitReward, rewardProcessor: RewardProcessors.clamp(3, 10), externalTransition: appendTransition }),
      makeSettings({ numTurns: 2, earlyTerminationThreshold: 3.6 }),
      0,
    );
    expect(clamped.root.rewards).toEqual([3, 5]);
    expect(clamped.envSteps).toBe(2);
  });

  it("a failing reward in a child names the item, the 1-based turn and the joint actions", async () => {
    const failAtTurn2: RewardFunction = (c, ctx) => {
      if (ctx.turn === 1) throw new Error("judge offline");
      return c[0].map(() => 0);
    };
    await expect(
      rolloutItem(ITEM, 4, makeEnv(2, { rewardFunc: failAtTurn2, externalTransition: appendTransition }), makeSettings({ numTurns: 2 }), 0),
    ).rejects.toThrow("reward function threw at item 4, turn 2, joint actions 0..1: judge offline");
    const err = await rolloutItem(
      ITEM,
      4,
      makeEnv(2, { rewardFunc: (c) => c[0].map((t) => (t.endsWith("1") ? Number.NaN : 0)) }),
      makeSettings({ numGenerations: 3 }),
      0,
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RewardError);
    expect((err as Error).message).toMatch(/NaN \(not a finite number\) at item 4, turn 1, joint action 1$/);
  });

  it("async reward functions work through the tree", async () => {
    const asyncReward: RewardFunction = async (c, ctx) => {
      await new Promise((resolve) => setTimeout(resolve, 1));
      return turnDigitReward(c, ctx);
    };
    const out = await rolloutItem(ITEM, 0, makeEnv(2, { rewardFunc: asyncReward, externalTransition: appendTransition }), makeSettings({ numTurns: 2 }), 0);
    expect(out.root.returns).toEqual([13, 22]);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Reference KL and concurrency
// ---------------------------------------------------------------------------------------------------------------

describe("reference KL", () => {
  it("records each agent's per-completion KL on nodes and samples (zeros without referenceKl)", async () => {
    const policies = [fakePolicy(0, { kl: true }), fakePolicy(1)];
    const out = await rolloutItem(ITEM, 0, makeEnv(2, { policies, externalTransition: appendTransition }), makeSettings({ numTurns: 2 }), 0);
    // agent 0: (0+1)/10 + j/100 → [0.1, 0.11]; agent 1 has no reference → [0, 0]
    for (const node of [out.root, child(out.root, 0), child(out.root, 1)]) {
      expect(node.referenceKl[0][0]).toBeCloseTo(0.1, 12);
      expect(node.referenceKl[0][1]).toBeCloseTo(0.11, 12);
      expect(node.referenceKl[1]).toEqual([0, 0]);
    }
    expect(out.samples.filter((s) => s.agent === 0).every((s) => Math.abs(s.referenceKl[1] - 0.11) < 1e-12)).toBe(true);
    expect(out.samples.filter((s) => s.agent === 1).every((s) => s.referenceKl.every((x) => x === 0))).toBe(true);
    // one KL call per level, with exactly what the policy sampled
    expect(policies[0].klCalls).toHaveLength(2);
    expect(policies[0].klCalls[1].promptIds.map(decodePrompt)).toEqual(["0:Q:0>", "0:Q:1>"]);
    expect(Array.from(policies[0].klCalls[1].completions[1][0])).toEqual([0, 1, 1, 0]);
  });
});

describe("generation concurrency", () => {
  it("runs agents one after another when not concurrent, together when concurrent, consuming in agent order", async () => {
    for (const concurrent of [false, true]) {
      const events: string[] = [];
      // agent 0 is slower than agent 1
      const policies = [fakePolicy(0, { events, delayMs: 20 }), fakePolicy(1, { events, delayMs: 1 })];
      const out = await rolloutItem(ITEM, 0, makeEnv(2, { policies, concurrent }), makeSettings(), 0);
      expect(events).toEqual(concurrent ? ["start 0", "start 1", "end 1", "end 0"] : ["start 0", "end 0", "start 1", "end 1"]);
      expect(out.root.texts).toEqual([
        ["0:Q:0", "0:Q:1"],
        ["1:Q:0", "1:Q:1"],
      ]);
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Formatters
// ---------------------------------------------------------------------------------------------------------------

describe("formatters", () => {
  it("defaultFormatter uses externalPrompt ?? item.prompt ?? ''", () => {
    expect(defaultFormatter({ prompt: "Q" })).toBe("Q");
    expect(defaultFormatter({ prompt: "Q" }, "E")).toBe("E");
    expect(defaultFormatter({ prompt: "Q" }, "")).toBe(""); // "" is a given external prompt
    expect(defaultFormatter({})).toBe("");
    expect(defaultFormatter({ prompt: 42 })).toBe("");
    expect(defaultFormatter({}, "E")).toBe("E");
  });

  it("buildFormatters: none → the default for every agent", () => {
    expect(buildFormatters(null, 3)).toEqual([defaultFormatter, defaultFormatter, defaultFormatter]);
    expect(buildFormatters(undefined, 2)).toEqual([defaultFormatter, defaultFormatter]);
  });

  it("buildFormatters: a single function is shared by all agents", () => {
    const f: Formatter = (item) => `x${String(item.prompt)}`;
    const built = buildFormatters(f, 3);
    expect(built).toHaveLength(3);
    expect(built.every((g) => g === f)).toBe(true);
  });

  it("buildFormatters: a list must match the agent count and hold functions", () => {
    const f: Formatter = () => "f";
    const g: Formatter = () => "g";
    const list = [f, g];
    const built = buildFormatters(list, 2);
    expect(built).toEqual([f, g]);
    expect(built).not.toBe(list); // a copy
    expect(() => buildFormatters([f], 2)).toThrow(RangeError);
    expect(() => buildFormatters([f], 2)).toThrow("Number of formatters (1) must match numAgents (2)");
    expect(() => buildFormatters([f, g, f], 2)).toThrow(/Number of formatters \(3\)/);
    expect(() => buildFormatters([f, illTyped<Formatter>("nope")], 2)).toThrow(/formatters\[1\] must be a function/);
    expect(() => buildFormatters(illTyped<Formatter>(42), 2)).toThrow(TypeError);
  });

  it("formatPrompt passes only the item without an external prompt and insists on a string", () => {
    const seen: number[] = [];
    const f: Formatter = (...args) => {
      seen.push(args.length);
      return "ok";
    };
    expect(formatPrompt(f, ITEM, 0)).toBe("ok");
    expect(formatPrompt(f, ITEM, 0, "E")).toBe("ok");
    expect(seen).toEqual([1, 2]);
    const bad = illTyped<Formatter>(() => 42);
    expect(() => formatPrompt(bad, ITEM, 1)).toThrow("formatter of agent 1 returned number, not a string");
  });

  it("in rolloutItem: a per-agent list shapes each agent's prompt; a non-string return names the agent", async () => {
    const out = await rolloutItem(
      { prompt: "Q", role: "critic" },
      0,
      makeEnv(2, { formatters: [(it) => `write ${String(it.prompt)}`, (it) => `${String(it.role)} ${String(it.prompt)}`] }),
      makeSettings(),
      0,
    );
    expect(out.root.prompts).toEqual(["write Q", "critic Q"]);
    expect(out.root.texts[1]).toEqual(["1:critic Q:0", "1:critic Q:1"]);
    const bad = illTyped<Formatter>(() => undefined);
    await expect(rolloutItem(ITEM, 0, makeEnv(2, { formatters: [defaultFormatter, bad] }), makeSettings(), 0)).rejects.toThrow(
      "formatter of agent 1 returned undefined, not a string",
    );
  });
});
