// Group baselines for REINFORCE-style updates (COMLRL-SPEC §3.3, §3.6): KL shaping, baseline, normalisation.
import type { AdvantageMode } from "../config/magrpo.js";
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
