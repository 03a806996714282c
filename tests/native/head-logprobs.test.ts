// Scoring through the LM head a block of rows at a time (native/model/head_logprobs.h): the same log-probs,
// entropies and gradients as the head computed whole, for every kind of head (untied, tied, soft-capped), on the
// shared-prompt and the separate-prompt paths, with and without grad; and the memory it saves at Qwen's vocabulary.
import { afterEach, describe, expect, it } from "vitest";
import { CausalLM } from "../../src/models/causal-lm.js";
import { buildConfigJson } from "../../src/models/config.js";
import { addon } from "../../src/native/loader.js";
import { logitsBlockRows, memoryWindow, setLogitsBlockRows } from "../../src/runtime.js";

const SHAPE = { vocabSize: 997, hiddenSize: 24, intermediateSize: 48, numLayers: 2, numHeads: 2, numKvHeads: 1, ropeTheta: 1e4, rmsNormEps: 1e-6, tieWordEmbeddings: false };

const HEADS = {
  untied: () => CausalLM.create(buildConfigJson("qwen2", SHAPE, { bosTokenId: null, eosTokenId: 996 }), { seed: 3, initStd: 0.3 }),
  tied: () => CausalLM.create(buildConfigJson("qwen2", { ...SHAPE, tieWordEmbeddings: true }, { bosTokenId: null, eosTokenId: 996 }), { seed: 4, initStd: 0.3 }),
  "soft-capped (gemma2)": () =>
    CausalLM.create(buildConfigJson("gemma2", { ...SHAPE, tieWordEmbeddings: true }, { bosTokenId: null, eosTokenId: 996 }, { final_logit_softcapping: 2.0, head_dim: 12, query_pre_attn_scalar: 12 }), {
      seed: 5,
      initStd: 0.3,
    }),
};

// Rows 0 and 1 share a prompt (the shared-prompt path); rows of distinct prompts take the padded forward.
const SHARED = { prompts: [[5, 6, 7], [5, 6, 7], [9, 10]], completions: [[11, 12, 13, 14, 15, 16, 17], [20, 21, 22, 23, 24], [30, 31, 32, 33, 34, 35, 36, 37, 38]] };
const SEPARATE = { prompts: [[5, 6, 7], [8], [9, 10]], completions: SHARED.completions };
const ADVANTAGES = [0.7, -1.3, 0.4];

afterEach(() => setLogitsBlockRows(0));

function gradients(model: CausalLM): Float64Array {
  const parts = model.native.parameterNames().map(({ name }) => model.native.getGradient(name) ?? new Float32Array(0));
  return Float64Array.from(parts.flatMap((p) => Array.from(p)));
}

function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tolerance: number): void {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < actual.length; i++) worst = Math.max(worst, Math.abs(actual[i] - expected[i]));
  expect(worst).toBeLessThanOrEqual(tolerance);
}

function expectGradientsClose(actual: Float64Array, expected: Float64Array): void {
  expect(actual.length).toBe(expected.length);
  let diff = 0, norm = 0;
  for (let i = 0; i < actual.length; i++) {
    diff += (actual[i] - expected[i]) ** 2;
    norm += expected[i] ** 2;
  }
  expect(norm).toBeGreaterThan(0);
  expect(Math.sqrt(diff)).toBeLessThanOrEqual(1e-5 * Math.sqrt(norm));
}

describe.each(Object.entries(HEADS))("%s head scored in blocks", (_name, make) => {
  for (const [pathName, batch] of Object.entries({ "shared prompts": SHARED, "separate prompts": SEPARATE })) {
    it(`${pathName}: log-probs and entropies without grad, the policy gradient and an entropy bonus's gradient match the whole head (blocks of 1, 4, 8 of 21 tokens)`, async () => {
      const model = make();
      const whole = await model.score(batch.prompts, batch.completions, { entropy: true, tokenLogprobs: true });
      await model.zeroGrad();
      const wholeLoss = await model.policyGradientBackward(batch.prompts, batch.completions, ADVANTAGES);
      const wholeGrad = gradients(model);
      const objective = { objective: { lossType: "grpo" as const, entropyCoef: 0.3 }, advantages: Float32Array.from(ADVANTAGES) };
      const completionBatch = {
        prompts: Int32Array.from(batch.prompts.flat()),
        promptLengths: Int32Array.from(batch.prompts.map((p) => p.length)),
        completions: Int32Array.from(batch.completions.flat()),
        completionLengths: Int32Array.from(batch.completions.map((c) => c.length)),
      };
      await model.zeroGrad();
      const wholeObjective = await addon().objectiveBackward(model.native, { ...completionBatch, ...objective });
      const wholeObjectiveGrad = gradients(model);
      expect(wholeObjective.entropyMean).toBeGreaterThan(0);
      for (const rows of [1, 4, 8]) {
        setLogitsBlockRows(rows);
        const blocked = await model.score(batch.prompts, batch.completions, { entropy: true, tokenLogprobs: true });
        expectClose(blocked.tokenLogprobs!, whole.tokenLogprobs!, 1e-5);
        expectClose(blocked.entropy!, whole.entropy!, 1e-5);
        expectClose(blocked.sum, whole.sum, 1e-4);
        await model.zeroGrad();
        const loss = await model.policyGradientBackward(batch.prompts, batch.completions, ADVANTAGES);
        expect(Math.abs(loss.loss - wholeLoss.loss)).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(wholeLoss.loss)));
        expectGradientsClose(gradients(model), wholeGrad);
        await model.zeroGrad();
        const blockedObjective = await addon().objectiveBackward(model.native, { ...completionBatch, ...objective });
        expect(Math.abs(blockedObjective.entropyMean - wholeObjective.entropyMean)).toBeLessThanOrEqual(1e-5);
        expectClose(blockedObjective.tokenLogprobs, wholeObjective.tokenLogprobs, 1e-5);
        expectGradientsClose(gradients(model), wholeObjectiveGrad);
      }
      model.dispose();
    });
  }
});

// The head's weight gradient is added into .grad block by block by the backward itself. In bf16 each block's
// addition rounds to bf16 (as gradient accumulation over micro-batches does), so the bound is bf16's, not fp32's.
describe.each(["float32", "bfloat16"] as const)("the weight gradient of a tied head in %s", (dtype) => {
  const relative = (actual: Float64Array, expected: Float64Array) => {
    let diff = 0, norm = 0;
    for (let i = 0; i < actual.length; i++) {
      diff += (actual[i] - expected[i]) ** 2;
      norm += expected[i] ** 2;
    }
    expect(norm).toBeGreaterThan(0);
    return Math.sqrt(diff / norm);
  };
  const bound = dtype === "float32" ? 1e-6 : 5e-3;
  const tiedShape = { ...SHAPE, tieWordEmbeddings: true };
  const makers = {
    "qwen2": () => CausalLM.create(buildConfigJson("qwen2", tiedShape, { bosTokenId: null, eosTokenId: 996 }), { seed: 4, initStd: 0.3, dtype }),
    "soft-capped gemma2": () =>
      CausalLM.create(buildConfigJson("gemma2", tiedShape, { bosTokenId: null, eosTokenId: 996 }, { final_logit_softcapping: 2.0, head_dim: 12, query_pre_attn_scalar: 12 }), {
        seed: 5,
        initStd: 0.3,
        dtype,
      }),
  };
  for (const [name, make] of Object.entries(makers)) {
    it(`${name}: blocks of 3 and 8 rows give the whole head's embedding/head gradient and every other gradient`, async () => {
      const model = make();
      const embedding = model.native.parameterNames().find(({ name: n }) => n.endsWith("embed_tokens.weight"))!.name;
      const headGradient = () => Float64Array.from(model.native.getGradient(embedding)!);
      setLogitsBlockRows(1 << 20);
      await model.zeroGrad();
      await model.policyGradientBackward(SEPARATE.prompts, SEPARATE.completions, ADVANTAGES);
      const wholeHead = headGradient();
      const wholeAll = gradients(model);
      for (const rows of [3, 8]) {
        setLogitsBlockRows(rows);
        await model.zeroGrad();
        await model.policyGradientBackward(SEPARATE.prompts, SEPARATE.completions, ADVANTAGES);
        expect(relative(headGradient(), wholeHead)).toBeLessThanOrEqual(bound);
        expect(relative(gradients(model), wholeAll)).toBeLessThanOrEqual(bound);
        // A second backward without zeroing accumulates: twice the gradient.
        await model.policyGradientBackward(SEPARATE.prompts, SEPARATE.completions, ADVANTAGES);
        expect(relative(headGradient(), wholeHead.map((g) => 2 * g))).toBeLessThanOrEqual(bound);
      }
      model.dispose();
    });
  }
});

describe("setLogitsBlockRows", () => {
  it("refuses what is not 0 or a positive integer", () => {
    expect(() => setLogitsBlockRows(-1)).toThrow(/rows must be 0 \(automatic\) or a positive integer, got -1/);
    expect(() => setLogitsBlockRows(2.5)).toThrow(/got 2.5/);
  });
});

describe("block size per device", () => {
  const GiB = 2 ** 30;
  const QWEN_VOCAB = 151936;

  it("64 MiB of logits on a CPU whatever is free; a sixteenth of the free memory on a GPU, between 64 MiB and 2 GiB", () => {
    expect(logitsBlockRows(QWEN_VOCAB, "cpu")).toBe(110);
    expect(logitsBlockRows(QWEN_VOCAB, "cpu", 80 * GiB)).toBe(110);
    expect(logitsBlockRows(997, "cpu")).toBe(Math.floor((64 * 2 ** 20) / (4 * 997)));
    expect(logitsBlockRows(QWEN_VOCAB, "cuda:0", 80 * GiB)).toBe(Math.floor((2 * GiB) / (4 * QWEN_VOCAB)));
    expect(logitsBlockRows(QWEN_VOCAB, "cuda:1", 4 * GiB)).toBe(Math.floor((GiB / 4) / (4 * QWEN_VOCAB)));
    expect(logitsBlockRows(QWEN_VOCAB, "cuda:0", GiB / 2)).toBe(110);
    setLogitsBlockRows(5);
    expect(logitsBlockRows(QWEN_VOCAB, "cuda:0", 80 * GiB)).toBe(5);
    expect(() => logitsBlockRows(0, "cpu")).toThrow(/vocab must be a positive integer, got 0/);
    expect(() => logitsBlockRows(QWEN_VOCAB, "gpu")).toThrow(/gpu/);
  });

  it("a GPU's blocks give the CPU's gradients at Qwen's vocabulary (441 rows a block at 4 GiB free, 110 on a CPU)", async () => {
    const shape = { ...SHAPE, vocabSize: QWEN_VOCAB, hiddenSize: 32, numLayers: 1 };
    const model = CausalLM.create(buildConfigJson("qwen2", shape, { bosTokenId: null, eosTokenId: QWEN_VOCAB - 1 }), { seed: 7, initStd: 0.1 });
    const prompts = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10], [11, 12], [13], [14, 15, 16], [17]];
    const completions = prompts.map((_, r) => Array.from({ length: 64 }, (_, i) => 100 + r * 1000 + i * 7));
    const run = async (rows: number) => {
      setLogitsBlockRows(rows);
      await model.zeroGrad();
      const { loss } = await model.policyGradientBackward(prompts, completions, [1, -1, 0.5, -0.5, 0.25, -0.25, 2, -2]);
      return { loss, gradients: gradients(model) };
    };
    const gpuRows = logitsBlockRows(QWEN_VOCAB, "cuda:0", 4 * GiB);
    expect(gpuRows).toBe(441);
    const cpu = await run(0);
    const gpu = await run(gpuRows);
    expect(gpu.loss).toBeCloseTo(cpu.loss, 5);
    expectGradientsClose(gpu.gradients, cpu.gradients);
    model.dispose();
  });
});

describe("memory at Qwen's vocabulary (151,936)", () => {
  it("a policy-gradient backward over 512 completion tokens peaks at under half the whole head's extra memory", async () => {
    const shape = { ...SHAPE, vocabSize: 151936, hiddenSize: 32, numLayers: 1 };
    const model = CausalLM.create(buildConfigJson("qwen2", shape, { bosTokenId: null, eosTokenId: 151935 }), { seed: 6, initStd: 0.1 });
    const prompts = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10], [11, 12], [13], [14, 15, 16], [17]];
    const completions = prompts.map((_, r) => Array.from({ length: 64 }, (_, i) => 100 + r * 1000 + i * 7));
    const extra = async (rows: number) => {
      setLogitsBlockRows(rows);
      await model.zeroGrad();
      const before = memoryWindow();
      await model.policyGradientBackward(prompts, completions, [1, -1, 0.5, -0.5, 0.25, -0.25, 2, -2]);
      return memoryWindow().peakResidentBytes - before.residentBytes;
    };
    // Blocked first: the CPU allocator's cache keeps what a run freed, so the whole head's run after it still
    // has to find its [512 × vocab] tensors anew.
    const blocked = await extra(0);
    const whole = await extra(1 << 20);
    // One [512 × 151936] float32 tensor is 297 MiB; the whole head's backward holds two at once (logits and their gradient).
    expect(whole).toBeGreaterThan(500 * 1024 * 1024);
    console.log(`extra peak: blocked ${(blocked / 2 ** 20).toFixed(0)} MiB, whole ${(whole / 2 ** 20).toFixed(0)} MiB`);
    expect(blocked).toBeLessThan(0.5 * whole);
    model.dispose();
  });
});
