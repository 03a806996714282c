// Reward distributions per iteration (COMLRL-SPEC §7.3, test_iterative_reward_distribution): histograms of the raw
// task rewards of every candidate and of the selected pairs' two sides, for the current policy ("target") and the
// comparator, in 16 bins over the reward function's declared rewardRange (values clipped into it). Written as
// reward_distributions/iteration_KKKK.json (counts, no density) and an SVG chart beside it.
import path from "node:path";
import { writeLineChartSvg } from "../../../logging/svg-plot.js";
import type { RewardFunction } from "../../../rollout/types.js";
import { writeFileAtomic } from "../../../util/atomic.js";
import { makeDirs } from "../../../util/make-dirs.js";

const NUM_BINS = 16;

/** The reward function's declared [min, max] (CoMLRL's reward_func.reward_range); an error without one. */
export function declaredRewardRange(rewardFunc: RewardFunction): [number, number] {
  const range = (rewardFunc as RewardFunction & { rewardRange?: unknown }).rewardRange;
  if (!Array.isArray(range) || range.length !== 2 || !range.every((x) => typeof x === "number" && Number.isFinite(x)) || !(range[0] < range[1])) {
    throw new TypeError(
      `logRewardDistribution needs the reward function to declare its range: set rewardFunc.rewardRange = [min, max] with min < max (got ${JSON.stringify(range)})`,
    );
  }
  return [range[0], range[1]];
}

export interface DistributionSeries {
  sample_count: number;
  mean: number | null;
  counts: number[];
  raw_rewards: number[];
}

function histogram(values: readonly number[], [min, max]: [number, number]): DistributionSeries {
  const counts = Array(NUM_BINS).fill(0);
  for (const v of values) {
    const clipped = Math.min(max, Math.max(min, v));
    counts[Math.min(NUM_BINS - 1, Math.floor(((clipped - min) / (max - min)) * NUM_BINS))]++;
  }
  return { sample_count: values.length, mean: values.length ? values.reduce((a, b) => a + b, 0) / values.length : null, counts, raw_rewards: [...values] };
}

export interface RewardSamples {
  candidate: { target: number[]; comparator: number[] };
  selected: { target: number[]; comparator: number[] };
}

function rewardDistribution(iteration: number, range: [number, number], samples: RewardSamples) {
  const [min, max] = range;
  const edges = Array.from({ length: NUM_BINS + 1 }, (_, i) => min + ((max - min) * i) / NUM_BINS);
  return {
    iteration: iteration + 1,
    reward_min: min,
    reward_max: max,
    num_bins: NUM_BINS,
    bin_edges: edges,
    bin_centers: edges.slice(0, NUM_BINS).map((e, i) => (e + edges[i + 1]) / 2),
    candidate: { target: histogram(samples.candidate.target, range), comparator: histogram(samples.candidate.comparator, range) },
    selected: { target: histogram(samples.selected.target, range), comparator: histogram(samples.selected.comparator, range) },
  };
}

/** Writes iteration_KKKK.json and iteration_KKKK.svg under dir; returns the JSON's path. */
export async function writeRewardDistribution(dir: string, iteration: number, range: [number, number], samples: RewardSamples): Promise<string> {
  const stem = `iteration_${String(iteration + 1).padStart(4, "0")}`;
  const json = rewardDistribution(iteration, range, samples);
  const file = path.join(dir, `${stem}.json`);
  await makeDirs(dir);
  await writeFileAtomic(file, JSON.stringify(json, null, 2));
  const series = (name: string, s: DistributionSeries) => ({ name, points: json.bin_centers.map((x, i): [number, number] => [x, s.counts[i]]) });
  await writeLineChartSvg(
    path.join(dir, `${stem}.svg`),
    [series("target candidates", json.candidate.target), series("comparator candidates", json.candidate.comparator), series("selected target", json.selected.target), series("selected comparator", json.selected.comparator)],
    { title: `Reward distribution, iteration ${iteration + 1}`, xLabel: "reward", yLabel: "count", yMin: 0 },
  );
  return file;
}
