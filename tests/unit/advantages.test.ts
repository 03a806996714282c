// Group baselines, normalisation and reference-KL shaping for the MAGRPO update (COMLRL-SPEC §3.3, §3.6, §9).
// Every expected value is computed by hand in the comments next to it.
import { describe, expect, it } from "vitest";
import { advantages, shapeReturns, type AdvantageMode } from "../../src/rollout/advantages.js";

const MODES: AdvantageMode[] = ["mean", "raw", "max", "rloo"];

function expectClose(actual: number[], expected: number[], digits = 12) {
  expect(actual).toHaveLength(expected.length);
  actual.forEach((a, i) => expect(a).toBeCloseTo(expected[i], digits));
}

describe("advantages without normalization", () => {
  // returns [1, 2, 4]: sum 7, mean 7/3, max 4
  const R = [1, 2, 4];

  it("mean: R − mean(R) = [−4/3, −1/3, 5/3]", () => {
    expectClose(advantages(R, "mean", false), [-4 / 3, -1 / 3, 5 / 3]);
  });

  it("raw: R unchanged (a copy)", () => {
    const a = advantages(R, "raw", false);
    expect(a).toEqual([1, 2, 4]);
    a[0] = 99;
    expect(R).toEqual([1, 2, 4]);
  });

  it("max: R − max(R) = [−3, −2, 0]", () => {
    expectClose(advantages(R, "max", false), [-3, -2, 0]);
  });

  it("rloo: (K·R − ΣR)/(K−1) = (3R − 7)/2 = [−2, −0.5, 2.5] = R minus the mean of the others", () => {
    // 1 − (2+4)/2 = −2; 2 − (1+4)/2 = −0.5; 4 − (1+2)/2 = 2.5
    expectClose(advantages(R, "rloo", false), [-2, -0.5, 2.5]);
  });

  it("K=2 and negative returns", () => {
    // [1, 3]: mean → [−1, 1]; max → [−2, 0]; rloo → (2·1 − 4)/1 = −2, (2·3 − 4)/1 = 2
    expectClose(advantages([1, 3], "mean", false), [-1, 1]);
    expectClose(advantages([1, 3], "max", false), [-2, 0]);
    expectClose(advantages([1, 3], "rloo", false), [-2, 2]);
    // [−1, −5]: max −1 → [0, −4]; mean −3 → [2, −2]
    expectClose(advantages([-1, -5], "max", false), [0, -4]);
    expectClose(advantages([-1, -5], "mean", false), [2, -2]);
  });

  it("rloo = (K/(K−1))·mean-baseline advantages", () => {
    // (K·R_k − ΣR)/(K−1) = K/(K−1)·(R_k − mean); for [0, 1, 5, 6] (mean 3): mean → [−3, −2, 2, 3], rloo → 4/3 of it
    expectClose(advantages([0, 1, 5, 6], "mean", false), [-3, -2, 2, 3]);
    expectClose(advantages([0, 1, 5, 6], "rloo", false), [-4, -8 / 3, 8 / 3, 4]);
  });
});

describe("advantages with normalization", () => {
  // [1, 2, 4]: deviations [−4/3, −1/3, 5/3], squares sum 16/9 + 1/9 + 25/9 = 42/9, population variance 42/27 = 14/9,
  // std √14/3 ≈ 1.2472191; z = dev/std = [−4, −1, 5]/√14 ≈ [−1.0690450, −0.2672612, 1.3363062]
  const Z = [-4 / Math.sqrt(14), -1 / Math.sqrt(14), 5 / Math.sqrt(14)];

  it("gives the same z-scores for all four modes (spec §3.3 consequence)", () => {
    for (const mode of MODES) expectClose(advantages([1, 2, 4], mode, true), Z);
    expectClose(Z, [-1.069044968, -0.267261242, 1.336306210], 8);
  });

  it("z-scores have mean 0 and population std 1", () => {
    const z = advantages([3, -1, 7, 2, 2], "mean", true);
    const m = z.reduce((a, b) => a + b, 0) / z.length;
    const s = Math.sqrt(z.reduce((a, b) => a + (b - m) ** 2, 0) / z.length);
    expect(m).toBeCloseTo(0, 12);
    expect(s).toBeCloseTo(1, 12);
    for (const mode of MODES) expectClose(advantages([3, -1, 7, 2, 2], mode, true), z);
  });

  it("K=2 normalizes to [−1, 1]", () => {
    for (const mode of MODES) expectClose(advantages([1, 3], mode, true), [-1, 1]);
  });

  it("equal returns give zeros (std floored at 1e-6, no NaN)", () => {
    for (const mode of MODES) {
      const a = advantages([3, 3, 3], mode, true);
      expect(a).toHaveLength(3);
      a.forEach((x) => {
        expect(Number.isNaN(x)).toBe(false);
        expect(x).toBeCloseTo(0, 12);
      });
      advantages([0, 0], mode, true).forEach((x) => expect(x).toBeCloseTo(0, 12));
    }
  });

  it("the 1e-6 floor bites for tiny spreads", () => {
    // [0, 1e-7]: mean-baseline [−5e-8, 5e-8], std 5e-8 < 1e-6 → divide by 1e-6 → [−0.05, 0.05]
    expectClose(advantages([0, 1e-7], "mean", true), [-0.05, 0.05], 9);
    // a spread above the floor normalizes fully: [0, 1e-5] → std 5e-6 → [−1, 1]
    expectClose(advantages([0, 1e-5], "mean", true), [-1, 1], 9);
  });
});

describe("advantages with a single completion (K=1)", () => {
  it("rloo falls back to the mean baseline; normalization is skipped", () => {
    // mean of [5] is 5 → [0]; rloo has no "others" → same as mean → [0]
    expect(advantages([5], "rloo", false)).toEqual([0]);
    expect(advantages([5], "mean", false)).toEqual([0]);
    expect(advantages([5], "max", false)).toEqual([0]);
    expect(advantages([5], "raw", false)).toEqual([5]);
    // K=1: no normalization, so raw stays 5 (not a z-score)
    expect(advantages([5], "raw", true)).toEqual([5]);
    expect(advantages([5], "rloo", true)).toEqual([0]);
  });
});

describe("shapeReturns", () => {
  it("R' = R − coef·KL: [1,2] with KL [0.2,0.4] and coef 0.5 → [0.9, 1.8] (spec §9)", () => {
    // 1 − 0.5·0.2 = 0.9; 2 − 0.5·0.4 = 1.8
    expectClose(shapeReturns([1, 2], [0.2, 0.4], 0.5), [0.9, 1.8]);
  });

  it("coefficient 0 is a no-op", () => {
    expect(shapeReturns([1, 2, -3], [0.2, 0.4, 9], 0)).toEqual([1, 2, -3]);
  });

  it("zero KL (identical models) is a no-op; missing KL entries count as 0", () => {
    expect(shapeReturns([1, 2], [0, 0], 0.7)).toEqual([1, 2]);
    // [1, 2] with KL [0.2] and coef 1: 1 − 0.2 = 0.8; 2 − 0 = 2
    expectClose(shapeReturns([1, 2], [0.2], 1), [0.8, 2]);
  });

  it("feeds the baseline: shaped [0.9, 1.8] → mean advantages [−0.45, 0.45], max [−0.9, 0]", () => {
    const shaped = shapeReturns([1, 2], [0.2, 0.4], 0.5);
    // mean 1.35 → [0.9 − 1.35, 1.8 − 1.35] = [−0.45, 0.45]
    expectClose(advantages(shaped, "mean", false), [-0.45, 0.45]);
    expectClose(advantages(shaped, "max", false), [-0.9, 0]);
    expectClose(advantages(shaped, "mean", true), [-1, 1]);
  });
});
