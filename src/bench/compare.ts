// `--compare old.json`: every headline figure of this run over the same figure of an earlier one (medians).
import { readFile } from "node:fs/promises";
import { requireRegularFile } from "../util/regular-file.js";
import type { BenchResult, ComparisonRow } from "./types.js";

export class BenchResultError extends Error {
  /** Always "BenchResultError". */
  override name = "BenchResultError";
}

export async function readBenchResult(file: string): Promise<BenchResult> {
  requireRegularFile(file, (reason) => new BenchResultError(`cannot read a bench result: ${reason}`));
  let value: unknown;
  try {
    value = JSON.parse(await readFile(file, "utf8"));
  } catch (error) {
    throw new BenchResultError(`${file}: cannot read a bench result (${(error as Error).message})`);
  }
  const result = value as Partial<BenchResult>;
  if (result?.schema !== 1 || !result.ceilings || !Array.isArray(result.generation) || !Array.isArray(result.training) || !Array.isArray(result.trainer)) {
    throw new BenchResultError(`${file}: not a comlrl bench result (schema 1 with ceilings, generation, training and trainer sections)`);
  }
  return result as BenchResult;
}

type Figure = { value: number; better: ComparisonRow["better"] };

/** The figures a comparison reads, by name: each case's rate (higher is better) and peak RSS (lower is better). */
function figures(result: BenchResult): Map<string, Figure> {
  const map = new Map<string, Figure>();
  const add = (name: string, value: number, better: Figure["better"] = "higher") => map.set(name, { value, better });
  for (const ceiling of Object.values(result.ceilings.matmul)) add(`${ceiling.id} GFLOP/s`, ceiling.gflops.median);
  add(`${result.ceilings.copy.id} GB/s`, result.ceilings.copy.gbps.median);
  add(`${result.ceilings.copy.id} read GB/s`, result.ceilings.copy.readGbps.median);
  for (const g of result.generation) {
    add(`${g.case.id} tok/s`, g.tokensPerSecond.median);
    add(`${g.case.id} peak RSS MiB`, g.peakRssMiB, "lower");
  }
  for (const t of result.training) {
    add(`${t.case.id} tok/s`, t.tokensPerSecond.median);
    add(`${t.case.id} peak RSS MiB`, t.peakRssMiB, "lower");
  }
  for (const t of [...result.trainer, ...(result.algorithms ?? [])]) add(`${t.case.id} env steps/s`, t.envStepsPerSecond.median);
  if (result.trainerSpeedup !== null) add("trainer/demo batched speedup ×", result.trainerSpeedup);
  return map;
}

/** Rows for the figures both results have, in this run's order. */
export function compareResults(current: BenchResult, previous: BenchResult): ComparisonRow[] {
  const before = figures(previous);
  return [...figures(current)].flatMap(([figure, { value, better }]) => {
    const old = before.get(figure);
    return old ? [{ figure, previous: old.value, current: value, ratio: value / old.value, better }] : [];
  });
}
