// "Vowel relay": a cooperative multi-turn task with a sparse reward, for comparing how MAGRPO, IAC and MAAC assign
// credit over turns. Over `turns` rounds each of two writers adds one letter (the first non-space character of its
// reply) after seeing every letter written so far; only the last round is rewarded, with the fraction of the five
// vowels among all the letters. Each writer adds `turns` letters, so neither can reach 1 alone (3 turns: 0.6), and
// nothing before the end says whether a letter helped: credit has to flow back through returns or a critic.
import type { ExternalTransition, Formatter, Item, RewardFunction } from "../rollout/types.js";

const VOWELS = ["a", "e", "i", "o", "u"];
const ROLES = ["A", "B"];

/** The letter a reply contributes: its first non-space character, lower-cased ("" for an empty reply). */
export function relayLetter(text: string): string {
  return text.replace(/\s+/g, "").slice(0, 1).toLowerCase();
}

/** The fraction of the five vowels among the letters. */
export function vowelCoverage(letters: readonly string[]): number {
  const used = new Set(letters);
  return VOWELS.filter((v) => used.has(v)).length / VOWELS.length;
}

const prompt = (role: string, letters: readonly string[]) =>
  `You are writer ${role}. Together you write the five vowels, one letter each per round.\nLetters so far: ${letters.length ? letters.join(" ") : "(none)"}\nYour letter:`;

/** 0 before the last turn; at the last, the coverage of every letter both writers wrote along the branch. */
export function vowelRelayReward(turns: number): RewardFunction {
  return (completions, context) =>
    completions[0].map((_, j) => {
      if (context.turn < turns - 1) return 0;
      const earlier = context.responseHistory.flatMap((history) => history.map(relayLetter));
      return vowelCoverage([...earlier, ...completions.map((c) => relayLetter(c[j]))]);
    });
}

/** Round 1 shows no letters; later rounds get the transition's prompt. */
export const vowelRelayFormatters: Formatter[] = ROLES.map((role) => (_item: Item, external?: string) => external ?? prompt(role, []));

/** The next round's prompts: each writer sees all letters so far, in the order they were written. */
export const vowelRelayTransition: ExternalTransition = ({ responseHistoryPerAgent }) => {
  const rounds = responseHistoryPerAgent[0].length;
  const letters = Array.from({ length: rounds }, (_, t) => responseHistoryPerAgent.map((history) => relayLetter(history[t]))).flat();
  return ROLES.map((role) => prompt(role, letters));
};

/** Items only seed the episodes; the task is the same in each. */
export function vowelRelayDataset(count = 16): Item[] {
  return Array.from({ length: count }, (_, i) => ({ prompt: `relay ${i + 1}` }));
}
