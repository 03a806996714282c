// The learning tests' assertion: a reward that rises by more than a stated amount. Every run prints its figures, and
// with COMLRL_TEST_MARGINS set to a file appends them there as one JSON line (scripts/ci-kernel-sets.sh lists them
// per CPU kernel set), so that how far a recipe sits from its threshold is on record for every kernel set CI runs.
import { appendFileSync } from "node:fs";
import { expect } from "vitest";

/** Asserts `after > before + atLeast` for the learning test `name`, after reporting the measured rise. */
export function expectRise(name: string, before: number, after: number, atLeast: number): void {
  const rise = after - before;
  const kernels = process.env.ATEN_CPU_CAPABILITY || "native";
  console.log(`${name}: reward ${before.toFixed(3)} -> ${after.toFixed(3)}, rise ${rise.toFixed(3)} (needs > ${atLeast}; kernels ${kernels})`);
  const file = process.env.COMLRL_TEST_MARGINS;
  if (file) appendFileSync(file, `${JSON.stringify({ name, kernels, before, after, rise, atLeast })}\n`);
  expect(rise, `${name}: the reward's rise`).toBeGreaterThan(atLeast);
}
