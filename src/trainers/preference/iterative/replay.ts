// Preference replay (COMLRL-SPEC §6.5 step 5, §7.3): every iteration's pairs go to a JSON shard
// preference_replay/iteration_KKKK.json in CoMLRL's layout (written atomically; empty shards are written but not
// registered), and each iteration's training pairs are drawn from the registered shards by the replay mode. Our
// shards add the pairs' exact token ids beside CoMLRL's fields, which CoMLRL ignores; a CoMLRL shard has texts only,
// and its pairs are tokenized from them (prompts with special tokens, completions without) and marked as such.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { CheckpointError } from "../../../checkpoint/checkpoint.js";
import type { ReplayMode } from "../../../config/index.js";
import type { ComlrlTokenizer } from "../../../models/tokenizer.js";
import { writeFileAtomic } from "../../../util/atomic.js";
import { makeDirs } from "../../../util/make-dirs.js";
import type { SeededRandom } from "../../../util/random.js";
import { pairToJson, type PreferencePair } from "../pairs.js";

/** A pair of an iterative trainer: a current candidate against a comparator candidate (the higher reward wins, on either side), as stored in replay shards. */
export interface IterativePair extends PreferencePair {
  /** [winner, loser] task rewards before the reward processor. */
  rawRewards: [number, number];
  /** The current policy's candidate's raw reward, and the comparator's. */
  targetRawReward: number | null;
  /** The comparator's candidate's raw reward; null when the shard does not record it. */
  comparatorRawReward: number | null;
  /** Whether a side's ids were tokenized from its text (API or split centralized output, CoMLRL shards), not sampled. */
  winnerFromText: boolean;
  /** Whether the loser's ids were tokenized from its text rather than sampled. */
  loserFromText: boolean;
}

/** iteration_KKKK.json for zero-based iteration k (CoMLRL numbers shards from 1). */
function shardName(iteration: number): string {
  return `iteration_${String(iteration + 1).padStart(4, "0")}.json`;
}

/** A pair in a shard's layout: CoMLRL's fields, and ours beside them (the exact ids, and where they came from). */
export function iterativePairToJson(p: IterativePair): Record<string, unknown> {
  return {
    ...pairToJson(p),
    raw_rewards: p.rawRewards,
    target_raw_reward: p.targetRawReward,
    comparator_raw_reward: p.comparatorRawReward,
    winner_from_text: p.winnerFromText,
    loser_from_text: p.loserFromText,
  };
}

function shardJson(iteration: number, pairs: readonly IterativePair[]): string {
  return JSON.stringify({ iteration: iteration + 1, num_pairs: pairs.length, pairs: pairs.map(iterativePairToJson) });
}

const ID_FIELDS = ["prompt_ids", "winner_ids", "loser_ids"] as const;
const isNumber = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x);
const isStrings = (x: unknown): x is string[] => Array.isArray(x) && x.every((s) => typeof s === "string");

/** Reads one shard (ours or CoMLRL's); tokenizers[agent] rebuild the ids of pairs saved as text only. */
export function readShard(
  file: string,
  tokenizers: readonly ComlrlTokenizer[],
): {
  /** The shard's iteration as it records it, numbered from 1. */
  iteration: number;
  /** The shard's pairs, ids rebuilt where it holds text only. */
  pairs: IterativePair[];
} {
  let json: { iteration?: unknown; pairs?: unknown };
  try {
    json = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new CheckpointError(`replay shard ${file}: ${(error as Error).message}`);
  }
  if (!Number.isInteger(json.iteration)) throw new CheckpointError(`replay shard ${file}: has no integer iteration`);
  return { iteration: json.iteration as number, pairs: pairsFromJson(json.pairs, tokenizers, `replay shard ${file}`) };
}

/** A shard's pairs list (ours or CoMLRL's, see readShard) as pairs; `where` names the list in errors. */
export function pairsFromJson(list: unknown, tokenizers: readonly ComlrlTokenizer[], where: string): IterativePair[] {
  const bad = (what: string): never => {
    throw new CheckpointError(`${where}: ${what}`);
  };
  if (!Array.isArray(list)) bad("has no pairs list");
  return (list as Array<Record<string, unknown>>).map((p, n): IterativePair => {
    const { prompts, winner_completions: winners, loser_completions: losers } = p;
    if (!isStrings(prompts) || !isStrings(winners) || !isStrings(losers) || winners.length !== prompts.length || losers.length !== prompts.length) {
      bad(`pair ${n}: prompts, winner_completions and loser_completions must be lists of one string per agent`);
    }
    const agents = (prompts as string[]).length;
    if (agents !== tokenizers.length) bad(`pair ${n} has ${agents} agents' texts, this trainer has ${tokenizers.length} agents`);
    if (!isNumber(p.winner_reward) || !isNumber(p.loser_reward)) bad(`pair ${n}: winner_reward and loser_reward must be numbers`);
    const raw = Array.isArray(p.raw_rewards) && p.raw_rewards.length === 2 && p.raw_rewards.every(isNumber) ? (p.raw_rewards as [number, number]) : null;
    // A CoMLRL shard has none of the id fields; ours has all three, each checked, since a bad id would silently
    // become token 0 (Int32Array.from("abc")) or fail later as a bare TypeError.
    const hasIds = ID_FIELDS.some((field) => p[field] !== undefined);
    const ids = (field: (typeof ID_FIELDS)[number]): number[][] => {
      const rows = p[field];
      if (!Array.isArray(rows) || rows.length !== agents || !rows.every(Array.isArray)) bad(`pair ${n}: ${field} must be a list of one list of token ids per agent (${agents})`);
      (rows as unknown[][]).forEach((row, agent) =>
        row.forEach((id, i) => {
          const vocab = tokenizers[agent].vocabSize;
          if (!Number.isInteger(id) || (id as number) < 0 || (id as number) >= vocab) bad(`pair ${n}: ${field}[${agent}][${i}] is ${JSON.stringify(id)}, not a token id in [0, ${vocab})`);
        }),
      );
      return rows as number[][];
    };
    const encode = (texts: string[]) => texts.map((text, agent) => Int32Array.from(tokenizers[agent].encode(text, { addSpecialTokens: false })));
    const fromIds = (field: "winner_ids" | "loser_ids") => ids(field).map((row) => Int32Array.from(row));
    return {
      itemIndex: Number.isInteger(p.item_index) ? (p.item_index as number) : -1,
      prompts: prompts as string[],
      promptIds: hasIds ? ids("prompt_ids") : (prompts as string[]).map((text, agent) => tokenizers[agent].encode(text)),
      winnerIds: hasIds ? fromIds("winner_ids") : encode(winners as string[]),
      loserIds: hasIds ? fromIds("loser_ids") : encode(losers as string[]),
      winnerTexts: winners as string[],
      loserTexts: losers as string[],
      winnerReward: p.winner_reward as number,
      loserReward: p.loser_reward as number,
      candidateRewardMean: isNumber(p.candidate_reward_mean) ? p.candidate_reward_mean : (p.winner_reward as number + (p.loser_reward as number)) / 2,
      rawRewards: raw ?? [p.winner_reward as number, p.loser_reward as number],
      targetRawReward: isNumber(p.target_raw_reward) ? p.target_raw_reward : null,
      comparatorRawReward: isNumber(p.comparator_raw_reward) ? p.comparator_raw_reward : null,
      winnerFromText: hasIds ? p.winner_from_text === true : true,
      loserFromText: hasIds ? p.loser_from_text === true : true,
    };
  });
}

/** Every iteration_KKKK.json of a replay directory (CoMLRL's or ours), in iteration order, empty ones included. */
export function readReplayDir(
  dir: string,
  tokenizers: readonly ComlrlTokenizer[],
): Array<{
  /** The shard's iteration as it records it, numbered from 1. */
  iteration: number;
  /** The shard's path. */
  file: string;
  /** The shard's pairs. */
  pairs: IterativePair[];
}> {
  if (!existsSync(dir)) throw new CheckpointError(`replay directory ${dir} does not exist`);
  return readdirSync(dir)
    .filter((name) => /^iteration_\d{4,}\.json$/.test(name))
    .map((name) => ({ file: path.join(dir, name), ...readShard(path.join(dir, name), tokenizers) }))
    .sort((a, b) => a.iteration - b.iteration);
}

/**
 * Shard weights, oldest first, for n registered shards: nearest_k uniform over the last k, all_history uniform,
 * lambda_decay ∝ (1−λ)λ^age with age 0 the newest (λ = 1: uniform), normalised.
 */
export function replayWeights(mode: Exclude<ReplayMode, "current">, n: number, k: number | null, lambda: number | null): number[] {
  if (n === 0) return [];
  if (mode === "all_history") return Array(n).fill(1 / n);
  if (mode === "nearest_k") {
    const last = Math.min(k ?? 1, n);
    return Array.from({ length: n }, (_, i) => (i >= n - last ? 1 / last : 0));
  }
  const l = lambda ?? 0;
  if (l === 1) return Array(n).fill(1 / n);
  const raw = Array.from({ length: n }, (_, i) => (1 - l) * l ** (n - 1 - i));
  const total = raw.reduce((a, b) => a + b, 0);
  return raw.map((w) => w / total);
}

/**
 * Draws `size` records: a shard per draw by weight, then each shard's share without replacement from a random
 * permutation of it (wrapping around, so repeating, when the share exceeds the shard), and the result shuffled.
 */
export function sampleReplay<T>(shards: readonly (readonly T[])[], weights: readonly number[], size: number, random: SeededRandom): T[] {
  const counts = shards.map(() => 0);
  for (let s = 0; s < size; s++) {
    const u = random.next();
    let acc = 0;
    let chosen = weights.findIndex((w) => (acc += w) > u && w > 0);
    if (chosen < 0) chosen = weights.findLastIndex((w) => w > 0);
    counts[chosen]++;
  }
  const drawn: T[] = [];
  shards.forEach((records, i) => {
    if (counts[i] === 0) return;
    const order = random.shuffle(records.map((_, j) => j));
    for (let j = 0; j < counts[i]; j++) drawn.push(records[order[j % order.length]]);
  });
  return random.shuffle(drawn);
}

export interface ReplaySettings {
  mode: ReplayMode;
  k: number | null;
  lambda: number | null;
  sampleSize: number | null;
}

/** A registered shard as checkpoints record it: where it is, and its checksum, so that resume reads exactly it. */
export interface ShardRecord {
  iteration: number;
  file: string;
  numPairs: number;
  sha256: string;
}

const sha256 = (text: string | Buffer) => createHash("sha256").update(text).digest("hex");

/** The run's replay: the registered (non-empty) shards in iteration order, held in memory and on disk. */
export class PreferenceReplay {
  private readonly shards: Array<ShardRecord & { pairs: IterativePair[] }> = [];

  /** dir: where this run writes its shards (may change on resume, see IterativeDirs). */
  constructor(public dir: string) {}

  get records(): ShardRecord[] {
    return this.shards.map(({ pairs: _pairs, ...record }) => record);
  }

  pairsOf(iteration: number): IterativePair[] {
    return this.shards.find((s) => s.iteration === iteration)?.pairs ?? [];
  }

  /**
   * Registers iteration's shard when it has pairs (replacing a shard of that iteration) and, where `writeFile` (the
   * rank that writes files), writes it atomically; the other ranks of a job register the same shard.
   */
  async write(iteration: number, pairs: IterativePair[], writeFile: boolean): Promise<string> {
    const file = path.join(this.dir, shardName(iteration));
    const text = shardJson(iteration, pairs);
    if (writeFile) {
      await makeDirs(this.dir);
      await writeFileAtomic(file, text);
    }
    const index = this.shards.findIndex((s) => s.iteration === iteration);
    if (index >= 0) this.shards.splice(index, 1);
    if (pairs.length > 0) this.shards.push({ iteration, file: path.resolve(file), numPairs: pairs.length, sha256: sha256(text), pairs });
    this.shards.sort((a, b) => a.iteration - b.iteration);
    return file;
  }

  /** Registers shards read from another run's replay directory (CoMLRL's or ours) as earlier history. */
  adopt(shards: ReadonlyArray<{ iteration: number; file: string; pairs: IterativePair[] }>): void {
    for (const s of shards) {
      if (s.pairs.length === 0) continue;
      const text = readFileSync(s.file);
      this.shards.push({ iteration: s.iteration - 1, file: path.resolve(s.file), numPairs: s.pairs.length, sha256: sha256(text), pairs: s.pairs });
    }
    this.shards.sort((a, b) => a.iteration - b.iteration);
  }

  /** Restores the registered shards a checkpoint recorded, refusing any whose file is gone or changed. */
  restore(records: readonly ShardRecord[], tokenizers: readonly ComlrlTokenizer[]): void {
    this.shards.length = 0;
    for (const record of records) {
      if (!existsSync(record.file)) throw new CheckpointError(`replay shard ${record.file} (iteration ${record.iteration + 1}) recorded by the checkpoint is missing`);
      const actual = sha256(readFileSync(record.file));
      if (actual !== record.sha256) throw new CheckpointError(`replay shard ${record.file} changed since the checkpoint (sha256 ${actual}, recorded ${record.sha256})`);
      this.shards.push({ ...record, pairs: readShard(record.file, tokenizers).pairs });
    }
  }

  /** This iteration's training pairs by the replay mode (COMLRL-SPEC §6.5 step 5). */
  select(iteration: number, settings: ReplaySettings, random: SeededRandom): IterativePair[] {
    const current = this.pairsOf(iteration);
    if (settings.mode === "current") return [...current];
    if (this.shards.length === 0) return [];
    const size = settings.sampleSize ?? (current.length > 0 ? current.length : this.shards[this.shards.length - 1].numPairs);
    const weights = replayWeights(settings.mode, this.shards.length, settings.k, settings.lambda);
    return sampleReplay(
      this.shards.map((s) => s.pairs),
      weights,
      size,
      random,
    );
  }
}
