// Min / median / max of repeated measurements, and the clock they are taken with.
import type { Summary } from "./types.js";

export function summarize(values: readonly number[]): Summary {
  if (values.length === 0) throw new RangeError("summarize: no values");
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
  return { min: sorted[0], median, max: sorted[sorted.length - 1], runs: sorted.length };
}

/** Seconds elapsed since `started` (a performance.now() reading). */
export function secondsSince(started: number): number {
  return (performance.now() - started) / 1000;
}
