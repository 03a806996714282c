// The vowel relay: letters, the sparse reward (0 before the last round) and the prompts the transition writes.
import { describe, expect, it } from "vitest";
import { getTask } from "../../src/tasks/registry.js";
import { relayLetter, vowelCoverage, vowelRelayReward, vowelRelayTransition } from "../../src/tasks/vowel-relay.js";

const context = (turn: number, responseHistory: string[][]) => ({ itemIndex: 0, item: {}, turn, prompts: ["", ""], promptHistory: [[], []], responseHistory });

describe("vowel relay", () => {
  it("takes each reply's first non-space letter and scores the fraction of the five vowels", () => {
    expect(relayLetter("  Apple")).toBe("a");
    expect(relayLetter("")).toBe("");
    expect(vowelCoverage(["a", "e", "x", "a"])).toBeCloseTo(2 / 5, 12);
  });

  it("rewards only the last round, with every letter of the branch", async () => {
    const reward = vowelRelayReward(3);
    expect(await reward([["a", "x"], ["e", "y"]], context(0, [[], []]))).toEqual([0, 0]);
    expect(await reward([["a"], ["e"]], context(1, [["i"], ["o"]]))).toEqual([0]);
    // Rounds 1–2 wrote i, o, u, b; round 3 adds a and e: all five vowels.
    expect(await reward([["a", "z"], ["e", "z"]], context(2, [["i", "u"], ["o", "b"]]))).toEqual([1, 3 / 5]);
  });

  it("shows each writer every letter so far, in order", async () => {
    const prompts = await vowelRelayTransition({ prompt: "", agentCompletions: ["u", "b"], numAgents: 2, promptHistoryPerAgent: [[], []], responseHistoryPerAgent: [["a", "u"], ["e", "b"]], item: {} });
    expect(prompts[0]).toContain("You are writer A");
    expect(prompts[1]).toContain("You are writer B");
    expect(prompts[0]).toContain("Letters so far: a e u b");
    const task = getTask("vowel-relay", { turns: 4 });
    expect(task.externalTransition).toBe(vowelRelayTransition);
    expect(() => getTask("vowel-relay", { turns: 1 })).toThrow(/turns must be an integer ≥ 2/);
  });
});
