// Generation throughput: greedy decoding of `batch` random prompts with the KV cache, no stop ids, so every row
// produces exactly newTokens tokens. Timed as a user sees it (one generate() call, prefill included); each run also
// times the prefill alone (one new token), so that the decode steps can be read against the memory-bandwidth roofline.
import { BENCH_MODELS, buildBenchModel, randomTokens } from "./models.js";
import { secondsSince } from "./stats.js";
import type { GenerationCase, WorkerOutput } from "./types.js";

export async function measureGeneration(spec: GenerationCase, device: string): Promise<WorkerOutput> {
  const setupStarted = performance.now();
  const model = buildBenchModel(spec.model, spec.dtype, device);
  const setupSeconds = secondsSince(setupStarted);
  try {
    const prompts = randomTokens(spec.batch, spec.promptLength, BENCH_MODELS[spec.model].shape.vocabSize, 1);
    const generate = (rows: Int32Array[], maxNewTokens: number) => model.generate(rows, { maxNewTokens, eosTokenIds: [] });
    // Warm-up at the full batch but with 4-token prompts: the first calls pay for allocations and thread-pool start,
    // and a short warm-up keeps that cheap on large models.
    await generate(prompts.map((row) => row.slice(0, 4)), 2);
    const times: number[] = [];
    const prefillTimes: number[] = [];
    for (let r = 0; r < spec.repeats; r++) {
      let started = performance.now();
      await generate(prompts, 1);
      prefillTimes.push(secondsSince(started));
      started = performance.now();
      const { lengths } = await generate(prompts, spec.newTokens);
      times.push(secondsSince(started));
      if (lengths.some((length) => length !== spec.newTokens)) throw new Error(`${spec.id}: a row stopped before ${spec.newTokens} tokens`);
    }
    const info = model.info();
    return {
      samples: { seconds: times },
      // The fastest prefill is the best estimate of its cost: noise only ever adds time.
      details: { prefillSeconds: Math.min(...prefillTimes), setupSeconds, parameterCount: info.parameterCount, parameterBytes: info.parameterBytes },
    };
  } finally {
    model.dispose();
  }
}
