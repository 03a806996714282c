// Offline preference pairs (COMLRL-SPEC §6.1), shared by MADPO and MARLHF: for each train item every agent samples
// the candidates in one batched call, candidate k of every agent forms joint candidate k, the task reward (processor
// applied) scores them, and ordered pairs (winner, loser) with r_w > r_l are selected. A pair keeps the exact sampled
// token ids of every agent's winner and loser (never re-tokenized) with their texts beside them, and is saved in
// checkpoints as JSON.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import type { PairSelection } from "../../config/index.js";
import { CheckpointError } from "../../checkpoint/checkpoint.js";
import { rolloutItem, type RolloutEnvironment } from "../../rollout/tree.js";
import type { Item } from "../../rollout/types.js";
import { writeFileChecked } from "../../util/atomic.js";
import type { SeededRandom } from "../../util/random.js";
import type { StageHost } from "../lifecycle/stage-host.js";
import { meanOrZero } from "../../util/mean.js";

/** One preference pair: the winning and losing joint candidates of an item, with every agent's exact sampled ids. */
export interface PreferencePair {
  /** The train item it came from. */
  itemIndex: number;
  /** Each agent's formatted prompt, and its token ids. */
  prompts: string[];
  /** Each agent's prompt token ids. */
  promptIds: number[][];
  /** Per agent, the exact sampled ids of the winning and the losing joint candidate's completion. */
  winnerIds: Int32Array[];
  /** Per agent, the losing candidate's completion ids. */
  loserIds: Int32Array[];
  /** Per agent, the winning completion's text. */
  winnerTexts: string[];
  /** Per agent, the losing completion's text. */
  loserTexts: string[];
  /** The winner's task reward. */
  winnerReward: number;
  /** The loser's task reward. */
  loserReward: number;
  /** Mean task reward over all of the item's candidates. */
  candidateRewardMean: number;
}

/**
 * The (winner, loser) candidate indices kept for one item: every ordered pair with r_w > r_l (ties dropped), in
 * index order ("all"), by reward gap, largest first, ties in index order ("reward_gap"), or shuffled ("random");
 * then the first `perSample` unless null.
 */
export function selectPairs(rewards: readonly number[], selection: PairSelection, perSample: number | null, random: SeededRandom): Array<[number, number]> {
  const pairs: Array<[number, number]> = [];
  rewards.forEach((rw, w) => rewards.forEach((rl, l) => rw > rl && pairs.push([w, l])));
  if (selection === "reward_gap") pairs.sort((a, b) => rewards[b[0]] - rewards[b[1]] - (rewards[a[0]] - rewards[a[1]]));
  else if (selection === "random") random.shuffle(pairs);
  return perSample === null ? pairs : pairs.slice(0, perSample);
}

export interface PairSettings {
  numCandidates: number;
  pairSelection: PairSelection;
  pairsPerSample: number | null;
}

export interface CollectedItem {
  pairs: PreferencePair[];
  /** The candidates' task rewards. */
  rewards: number[];
  envSteps: number;
}

/** Samples, scores and pairs one item's joint candidates; the environment's policies should be plain samplers. */
export async function collectItemPairs(
  item: Item,
  itemIndex: number,
  environment: RolloutEnvironment,
  settings: PairSettings,
  random: SeededRandom,
  firstEnvStep: number,
): Promise<CollectedItem> {
  const { root, envSteps } = await rolloutItem(
    item,
    itemIndex,
    environment,
    { numGenerations: settings.numCandidates, numTurns: 1, jointMode: "aligned", earlyTerminationThreshold: null, externalPromptPassthrough: false, rewardBatching: "node" },
    firstEnvStep,
  );
  const rewards = root.rewards;
  const candidateRewardMean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  const pairs = selectPairs(rewards, settings.pairSelection, settings.pairsPerSample, random).map(
    ([w, l]): PreferencePair => ({
      itemIndex,
      prompts: root.prompts,
      promptIds: root.promptIds,
      winnerIds: root.completionIds.map((ids) => ids[w]),
      loserIds: root.completionIds.map((ids) => ids[l]),
      winnerTexts: root.texts.map((texts) => texts[w]),
      loserTexts: root.texts.map((texts) => texts[l]),
      winnerReward: rewards[w],
      loserReward: rewards[l],
      candidateRewardMean,
    }),
  );
  return { pairs, rewards, envSteps };
}

const PAIRS_FILE = "preference_pairs.json";

/** The pair set of a run, item by item, with the items that gave no usable pair; saved with every checkpoint. */
export class PreferencePairs {
  readonly pairs: PreferencePair[] = [];
  /** Train items whose candidates all tied. */
  readonly itemsWithoutPairs: number[] = [];

  add(itemIndex: number, collected: CollectedItem): void {
    this.pairs.push(...collected.pairs);
    if (collected.pairs.length === 0) this.itemsWithoutPairs.push(itemIndex);
  }

  /** Metrics of one item's collection. */
  static itemMetrics(collected: CollectedItem): Record<string, number> {
    const gaps = collected.pairs.map((p) => p.winnerReward - p.loserReward);
    return {
      "pairs/count": collected.pairs.length,
      "pairs/reward_gap_mean": meanOrZero(gaps),
      "pairs/reward_gap_max": gaps.length ? Math.max(...gaps) : 0,
      "pairs/candidate_reward_mean": meanOrZero(collected.rewards),
    };
  }

  /** Throws when no item gave a pair: nothing could be learned, and a silent no-op run would hide it. */
  assertUsable(items: number): void {
    if (this.pairs.length === 0) {
      throw new Error(`preference pair collection: all ${items} train items gave no pair (every item's candidates tied on the task reward); nothing to train on`);
    }
  }

  /** Every rank's pairs on every rank, as one process collects them (see gatherItems). */
  async gather(host: Pick<StageHost, "gather" | "random">): Promise<void> {
    const byItem = new Map<number, Array<Record<string, unknown>>>(this.itemsWithoutPairs.map((i) => [i, []]));
    for (const p of this.pairs) byItem.set(p.itemIndex, [...(byItem.get(p.itemIndex) ?? []), pairToJson(p)]);
    const items = await gatherItems(host, [...byItem].map(([itemIndex, pairs]) => ({ itemIndex, pairs })));
    this.replace(
      items.flatMap((r) => r.pairs),
      items.filter((r) => r.pairs.length === 0).map((r) => r.itemIndex),
    );
  }

  async save(dir: string): Promise<void> {
    const json = { num_pairs: this.pairs.length, items_without_pairs: this.itemsWithoutPairs, pairs: this.pairs.map(pairToJson) };
    await writeFileChecked(path.join(dir, PAIRS_FILE), JSON.stringify(json));
  }

  private replace(pairs: ReadonlyArray<Record<string, unknown>>, itemsWithoutPairs: readonly number[]): void {
    this.pairs.length = 0;
    this.itemsWithoutPairs.length = 0;
    this.itemsWithoutPairs.push(...itemsWithoutPairs);
    this.pairs.push(...pairs.map(pairFromJson));
  }

  /** Replaces the pairs with those saved in a checkpoint directory. */
  load(dir: string): void {
    const file = path.join(dir, PAIRS_FILE);
    if (!existsSync(file)) throw new CheckpointError(`${file} is missing`);
    let json: { items_without_pairs: number[]; pairs: Array<Record<string, unknown>> };
    try {
      json = JSON.parse(readFileSync(file, "utf8"));
    } catch (error) {
      throw new CheckpointError(`${file}: ${(error as Error).message}`);
    }
    this.replace(json.pairs, json.items_without_pairs);
  }
}

/**
 * What each rank collected per item (plain JSON, one record per item it ran), on every rank: each item once, from the
 * lowest rank that ran it (its owner: a higher rank runs an item again only to pad its last round of steps), in item
 * order, as one process collects them. Every rank then takes rank 0's shuffle generator, so that what is drawn over
 * the gathered pairs next (a replay sample, the training order) is drawn alike on every rank. In one process: the
 * records in item order.
 */
export async function gatherItems<T extends { itemIndex: number }>(host: Pick<StageHost, "gather" | "random">, local: readonly T[]): Promise<T[]> {
  const ranks = await host.gather([{ records: local, random: host.random.getState() }]);
  host.random.setState(ranks[0].random);
  const owned = new Map<number, T>();
  for (const record of ranks.flatMap((rank) => rank.records)) if (!owned.has(record.itemIndex)) owned.set(record.itemIndex, record);
  return [...owned.values()].sort((a, b) => a.itemIndex - b.itemIndex);
}

/** A pair in the checkpoint's JSON layout (CoMLRL's keys, token ids as plain arrays). */
export function pairToJson(p: PreferencePair): Record<string, unknown> {
  return {
    item_index: p.itemIndex,
    prompts: p.prompts,
    winner_completions: p.winnerTexts,
    loser_completions: p.loserTexts,
    winner_reward: p.winnerReward,
    loser_reward: p.loserReward,
    candidate_reward_mean: p.candidateRewardMean,
    prompt_ids: p.promptIds,
    winner_ids: p.winnerIds.map((ids) => Array.from(ids)),
    loser_ids: p.loserIds.map((ids) => Array.from(ids)),
  };
}

function pairFromJson(p: Record<string, unknown>): PreferencePair {
  const ids = (rows: unknown) => (rows as number[][]).map((row) => Int32Array.from(row));
  return {
    itemIndex: p.item_index as number,
    prompts: p.prompts as string[],
    promptIds: p.prompt_ids as number[][],
    winnerIds: ids(p.winner_ids),
    loserIds: ids(p.loser_ids),
    winnerTexts: p.winner_completions as string[],
    loserTexts: p.loser_completions as string[],
    winnerReward: p.winner_reward as number,
    loserReward: p.loser_reward as number,
    candidateRewardMean: p.candidate_reward_mean as number,
  };
}
