// One item's candidates in an iterative round (COMLRL-SPEC §6.5 steps 2–4): the current policy's and the comparator's
// aligned joint candidates, each scored with the task reward (raw, then processed), and the index-aligned pairs
// between them — candidate i of the current policy against candidate i of the comparator, the higher reward winning
// on either side. A pair keeps each side's exact sampled ids; a side that is text only (an API's answers, a split
// centralized answer) is tokenized once here, with the trained agent's tokenizer, and marked as such.
import type { IterativePairSelection } from "../../../config/index.js";
import type { ComlrlTokenizer } from "../../../models/tokenizer.js";
import { computeRewards } from "../../../rollout/rewards.js";
import type { Item, RewardFunction, RewardProcessor } from "../../../rollout/types.js";
import type { SeededRandom } from "../../../util/random.js";
import type { IterativePair } from "./replay.js";
import { mean } from "../../../util/mean.js";

/** Aligned joint candidates: texts[agent][k], with the sampled ids (null when the candidates are text only). */
export interface Candidates {
  texts: string[][];
  completionIds: Int32Array[][] | null;
}

export interface ScoredCandidates extends Candidates {
  rawRewards: number[];
  rewards: number[];
}

/** Task rewards of joint candidates: raw (one call for all of them), then through the processor. */
export async function scoreCandidates(
  candidates: Candidates,
  rewardFunc: RewardFunction,
  processor: RewardProcessor,
  context: { item: Item; itemIndex: number; prompts: string[] },
): Promise<ScoredCandidates> {
  const agents = candidates.texts.length;
  const rewardContext = { ...context, turn: 0, promptHistory: Array.from({ length: agents }, () => []), responseHistory: Array.from({ length: agents }, () => []) };
  const rawRewards = await computeRewards(rewardFunc, candidates.texts, rewardContext, "node", (x) => x);
  return { ...candidates, rawRewards, rewards: rawRewards.map((r) => processor(r)) };
}

export interface PairingSettings {
  pairSelection: IterativePairSelection;
  pairsPerSample: number | null;
}

/**
 * Index-aligned comparisons i < min(counts) with a non-zero processed-reward gap, in the selection's order —
 * comparator_reward: comparator reward descending, then |gap| descending; reward_gap: |gap| descending; random;
 * all: index order (ties keep index order) — and the first pairsPerSample unless "all".
 */
export function alignedComparisons(current: readonly number[], comparator: readonly number[], settings: PairingSettings, random: SeededRandom): number[] {
  const n = Math.min(current.length, comparator.length);
  const indices = Array.from({ length: n }, (_, i) => i).filter((i) => current[i] !== comparator[i]);
  const gap = (i: number) => Math.abs(current[i] - comparator[i]);
  if (settings.pairSelection === "comparator_reward") indices.sort((a, b) => comparator[b] - comparator[a] || gap(b) - gap(a));
  else if (settings.pairSelection === "reward_gap") indices.sort((a, b) => gap(b) - gap(a));
  else if (settings.pairSelection === "random") random.shuffle(indices);
  return settings.pairSelection === "all" || settings.pairsPerSample === null ? indices : indices.slice(0, settings.pairsPerSample);
}

export interface ItemPrompts {
  itemIndex: number;
  /** Each trained agent's prompt, and its ids. */
  prompts: string[];
  promptIds: number[][];
}

/** The pairs of one item from its scored current and comparator candidates. */
export function buildPairs(
  item: ItemPrompts,
  current: ScoredCandidates,
  comparator: ScoredCandidates,
  tokenizers: readonly ComlrlTokenizer[],
  settings: PairingSettings,
  random: SeededRandom,
): IterativePair[] {
  const average = mean(current.rewards);
  const side = (set: ScoredCandidates, i: number) => ({
    texts: set.texts.map((texts) => texts[i]),
    ids: set.completionIds ? set.completionIds.map((ids) => ids[i]) : set.texts.map((texts, agent) => Int32Array.from(tokenizers[agent].encode(texts[i], { addSpecialTokens: false }))),
    fromText: set.completionIds === null,
    reward: set.rewards[i],
    raw: set.rawRewards[i],
  });
  return alignedComparisons(current.rewards, comparator.rewards, settings, random).map((i): IterativePair => {
    const ours = side(current, i);
    const theirs = side(comparator, i);
    const [winner, loser] = ours.reward > theirs.reward ? [ours, theirs] : [theirs, ours];
    return {
      itemIndex: item.itemIndex,
      prompts: item.prompts,
      promptIds: item.promptIds,
      winnerIds: winner.ids,
      loserIds: loser.ids,
      winnerTexts: winner.texts,
      loserTexts: loser.texts,
      winnerReward: winner.reward,
      loserReward: loser.reward,
      candidateRewardMean: average,
      rawRewards: [winner.raw, loser.raw],
      targetRawReward: ours.raw,
      comparatorRawReward: theirs.raw,
      winnerFromText: winner.fromText,
      loserFromText: loser.fromText,
    };
  });
}
