// A TLDR-style writing collaboration sized for a small instruct model (the real-model benchmark and learning curve,
// docs/performance.md): writer 0 sums a paragraph up in one sentence, writer 1 gives a detailed account of it. The
// shared reward, in [0, 1], is the mean of three parts, each continuous so that a group of samples is rarely tied:
//   form        the summary is one sentence ending in . ! or ? (0.5) and short: 0.5 at ≤ 15 words, 0 at ≥ 30
//   length      the account's characters over the summary's: 0 at ≤ 1×, 1 at ≥ 4×
//   vocabulary  the account's unique words over the summary's: 0 at ≤ 1×, 1 at ≥ 3×
// The ratios' full marks sit where SmolLM2-135M-Instruct does not reach untrained (its summaries run long), so the
// reward starts under 0.5 and has room to rise. scripts/reference/compare_speed.py mirrors it for the CoMLRL side.
import type { Formatter, Item, RewardFunction } from "../rollout/types.js";
import type { ChatTemplate } from "./task.js";
import { countTokens, uniqueWordCount } from "./writing.js";

const clamp01 = (x: number) => Math.max(0, Math.min(1, x));

/** Python's len(): code points, not UTF-16 units. */
const characters = (text: string): number => [...text].length;

/** Sentence ends: a run of . ! ? followed by white space or the end of the text. */
export const sentenceCount = (text: string): number => (text.trim().match(/[.!?]+(?=\s|$)/g) ?? []).length;

/** The summary's form: one sentence that ends in . ! or ? earns 0.5; shortness the other 0.5 (full at ≤ 15 words, none at ≥ 30). */
export function summaryFormScore(summary: string): number {
  const trimmed = summary.trim();
  const oneSentence = sentenceCount(trimmed) === 1 && /[.!?]$/.test(trimmed) ? 0.5 : 0;
  return oneSentence + 0.5 * clamp01((30 - countTokens(trimmed)) / 15);
}

/** The shared reward of a summary and an account, in [0, 1]; 0 when the summary is empty. */
export function paragraphSummaryReward(summary: string, account: string): number {
  if (!summary.trim()) return 0;
  const length = clamp01((characters(account) / characters(summary) - 1) / 3);
  const uniqueSummary = uniqueWordCount(summary);
  const vocabulary = uniqueSummary === 0 ? 0 : clamp01((uniqueWordCount(account) / uniqueSummary - 1) / 2);
  return (summaryFormScore(summary) + length + vocabulary) / 3;
}

export const paragraphSummaryRewardFunc: RewardFunction = (completions) => completions[0].map((summary, j) => paragraphSummaryReward(summary, completions[1][j]));

/** Writer 0 is asked for one short sentence, writer 1 for a detailed account, each through the tokenizer's chat template. */
export function paragraphSummaryFormatters(applyChatTemplate: ChatTemplate): Formatter[] {
  const role = (system: string, instruction: string) => (item: Item) =>
    applyChatTemplate([
      { role: "system", content: system },
      { role: "user", content: `${instruction}\n\n${String(item.prompt)}` },
    ]);
  return [
    role("You write one-sentence summaries.", "Summarize this paragraph in one short sentence."),
    role("You write detailed accounts.", "Describe in detail everything this paragraph says."),
  ];
}
