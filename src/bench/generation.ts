// Generation throughput: greedy decoding of `batch` random prompts with the KV cache, no stop ids, so every row
// produces exactly newTokens tokens. Timed as a user sees it (one generate() call, prefill included); each run also
// times the prefill alone (one new token), so that the decode steps can be read against the memory-bandwidth roofline.
import { BENCH_MODELS, buildBenchModel, randomTokens } from "./models.js";
import { secondsSince } from "./stats.js";
import type { GenerationCase, WorkerOutput } from "./types.js";

const PREFILL_TRIES = 3;
const SHORT_PREFILL_SECONDS = 1;
const EXTRA_PREFILL_TRIES = 20;

export async function measureGeneration(spec: GenerationCase, device: string): Promise<WorkerOutput> {
  const setupStarted = performance.now();
  const model = buildBenchModel(spec.model, spec.dtype, device);
  const setupSeconds = secondsSince(setupStarted);
  try {
    const prompts = randomTokens(spec.batch, spec.promptLength, BENCH_MODELS[spec.model].shape.vocabSize, 1);
    const generate = (rows: Int32Array[], maxNewTokens: number) => model.generate(rows, { maxNewTokens, eosTokenIds: [] });
    // Warm-up: one whole call. The first call at a shape pays for allocations, first-touch page faults and
    // thread-pool start (a 12M model's first batch-8 call ran ~25% slower than the next ones).
    await generate(prompts, spec.newTokens);
    const times: number[] = [];
    const prefillTimes: number[] = [];
    for (let r = 0; r < spec.repeats; r++) {
      // A stall of a few milliseconds (a descheduled thread) can exceed a small model's whole prefill, so a short
      // prefill is timed up to three times; a long one, where a stall is lost in the noise, once.
      for (let k = 0, spent = 0; k < PREFILL_TRIES && spent < SHORT_PREFILL_SECONDS; k++) {
        const prefillStarted = performance.now();
        await generate(prompts, 1);
        prefillTimes.push(secondsSince(prefillStarted));
        spent += prefillTimes.at(-1)!;
      }
      const started = performance.now();
      const { lengths } = await generate(prompts, spec.newTokens);
      times.push(secondsSince(started));
      if (lengths.some((length) => length !== spec.newTokens)) throw new Error(`a row stopped before ${spec.newTokens} tokens`);
    }
    // Noise only ever adds time, so a prefill that looks as slow as a whole call was hit by it: time it again.
    for (let extra = 0; extra < EXTRA_PREFILL_TRIES && Math.min(...prefillTimes) >= Math.min(...times); extra++) {
      const prefillStarted = performance.now();
      await generate(prompts, 1);
      prefillTimes.push(secondsSince(prefillStarted));
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
