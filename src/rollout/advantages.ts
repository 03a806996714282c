// The advantages of the MAGRPO family (COMLRL-SPEC §3.3, §3.6; docs/objectives.md): KL shaping, CoMLRL's group
// baselines and normalisation, and an update's advantages under an agent's objective — its grouping, reward scaling
// and zero-variance filter.
import type { AdvantageMode } from "../config/magrpo.js";
import type { AgentObjective } from "../config/objectives.js";
import type { NodeSample } from "./types.js";
import { mean } from "../util/mean.js";

export type { AdvantageMode };

/** R'_k = R_k − coef · KL_k. */
export function shapeReturns(returns: readonly number[], referenceKl: readonly number[], coef: number): number[] {
  return returns.map((r, k) => r - coef * (referenceKl[k] ?? 0));
}

/** A_k of a node's returns under the baseline `mode` (docs/magrpo.md), z-scored over the group when `normalize` (std clamped at 1e-6). */
export function advantages(returns: readonly number[], mode: AdvantageMode, normalize: boolean): number[] {
  const k = returns.length;
  let a: number[];
  switch (mode) {
    case "raw":
      a = [...returns];
      break;
    case "max": {
      const best = Math.max(...returns);
      a = returns.map((r) => r - best);
      break;
    }
    case "rloo": {
      // R_k minus the mean of the others; with one sample there are no others, so it falls back to the mean.
      const sum = returns.reduce((x, y) => x + y, 0);
      a = k > 1 ? returns.map((r) => (k * r - sum) / (k - 1)) : returns.map((r) => r - sum / k);
      break;
    }
    case "mean": {
      const m = mean(returns);
      a = returns.map((r) => r - m);
      break;
    }
  }
  if (normalize && k > 1) {
    const m = mean(a);
    const std = Math.sqrt(mean(a.map((x) => (x - m) ** 2)));
    a = a.map((x) => (x - m) / Math.max(std, 1e-6));
  }
  return a;
}

/** The config fields the advantages read. */
export interface AdvantageSettings {
  readonly advantageMode: AdvantageMode;
  readonly advantageNormalization: boolean;
  readonly referenceKlEnabled: boolean;
  readonly referenceKlCoef: number;
}

/** An agent's update: each kept sample's advantages (one per completion) and the groups the filter skipped. */
export interface UpdateAdvantages {
  readonly of: ReadonlyMap<NodeSample, readonly number[]>;
  /** Groups (a sample's K completions) tested by the zero-variance filter, and how many it skipped. */
  readonly groups: number;
  readonly filtered: number;
}

const populationStd = (xs: readonly number[]) => {
  const m = mean(xs);
  return Math.sqrt(mean(xs.map((x) => (x - m) ** 2)));
};
// TRL's nanstd: with Bessel's correction.
const sampleStd = (xs: readonly number[]) => {
  const m = mean(xs);
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1));
};

/** The returns the advantages start from: shaped by the reference KL when it enters the reward. */
function returnsOf(sample: NodeSample, objective: AgentObjective, settings: AdvantageSettings): number[] {
  return settings.referenceKlEnabled && objective.klIn === "reward" ? shapeReturns(sample.returns, sample.referenceKl, settings.referenceKlCoef) : sample.returns;
}

/**
 * Advantages of one agent's samples of an update. Groups: "joint" each sample's K completions (one node, one prompt:
 * CoMLRL's), "agent" every completion of the update, "agent_turn" those of one turn. scaleRewards null keeps
 * CoMLRL's baseline and normalisation over the group (a group of one, K = 1 under "joint", gets CoMLRL's advantage
 * of one return); otherwise TRL's: the group mean as baseline, divided by (std + 1e-4) of the group ("group") or of
 * all the update's completions ("batch"), or not ("none").
 */
export function updateAdvantages(samples: readonly NodeSample[], objective: AgentObjective, settings: AdvantageSettings): UpdateAdvantages {
  const threshold = objective.zeroVarianceFilter;
  const kept = threshold === null ? [...samples] : samples.filter((s) => populationStd(returnsOf(s, objective, settings)) > threshold);
  const groupKey = (s: NodeSample) => (objective.advantageGrouping === "joint" ? s : objective.advantageGrouping === "agent" ? "all" : s.turn);
  const groups = new Map<unknown, NodeSample[]>();
  for (const sample of kept) {
    const key = groupKey(sample);
    groups.set(key, [...(groups.get(key) ?? []), sample]);
  }
  const allReturns = kept.flatMap((s) => returnsOf(s, objective, settings));
  const batchStd = allReturns.length > 1 ? sampleStd(allReturns) : 0;
  const comlrlBaseline = objective.scaleRewards === null && objective.lossType === "comlrl" && objective.advantageGrouping === "joint";
  const of = new Map<NodeSample, number[]>();
  for (const members of groups.values()) {
    const returns = members.flatMap((s) => returnsOf(s, objective, settings));
    if (returns.length < 2 && !comlrlBaseline) {
      throw new RangeError(`advantageGrouping "${objective.advantageGrouping}" left a group of one completion: its advantage would have no baseline`);
    }
    let a: number[];
    if (objective.scaleRewards === null) {
      a = advantages(returns, settings.advantageMode, settings.advantageNormalization);
    } else {
      const baseline = mean(returns);
      const scale = objective.scaleRewards === "group" ? sampleStd(returns) : objective.scaleRewards === "batch" ? batchStd : null;
      a = returns.map((r) => (scale === null ? r - baseline : (r - baseline) / (scale + 1e-4)));
    }
    let offset = 0;
    for (const sample of members) {
      of.set(sample, a.slice(offset, offset + sample.returns.length));
      offset += sample.returns.length;
    }
  }
  return { of, groups: samples.length, filtered: samples.length - kept.length };
}
