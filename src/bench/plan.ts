// What the suite runs: the case list of the default and the quick run.
import { FAMILY_TYPES } from "./models.js";
import type { AlgorithmCase, BenchCase, BenchDtype, BenchModelName, CeilingCase, GenerationCase, TrainingCase } from "./types.js";

export type Mode = "default" | "quick";

/** The suite's generation protocol (the issue's), and the one the peer figures were measured with. */
const SUITE_GENERATION = { promptLength: 64, newTokens: 128 };
const PEER_GENERATION = { promptLength: 32, newTokens: 64 };
/** A train step of 8 × 128 tokens, as the peer's: 8 rows of a 1-token prompt and a 127-token completion. */
const TRAIN_STEP = { rows: 8, tokensPerRow: 128, promptLength: 1 };
const DTYPES: BenchDtype[] = ["fp32", "bf16"];

export interface Plan {
  ceilings: CeilingCase[];
  cases: BenchCase[];
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

/** One demo epoch of each of the other trainers. */
function algorithmCases(items: number, repeats: number, warmUp: boolean): AlgorithmCase[] {
  return (["iac", "maac", "madpo", "marlhf"] as const).map((algorithm) => ({ kind: "algorithm", id: `trainer/demo/${algorithm}`, algorithm, items, repeats, warmUp }));
}

/** The demo epoch as 1 process × 2 threads, 2 data-parallel ranks × 1 thread, and 1 × 1 (the layouts of two cores). */
function layoutCases(items: number, repeats: number, layouts: Array<[number, number]>): BenchCase[] {
  return layouts.map(([ranks, threads]) => ({ kind: "trainer", id: `trainer/demo/layout/${ranks}x${threads}`, scoring: "batched", items, repeats, layout: { ranks, threads } }));
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
        ...layoutCases(2, 1, [[2, 1]]),
        // One item and no warm-up: these check that each trainer's epoch runs and splits into its phases.
        ...algorithmCases(1, 1, false),
      ],
    };
  }
  // Repeats per size: three where a run takes seconds; for the 0.5B model two in fp32 and one in bf16 or at batch 32
  // (a run takes minutes).
  const repeats = (model: BenchModelName, batch = 1, dtype: BenchDtype = "fp32") =>
    model !== "0.5b" ? 3 : batch >= 32 || dtype === "bf16" ? 1 : 2;
  const generationModels: BenchModelName[] = ["tiny", "20m", "0.5b"];
  const trainingModels: BenchModelName[] = ["tiny", "12m", "20m", "0.5b"];
  return {
    ceilings: [
      ...DTYPES.map((dtype): CeilingCase => ({ kind: "matmul", id: `ceiling/matmul/${dtype}`, dtype, repeats: 3, iterationSeconds: 1, repeatSeconds: 1.5 })),
      // 256 MiB per buffer: far beyond any CPU cache, so the copy runs at DRAM speed.
      { kind: "copy", id: "ceiling/copy", bytes: 256 * 2 ** 20, iterations: 5, repeats: 3 },
    ],
    cases: [
      ...generationModels.flatMap((model) => DTYPES.flatMap((dtype) => [1, 8, 32].map((batch) => generationCase(model, dtype, batch, "suite", repeats(model, batch, dtype))))),
      ...(["12m", "0.5b"] as const).flatMap((model) => [1, 8].map((batch) => generationCase(model, "fp32", batch, "peer", repeats(model, batch)))),
      ...trainingModels.flatMap((model) => DTYPES.map((dtype) => trainingCase(model, dtype, repeats(model, 1, dtype)))),
      // The families whose work differs from a dense decoder's: one generation and one training row each.
      ...(["moe", "sliding"] as const).flatMap((model) => [generationCase(model, "fp32", 8, "suite", repeats(model)), trainingCase(model, "fp32", repeats(model))]),
      trainingCase("moe-aux", "fp32", repeats("moe-aux")),
      // Each family's train step at one shape: its norms, activations and attention variants against the same ceiling.
      ...FAMILY_TYPES.map((family) => trainingCase(`family-${family}`, "fp32", 3)),
      ...trainerCases(16, 3),
      ...layoutCases(16, 3, [[1, 2], [2, 1], [1, 1]]),
      ...algorithmCases(16, 3, true),
    ],
  };
}
