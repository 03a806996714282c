// The writing tasks' level-gated rewards on hand-made pairs, each level's expectation computed by hand; the
// length-ratio tasks; the registry's lookups and errors.
import { describe, expect, it } from "vitest";
import type { RewardContext } from "../../src/rollout/types.js";
import { storyLengthRatioReward, tldrDualLengthReward } from "../../src/tasks/length-ratio.js";
import { getTask, listTasks } from "../../src/tasks/registry.js";
import {
  ARXIV_REWARD,
  bandScore,
  jaccardSimilarity,
  TLDR_REWARD,
  transitionCategories,
  transitionScore,
  writingRewardBreakdown,
} from "../../src/tasks/writing.js";

const context = (item: Record<string, unknown> = {}): RewardContext => ({ itemIndex: 0, item, turn: 0, prompts: [], promptHistory: [], responseHistory: [] });
const words = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`).join(" ");

describe("TLDR reward levels", () => {
  it("L1: a text outside 8–256 tokens earns nothing", () => {
    const r = writingRewardBreakdown("too short", words("w", 20), TLDR_REWARD);
    expect(r).toMatchObject({ total: 0, stoppedAt: 1 });
    expect(writingRewardBreakdown(words("a", 10), words("b", 257), TLDR_REWARD).total).toBe(0);
  });

  it("L2: a length ratio outside [1.1, 5] stops at 0.5", () => {
    const first = words("a", 10);
    expect(writingRewardBreakdown(first, first, TLDR_REWARD)).toMatchObject({ total: 0.5, stoppedAt: 2 });
  });

  it("L3: too little new vocabulary stops after the length credit", () => {
    // Second = first written twice: ratio (2·39 + 1)/39 ≈ 2.03 → full L2; unique-word ratio 1 < 1.3 → stop.
    const first = words("a", 10);
    const r = writingRewardBreakdown(first, `${first} ${first}`, TLDR_REWARD);
    expect(r).toMatchObject({ structure: 0.5, length: 1, vocabulary: 0, stoppedAt: 3 });
    expect(r.total).toBeCloseTo(1.5, 12);
  });

  it("L2 and L3 ramps, and L4 = 0.4·transition + 0.6·capped Jaccard", () => {
    // first: 10 unique words, 10·2 + 9 = 29 chars ("a0".."a9"). second: 14 unique words incl. the 10 of first.
    const first = words("a", 10);
    const second = `${first} b0 b1 b2 b3`; // 29 + 4·3 = 41 chars → ratio 41/29 ≈ 1.414 on the lower ramp
    const ratio = 41 / 29;
    const r = writingRewardBreakdown(first, second, TLDR_REWARD);
    expect(r.length).toBeCloseTo((ratio - 1.1) / 0.5, 12);
    expect(r.vocabulary).toBeCloseTo(0.5 * ((14 / 10 - 1.3) / 0.7), 12);
    // No transition phrase in "a0 … b3"; Jaccard 10/14 ≥ 0.03 → full overlap part.
    expect(transitionCategories(second)).toEqual([]);
    expect(r.style).toBeCloseTo(0.6, 12);
    expect(r.total).toBeCloseTo(0.5 + (ratio - 1.1) / 0.5 + 0.5 * ((1.4 - 1.3) / 0.7) + 0.6, 12);
  });

  it("a good pair reaches every level: 2 from L1–L3, then the style level", () => {
    const concise = "Roommate keeps eating my labeled food despite polite talks.";
    const detailed =
      "Furthermore, my roommate eats labeled groceries weekly; however, two calm talks only brought apologies. " +
      "Therefore I weigh buying a locking fridge versus asking our landlord for help.";
    // 182/59 ≈ 3.08 chars (full L2); 27/9 unique words ≥ 2 (full L3); Jaccard 3/26 ≥ 0.03 (full overlap part).
    expect(transitionCategories(detailed)).toHaveLength(5);
    const r = writingRewardBreakdown(concise, detailed, TLDR_REWARD);
    expect(r).toMatchObject({ structure: 0.5, length: 1, vocabulary: 0.5, stoppedAt: null });
    expect(r.style).toBeCloseTo(0.4 * (0.4 + 4 * 0.05) + 0.6, 12);
    expect(r.total).toBeCloseTo(2.84, 12);
  });

  it("transition score: 0.4 for one category, +0.05 per further one; substring matching as upstream", () => {
    expect(transitionScore(0)).toBe(0);
    expect(transitionScore(1)).toBeCloseTo(0.4, 12);
    expect(transitionScore(12)).toBeCloseTo(0.95, 12);
    // "also" is elaboration; "so" (cause_effect) matches inside it; "as" (time) does not occur.
    expect(transitionCategories("also").sort()).toEqual(["cause_effect", "elaboration"]);
  });

  it("Jaccard ignores stopwords and is 1 for two texts without content words", () => {
    expect(jaccardSimilarity("the cat sat", "a cat ran")).toBeCloseTo(1 / 3, 12);
    expect(jaccardSimilarity("the a", "of to")).toBe(1);
  });
});

describe("arXiv reward levels", () => {
  it("needs 128–256 tokens each and a ratio in [0.8, 1.5]; full L2 in [1, 1.3]", () => {
    const first = words("a", 130);
    expect(writingRewardBreakdown(first, words("b", 100), ARXIV_REWARD)).toMatchObject({ total: 0, stoppedAt: 1 });
    expect(writingRewardBreakdown(first, words("b", 250), ARXIV_REWARD)).toMatchObject({ total: 0.5, stoppedAt: 2 });
    // Same lengths, disjoint vocabularies: L2 1, L3 ratio 1 → 0.5, L4 Jaccard 0 and no transitions → 0.
    const r = writingRewardBreakdown(first, words("b", 130), ARXIV_REWARD);
    expect(r).toMatchObject({ structure: 0.5, length: 1, vocabulary: 0.5, style: 0, stoppedAt: null });
  });

  it("looks for transitions in both texts and caps Jaccard at 0.23", () => {
    const first = `${words("a", 129)} however`;
    const second = words("a", 130);
    const r = writingRewardBreakdown(first, second, ARXIV_REWARD);
    // "however" gives contrast and concession; Jaccard 129/131 > 0.23 → 1.
    expect(r.style).toBeCloseTo(0.4 * 0.45 + 0.6, 12);
  });

  it("bands ramp linearly to zero at their edges", () => {
    expect(bandScore(0.9, ARXIV_REWARD.length)).toBeCloseTo(0.5, 12);
    expect(bandScore(1.4, ARXIV_REWARD.length)).toBeCloseTo(0.5, 12);
    expect(bandScore(1.6, ARXIV_REWARD.length)).toBeNull();
    expect(bandScore(10, TLDR_REWARD.vocabulary)).toBe(1);
  });
});

describe("length-ratio tasks", () => {
  it("story: 1 in the band, exp(−distance) outside, 0 for an empty first story", () => {
    expect(storyLengthRatioReward("abcd", "a".repeat(10))).toBe(1);
    expect(storyLengthRatioReward("abcd", "a".repeat(4))).toBeCloseTo(Math.exp(-1), 12);
    expect(storyLengthRatioReward("", "abc")).toBe(0);
  });

  it("TLDR dual length: mean of ratio and short-length scores", () => {
    const concise = "x".repeat(220);
    expect(tldrDualLengthReward(concise, "y".repeat(550))).toBe(1);
    // ratio 1 → 1 − 1/2 = 0.5; short score 1 → 0.75.
    expect(tldrDualLengthReward(concise, concise)).toBeCloseTo(0.75, 12);
    expect(tldrDualLengthReward("", "y")).toBe(-1);
  });
});

describe("task registry", () => {
  it("lists the tasks and builds each with its bundled sample", async () => {
    expect(listTasks()).toEqual(["arxiv", "coophumaneval", "cover-vowels", "humaneval", "paragraph-summary", "story-len-ratio", "tldr", "tldr-len-ratio", "vowel-relay"]);
    for (const name of ["tldr", "arxiv", "story-len-ratio", "tldr-len-ratio", "cover-vowels", "vowel-relay"]) {
      const task = getTask(name);
      expect(task.numAgents).toBe(2);
      expect(task.formatters).toHaveLength(2);
      const train = task.dataset();
      expect(train.length).toBeGreaterThanOrEqual(5);
      expect(task.dataset({ split: "eval" }).length).toBeGreaterThan(0);
      expect(task.dataset({ limit: 2 })).toHaveLength(2);
      for (const formatter of task.formatters) expect(typeof formatter(train[0])).toBe("string");
      const [reward] = (await task.rewardFunc([["a first text"], ["a second one"]], context(train[0]))) as number[];
      expect(reward).toBeGreaterThanOrEqual(task.rewardRange![0]);
      expect(reward).toBeLessThanOrEqual(task.rewardRange![1]);
    }
  });

  it("an unknown task names the known ones and the nearest; unknown and bad options are errors", () => {
    expect(() => getTask("tdlr")).toThrow(/unknown task "tdlr" \(did you mean "tldr"\?\); known tasks: arxiv, coophumaneval/);
    expect(() => getTask("tldr", { mode: "plain" })).toThrow(/task "tldr" has no option "mode"; its options: none/);
    expect(() => getTask("humaneval", { mode: "expert" })).toThrow(/option mode must be one of "level_feedback", "plain"/);
    expect(() => getTask("humaneval", { shift: "yes" })).toThrow(/option shift must be true or false/);
    expect(() => getTask("tldr").dataset({ limit: 0 })).toThrow(/limit must be a positive integer/);
  });

  it("the writing formatters name the field an item lacks", () => {
    expect(() => getTask("arxiv").formatters[0]({ prompt: "x" })).toThrow(/no text in its "abstract_text" field/);
  });
});
