// The demo's cooperative task, "cover the vowels": two writers each contribute three letters (the first three
// non-space characters of their reply) and share one reward, the fraction of the five vowels a, e, i, o, u that
// appear among the six. One writer alone can reach at most 3/5 = 0.6, so a reward above that needs a division of
// labour the two must discover together — which vowels each one writes — under the shared reward only.
import type { Formatter, Item, RewardFunction } from "../rollout/types.js";

const VOWELS = ["a", "e", "i", "o", "u"];
export const LETTERS_PER_WRITER = 3;
/** The most one writer can earn alone. */
export const SOLO_CEILING = LETTERS_PER_WRITER / VOWELS.length;

/** The letters a writer contributes: its first three non-space characters, lower-cased. */
export function contribution(text: string): string[] {
  return [...text.replace(/\s+/g, "").toLowerCase()].slice(0, LETTERS_PER_WRITER);
}

export function coverVowelsReward(a: string, b: string): number {
  const used = new Set([...contribution(a), ...contribution(b)]);
  return VOWELS.filter((v) => used.has(v)).length / VOWELS.length;
}

/** The shared reward for a node's joint actions: completions[agent][j]. */
export const coverVowelsRewardFunc: RewardFunction = (completions) => completions[0].map((a, j) => coverVowelsReward(a, completions[1][j]));

const TOPICS = ["a song", "a game", "a code", "a chant", "a puzzle", "a signal", "a rhyme", "a pattern"];

/** Items differ only in wording; the task is the same in each. */
export function coverVowelsDataset(count = 16): Item[] {
  return Array.from({ length: count }, (_, i) => ({
    prompt: `Together write the five vowels as ${TOPICS[i % TOPICS.length]}. Each of you writes three letters.`,
  }));
}

/** Each writer sees the task and its own role, through the tokenizer's chat template. */
export function coverVowelsFormatters(applyChatTemplate: (messages: { role: string; content: string }[]) => string): Formatter[] {
  return ["A", "B"].map((role) => (item: Item) =>
    applyChatTemplate([
      { role: "system", content: `You are writer ${role}.` },
      { role: "user", content: String(item.prompt) },
    ]),
  );
}
