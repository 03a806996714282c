// Small in-memory models and batch builders shared by the head, optimizer and I/O tests.
import { CausalLM } from "../../src/models/causal-lm.js";
import { buildConfigJson } from "../../src/models/config.js";
import type { CompletionBatchInput } from "../../src/native/binding.js";

export const TINY_SHAPE = { vocabSize: 64, hiddenSize: 16, intermediateSize: 32, numLayers: 1, numHeads: 2, numKvHeads: 1, ropeTheta: 1e4, rmsNormEps: 1e-6, tieWordEmbeddings: false };

export function tinyLM(seed = 1, shape: Partial<typeof TINY_SHAPE> = {}): CausalLM {
  const full = { ...TINY_SHAPE, ...shape };
  return CausalLM.create(buildConfigJson("qwen2", full, { bosTokenId: null, eosTokenId: full.vocabSize - 1 }), { seed, initStd: 0.2 });
}

export function batchOf(prompts: number[][], completions: number[][]): CompletionBatchInput {
  return {
    prompts: Int32Array.from(prompts.flat()),
    promptLengths: Int32Array.from(prompts.map((p) => p.length)),
    completions: Int32Array.from(completions.flat()),
    completionLengths: Int32Array.from(completions.map((c) => c.length)),
  };
}
