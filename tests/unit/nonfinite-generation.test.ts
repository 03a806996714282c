// A model whose weights hold NaN (a corrupted or overflowed checkpoint) has NaN logits, which greedy decoding and
// sampling still turn into token ids (token 0): generation refuses the batch instead, naming the model. The check
// is a flag kept on the device and read once per generate() call, so decoding gains no host sync per token.
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { CausalLM } from "../../src/models/causal-lm.js";
import { createTinyModel } from "../../src/models/tiny-model.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-nonfinite-"));
const healthy = path.join(scratch, "healthy");
const poisoned = path.join(scratch, "poisoned");

/** Copies dir's model with every element of `tensor` (float32) set to `value`. */
function poison(from: string, to: string, tensor: string, value: number): void {
  cpSync(from, to, { recursive: true });
  const file = path.join(to, "model.safetensors");
  const bytes = readFileSync(file);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8")) as Record<string, { dtype: string; data_offsets: [number, number] }>;
  const entry = header[tensor];
  expect(entry?.dtype).toBe("F32");
  const data = new Float32Array(bytes.buffer, bytes.byteOffset + 8 + headerLength + entry.data_offsets[0], (entry.data_offsets[1] - entry.data_offsets[0]) / 4);
  data.fill(value);
  writeFileSync(file, bytes);
}

beforeAll(async () => {
  await createTinyModel(healthy, { seed: 5, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
  poison(healthy, poisoned, "model.norm.weight", Number.NaN);
});

describe("non-finite logits in generation", () => {
  for (const doSample of [false, true]) {
    it(`NaN weights: generate (${doSample ? "sampled" : "greedy"}) is refused, naming the model`, async () => {
      const model = await CausalLM.fromDirectory(poisoned);
      try {
        if (doSample) model.native.setSeed(1);
        await expect(model.generate([Int32Array.from([5, 6, 7])], { maxNewTokens: 4, doSample, eosTokenIds: [] })).rejects.toThrow(
          `${poisoned}: generate: the model's next-token logits are not finite (NaN or infinite)`,
        );
      } finally {
        model.dispose();
      }
    });
  }

  it("the same model with finite weights generates", async () => {
    const model = await CausalLM.fromDirectory(healthy);
    try {
      const out = await model.generate([Int32Array.from([5, 6, 7])], { maxNewTokens: 4, eosTokenIds: [] });
      expect(out.lengths[0]).toBe(4);
    } finally {
      model.dispose();
    }
  });
});
