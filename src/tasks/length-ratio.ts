// CoMLRL's two length-coordination tasks (COMLRL-SPEC §8): the second writer's text should be 2–3× as long as the
// first's. Lengths are in characters.
import type { Formatter, RewardFunction } from "../rollout/types.js";

const clamp = (x: number) => Math.max(-1, Math.min(1, x));

/** Story length ratio: 1 inside the band 2 ≤ len₂/len₁ ≤ 3, exp(−distance to the band) outside; 0 when the first story is empty. */
export function storyLengthRatioReward(first: string, second: string): number {
  if (first.length === 0) return 0;
  const ratio = second.length / first.length;
  if (ratio >= 2 && ratio <= 3) return 1;
  return Math.exp(-(ratio < 2 ? 2 - ratio : ratio - 3));
}

/** TLDR dual length: mean of a ratio score (1 in [2, 3], linear decay outside, floor −1) and a short-length score, in [−1, 1]. */
export function tldrDualLengthReward(concise: string, detailed: string): number {
  if (concise.length === 0 || detailed.length === 0) return -1;
  const ratio = detailed.length / concise.length;
  const ratioScore = ratio < 2 ? 1 - (2 - ratio) / 2 : ratio > 3 ? 1 - (ratio - 3) / 3 : 1;
  const shortScore = clamp(1 - Math.abs(concise.length - 220) / 110);
  return clamp((Math.max(-1, ratioScore) + shortScore) / 2);
}

const pairwise =
  (reward: (first: string, second: string) => number): RewardFunction =>
  (completions) =>
    completions[0].map((a, j) => reward(a, completions[1][j]));

export const storyLengthRatioRewardFunc = pairwise(storyLengthRatioReward);
export const tldrDualLengthRewardFunc = pairwise(tldrDualLengthReward);

export const storyLengthRatioFormatters: Formatter[] = [(item) => `${item.prompt} Keep it short.`, (item) => `${item.prompt} Make it detailed.`];

export const tldrDualLengthFormatters: Formatter[] = [
  (item) => `Summarize concisely in about 220 characters:\n${item.prompt}\nTL;DR:`,
  (item) => `Summarize in detail, two to three times longer than a short summary:\n${item.prompt}\nSummary:`,
];
