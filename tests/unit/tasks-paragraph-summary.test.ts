// The paragraph-summary task (the real-model benchmark's): each part of its reward on hand-made pairs, the value
// worked out by hand, and the task as the registry builds it.
import { describe, expect, it } from "vitest";
import { paragraphs } from "../../src/tasks/data/paragraphs.js";
import { paragraphSummaryReward, sentenceCount, summaryFormScore } from "../../src/tasks/paragraph-summary.js";
import { getTask } from "../../src/tasks/registry.js";

const words = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`).join(" ");

describe("paragraph-summary reward", () => {
  it("counts sentence ends, not abbreviations' inner dots or a trailing run", () => {
    expect(sentenceCount("One. Two! Three?")).toBe(3);
    expect(sentenceCount("Version 1.5 shipped...")).toBe(1);
    expect(sentenceCount("no end")).toBe(0);
  });

  it("form: one sentence earns 0.5, shortness the rest (full at 15 words, none at 30)", () => {
    expect(summaryFormScore(`${words("w", 10)}.`)).toBe(1);
    expect(summaryFormScore(`${words("w", 20)}.`)).toBeCloseTo(0.5 + 0.5 * (10 / 15), 12);
    expect(summaryFormScore(`${words("w", 30)}.`)).toBe(0.5);
    expect(summaryFormScore(`${words("w", 10)}`)).toBe(0.5); // no closing mark: not a sentence
    expect(summaryFormScore(`${words("w", 4)}. ${words("v", 4)}.`)).toBe(0.5); // two sentences
  });

  it("length and vocabulary ratios: 0 at 1×, full at 4× the characters and 3× the unique words", () => {
    const summary = `${words("a", 10)}.`; // one sentence of 10 words, 30 characters: form 1
    // The same text again: ratio 1 on both → only the form counts.
    expect(paragraphSummaryReward(summary, summary)).toBeCloseTo(1 / 3, 12);
    // Four copies: characters 4× + 3 (full length credit); unique words unchanged (no vocabulary credit).
    expect(paragraphSummaryReward(summary, [summary, summary, summary, summary].join(" "))).toBeCloseTo(2 / 3, 12);
    // 20 new words: unique 30 = 3× (full vocabulary credit); characters 30 + 1 + 29 + 1 + 30 = 91, under 4× → (91/30 − 1) / 3.
    const longer = `${summary} ${words("b", 10)} ${words("c", 10)}.`;
    expect(longer.length).toBe(91);
    expect(paragraphSummaryReward(summary, longer)).toBeCloseTo((1 + (91 / 30 - 1) / 3 + 1) / 3, 12);
    // 5 new words: vocabulary (15/10 − 1) / 2 = 0.25; characters (30 + 1 + 14 + 1) / 30 = 46/30 → (46/30 − 1) / 3.
    const account = `${summary} ${words("b", 5)}.`;
    expect(account.length).toBe(46);
    expect(paragraphSummaryReward(summary, account)).toBeCloseTo((1 + (46 / 30 - 1) / 3 + 0.25) / 3, 12);
  });

  it("an empty summary earns 0", () => {
    expect(paragraphSummaryReward("  ", words("a", 50))).toBe(0);
  });
});

describe("paragraph-summary task", () => {
  it("holds 36 paragraphs (27 train, 9 eval) and renders them through the chat template given", async () => {
    expect(paragraphs).toHaveLength(36);
    const seen: string[] = [];
    const task = getTask("paragraph-summary", { chatTemplate: (messages: { role: string; content: string }[]) => (seen.push(messages[0].content), messages.map((m) => m.content).join("|")) });
    expect(task.dataset()).toHaveLength(27);
    expect(task.dataset({ split: "eval" })).toHaveLength(9);
    const item = task.dataset({ limit: 1 })[0];
    const [summaryPrompt, accountPrompt] = task.formatters.map((format) => format(item));
    expect(summaryPrompt).toBe(`You write one-sentence summaries.|Summarize this paragraph in one short sentence.\n\n${item.prompt}`);
    expect(accountPrompt).toContain("Describe in detail everything this paragraph says.");
    const rewards = await task.rewardFunc([["A bakery opens early."], [`${item.prompt}`]], { itemIndex: 0, item, turn: 0, prompts: [], promptHistory: [], responseHistory: [] });
    expect(rewards).toEqual([paragraphSummaryReward("A bakery opens early.", String(item.prompt))]);
  });
});
