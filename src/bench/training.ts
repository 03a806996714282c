// Training throughput: one policy-gradient step as the trainers take it — zero the gradients, one batched
// forward + backward over all rows' completion tokens, one AdamW step — on rows of random tokens.
import { Optimizer } from "../models/optimizer.js";
import { BENCH_MODELS, buildBenchModel, randomTokens } from "./models.js";
import { secondsSince } from "./stats.js";
import type { TrainingCase, WorkerOutput } from "./types.js";

export async function measureTraining(spec: TrainingCase, device: string): Promise<WorkerOutput> {
  const setupStarted = performance.now();
  const model = buildBenchModel(spec.model, spec.dtype, device);
  const optimizer = new Optimizer(model, { lr: 1e-5 });
  const setupSeconds = secondsSince(setupStarted);
  try {
    const vocabSize = BENCH_MODELS[spec.model].shape.vocabSize;
    const prompts = randomTokens(spec.rows, spec.promptLength, vocabSize, 2);
    const completions = randomTokens(spec.rows, spec.tokensPerRow - spec.promptLength, vocabSize, 3);
    // Advantages of both signs, as a group baseline gives; their size does not change the work.
    const weights = prompts.map((_, row) => (row % 2 ? 1 : -1) / spec.rows);
    // One step, timed in its two parts: where the time goes matters as much as the total.
    const step = async (completionRows: Int32Array[]) => {
      const started = performance.now();
      await model.zeroGrad();
      await model.policyGradientBackward(prompts, completionRows, weights);
      const backward = secondsSince(started);
      const optimizerStarted = performance.now();
      await optimizer.step();
      return { seconds: secondsSince(started), backward, optimizer: secondsSince(optimizerStarted) };
    };
    // Warm-up: one full step. The first step at a size touches its memory for the first time (gradients, AdamW's
    // moments, activations, logits), and page faults dominate it: 0.5B model 34 s, then 24 s a step once the
    // addon's allocator cache holds every block. A trainer lives in the second regime.
    await step(completions);
    const samples: Record<"seconds" | "backward" | "optimizer", number[]> = { seconds: [], backward: [], optimizer: [] };
    for (let r = 0; r < spec.repeats; r++) {
      const run = await step(completions);
      for (const key of ["seconds", "backward", "optimizer"] as const) samples[key].push(run[key]);
    }
    return { samples, details: { setupSeconds, parameterCount: model.info().parameterCount } };
  } finally {
    optimizer.dispose();
    model.dispose();
  }
}
