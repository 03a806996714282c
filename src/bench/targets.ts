// The peer the suite is read against, and the performance targets set relative to it and to the measured ceilings.
import type { BenchDtype, BenchModelName, BenchResult, GenerationResult, Target, TrainingResult } from "./types.js";

/** transformers 4.46.1 eager on PyTorch 1.13.1, fp32, 2 threads, OpenBLAS, on the 2-core machine kind the suite targets. */
export const PEER = {
  name: "transformers 4.46.1 eager, PyTorch 1.13.1, fp32, 2 threads, OpenBLAS",
  /** Greedy generate, prompt 32, 64 new tokens: new tokens per second. */
  generation: [
    { model: "12m", batch: 1, tokensPerSecond: 166 },
    { model: "12m", batch: 8, tokensPerSecond: 837 },
    { model: "0.5b", batch: 1, tokensPerSecond: 7.1 },
    { model: "0.5b", batch: 8, tokensPerSecond: 36 },
  ] as Array<{ model: BenchModelName; batch: number; tokensPerSecond: number }>,
  /** One step of 8 × 128 tokens, forward + backward + AdamW, seconds. */
  training: [
    { model: "12m", stepSeconds: 0.98 },
    { model: "0.5b", stepSeconds: 24.2 },
  ] as Array<{ model: BenchModelName; stepSeconds: number }>,
};

export function peerGeneration(result: GenerationResult): number | null {
  if (result.case.protocol !== "peer") return null;
  return PEER.generation.find((p) => p.model === result.case.model && p.batch === result.case.batch)?.tokensPerSecond ?? null;
}

export function peerTrainingStep(result: TrainingResult): number | null {
  return PEER.training.find((p) => p.model === result.case.model)?.stepSeconds ?? null;
}

const target = (name: string, value: number | null, goal: number, detail: string, unit: Target["unit"] = "ratio"): Target => ({
  name,
  value,
  goal,
  unit,
  met: value === null ? null : value >= goal,
  detail,
});

export function evaluateTargets(result: Pick<BenchResult, "generation" | "training" | "trainerSpeedup">): Target[] {
  const generation = (model: BenchModelName, batch: number, goal: number) => {
    const peer = PEER.generation.find((p) => p.model === model && p.batch === batch)!;
    const run = result.generation.find((g) => g.case.protocol === "peer" && g.case.model === model && g.case.batch === batch);
    const ratio = run ? run.tokensPerSecond.median / peer.tokensPerSecond : null;
    const detail = run ? `${run.tokensPerSecond.median.toFixed(1)} vs ${peer.tokensPerSecond} tok/s` : `no ${model} b${batch} peer-protocol run`;
    return target(`generate ${model} b${batch} vs peer`, ratio, goal, detail);
  };
  const training = (model: BenchModelName, dtype: BenchDtype) => result.training.find((t) => t.case.model === model && t.case.dtype === dtype);
  const fp32Fraction = (model: BenchModelName) => {
    const run = training(model, "fp32");
    const detail = run ? `${run.gflops.median.toFixed(1)} GFLOP/s of 6·params·tokens` : `no ${model} fp32 training run`;
    return target(`fp32 training ${model}: share of matmul ceiling`, run ? run.ceilingFraction.median : null, 0.7, detail, "fraction");
  };
  const bf16VsPeer = (model: BenchModelName) => {
    const run = training(model, "bf16");
    const peer = PEER.training.find((p) => p.model === model)!.stepSeconds;
    const detail = run ? `${run.stepSeconds.median.toFixed(2)} s vs the peer's ${peer} s fp32 step` : `no ${model} bf16 training run`;
    return target(`bf16 training ${model} vs peer step`, run ? peer / run.stepSeconds.median : null, 1.5, detail);
  };
  return [
    generation("12m", 1, 2),
    generation("12m", 8, 2),
    generation("0.5b", 8, 1.3),
    fp32Fraction("12m"),
    fp32Fraction("20m"),
    fp32Fraction("0.5b"),
    bf16VsPeer("12m"),
    bf16VsPeer("0.5b"),
    target(
      "demo MAGRPO epoch: batched vs per-completion scoring",
      result.trainerSpeedup,
      3,
      result.trainerSpeedup === null ? "not both demo epochs were run" : "per-completion epoch time over batched (medians)",
    ),
  ];
}
