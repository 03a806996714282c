// Generation throughput: greedy decoding of `batch` random prompts with the KV cache, no stop ids, so every row
// produces exactly newTokens tokens. Timed as a user sees it (one generate() call, prefill included); the prefill is
// also timed alone so that the decode steps can be read against the memory-bandwidth roofline.
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
    // Warm-up: the first call pays for allocator and thread-pool start; a short one keeps large models cheap.
    await generate([prompts[0].slice(0, 4)], 2);
    const prefillStarted = performance.now();
    await generate(prompts, 1);
    const prefillSeconds = secondsSince(prefillStarted);
    const times: number[] = [];
    for (let r = 0; r < spec.repeats; r++) {
      const started = performance.now();
      const { lengths } = await generate(prompts, spec.newTokens);
      times.push(secondsSince(started));
      if (lengths.some((length) => length !== spec.newTokens)) throw new Error(`${spec.id}: a row stopped before ${spec.newTokens} tokens`);
    }
    const info = model.info();
    return {
      samples: { seconds: times },
      details: { prefillSeconds, setupSeconds, parameterCount: info.parameterCount, parameterBytes: info.parameterBytes },
    };
  } finally {
    model.dispose();
  }
}
