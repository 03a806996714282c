// What the suite runs: the case list of the default and the quick run, and the rule that runs a case whose dtype is
// far slower than fp32 on this machine (bf16 on a CPU without AVX512-BF16/AMX) once, or skips it if that is too long.
import { BENCH_MODELS, parameterCount } from "./models.js";
import type { BenchCase, BenchDtype, BenchModelName, CeilingCase, GenerationCase, TrainingCase } from "./types.js";

export type Mode = "default" | "quick";

/** The suite's generation protocol (the issue's), and the one the peer figures were measured with. */
const SUITE_GENERATION = { promptLength: 64, newTokens: 128 };
const PEER_GENERATION = { promptLength: 32, newTokens: 64 };
/** A train step of 8 × 128 tokens, as the peer's: 8 rows of a 1-token prompt and a 127-token completion. */
const TRAIN_STEP = { rows: 8, tokensPerRow: 128, promptLength: 1 };
const DTYPES: BenchDtype[] = ["fp32", "bf16"];

/** A dtype whose matmul ceiling is this many times below fp32's counts as slow here. */
const SLOW_DTYPE_FACTOR = 4;

export interface Plan {
  ceilings: CeilingCase[];
  cases: BenchCase[];
  /** Seconds one run of a case in a slow dtype may be estimated to take before it is skipped. */
  slowCaseBudgetSeconds: number;
}

function generationCase(
  model: BenchModelName,
  dtype: BenchDtype,
  batch: number,
  protocol: GenerationCase["protocol"],
  repeats: number,
  lengths = protocol === "peer" ? PEER_GENERATION : SUITE_GENERATION,
): GenerationCase {
  const id = `generate/${model}/${dtype}/b${batch}/${lengths.promptLength}+${lengths.newTokens}`;
  return { kind: "generate", id, model, dtype, batch, protocol, repeats, ...lengths };
}

function trainingCase(model: BenchModelName, dtype: BenchDtype, repeats: number, step = TRAIN_STEP): TrainingCase {
  return { kind: "train", id: `train/${model}/${dtype}/${step.rows}x${step.tokensPerRow}`, model, dtype, repeats, ...step };
}

function trainerCases(items: number, repeats: number): BenchCase[] {
  return (["batched", "perCompletion"] as const).map((scoring) => ({ kind: "trainer", id: `trainer/demo/${scoring}`, scoring, items, repeats }));
}

export function planCases(mode: Mode): Plan {
  if (mode === "quick") {
    // A smoke run: every kind of benchmark once, on the tiny model, in well under a minute. It checks the suite runs.
    const short = { promptLength: 16, newTokens: 32 };
    return {
      ceilings: [
        ...DTYPES.map((dtype): CeilingCase => ({ kind: "matmul", id: `ceiling/matmul/${dtype}`, dtype, repeats: 3, iterationSeconds: 0.05, repeatSeconds: 0.1 })),
        { kind: "copy", id: "ceiling/copy", bytes: 16 * 2 ** 20, iterations: 3, repeats: 3 },
      ],
      cases: [
        generationCase("tiny", "fp32", 1, "suite", 1, short),
        generationCase("tiny", "fp32", 8, "suite", 1, short),
        generationCase("tiny", "bf16", 8, "suite", 1, short),
        trainingCase("tiny", "fp32", 1, { rows: 8, tokensPerRow: 32, promptLength: 1 }),
        trainingCase("tiny", "bf16", 1, { rows: 8, tokensPerRow: 32, promptLength: 1 }),
        ...trainerCases(2, 1),
      ],
      slowCaseBudgetSeconds: 10,
    };
  }
  // Repeats per size: three where a run takes seconds; two for the 0.5B model, one at its batch 32 (a run takes minutes).
  const repeats = (model: BenchModelName, batch = 1) => (model !== "0.5b" ? 3 : batch >= 32 ? 1 : 2);
  const generationModels: BenchModelName[] = ["tiny", "20m", "0.5b"];
  const trainingModels: BenchModelName[] = ["tiny", "12m", "20m", "0.5b"];
  return {
    ceilings: [
      ...DTYPES.map((dtype): CeilingCase => ({ kind: "matmul", id: `ceiling/matmul/${dtype}`, dtype, repeats: 3, iterationSeconds: 1, repeatSeconds: 1.5 })),
      // 256 MiB per buffer: far beyond any CPU cache, so the copy runs at DRAM speed.
      { kind: "copy", id: "ceiling/copy", bytes: 256 * 2 ** 20, iterations: 5, repeats: 3 },
    ],
    cases: [
      ...generationModels.flatMap((model) => DTYPES.flatMap((dtype) => [1, 8, 32].map((batch) => generationCase(model, dtype, batch, "suite", repeats(model, batch))))),
      ...(["12m", "0.5b"] as const).flatMap((model) => [1, 8].map((batch) => generationCase(model, "fp32", batch, "peer", repeats(model, batch)))),
      ...trainingModels.flatMap((model) => DTYPES.map((dtype) => trainingCase(model, dtype, repeats(model)))),
      ...trainerCases(16, 3),
    ],
    slowCaseBudgetSeconds: 30,
  };
}

/** Matmul FLOPs a case performs in all: 2 per parameter per token forward, 6 forward + backward. */
export function estimatedFlops(spec: BenchCase): number {
  if (spec.kind === "trainer") return 0;
  const parameters = parameterCount(BENCH_MODELS[spec.model].shape);
  if (spec.kind === "train") return spec.repeats * 6 * parameters * spec.rows * spec.tokensPerRow;
  // A warm-up prefill, then per run a prefill alone (short ones are retried, at little cost) and a whole generate().
  const tokensPerRow = (spec.repeats + 1) * spec.promptLength + spec.repeats * (spec.promptLength + spec.newTokens);
  return 2 * parameters * spec.batch * tokensPerRow;
}

/** How a case runs on this machine: as planned, once (in a slow dtype), or not at all (with the reason). */
export type Fitted = { run: BenchCase } | { skip: string };

/**
 * A case in a dtype whose matmul ceiling is far below fp32's runs once — its figure only shows how much slower that
 * dtype is here — and is skipped when even one run is estimated, from its matmul FLOPs at that ceiling, to take
 * longer than the budget. The estimate is optimistic (decoding a few rows in bf16 on such a CPU runs several times
 * slower than its matmul rate), which is why the budget is tight.
 */
export function fitToMachine(spec: BenchCase, matmulGflops: Partial<Record<BenchDtype, number>>, budgetSeconds: number): Fitted {
  if (spec.kind === "trainer" || spec.dtype === "fp32") return { run: spec };
  const rate = matmulGflops[spec.dtype];
  const fp32 = matmulGflops.fp32;
  if (rate === undefined || fp32 === undefined || rate * SLOW_DTYPE_FACTOR > fp32) return { run: spec };
  const once = { ...spec, repeats: 1 };
  const seconds = estimatedFlops(once) / (rate * 1e9);
  if (seconds <= budgetSeconds) return { run: once };
  return {
    skip:
      `${spec.dtype} matmul runs at ${rate.toFixed(1)} GFLOP/s here, ${(fp32 / rate).toFixed(0)}× below fp32's ${fp32.toFixed(0)} ` +
      `(no native ${spec.dtype} on this CPU); one run would take over ${seconds.toFixed(0)} s, more than the ${budgetSeconds} s allowed a slow-dtype case`,
  };
}
