// The arithmetic mean as every trainer's metrics and advantages take it: summed left to right from 0, then divided,
// as CoMLRL's `sum(xs) / len(xs)` does, so the figures agree to the bit.

/** Σ xs / |xs|; NaN for an empty list. */
export function mean(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** mean(xs), or 0 for an empty list: a metric over nothing logs 0. */
export function meanOrZero(xs: readonly number[]): number {
  return xs.length ? mean(xs) : 0;
}
