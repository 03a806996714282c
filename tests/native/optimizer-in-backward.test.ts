// A step taken in backward (NativeOptimizer.stepInBackward): each parameter stepped as autograd completes its gradient
// and the gradient dropped there. Against twins that step after the backward: the same parameters and reported norm
// bit for bit, over steps, tied and untied heads, the LM head whole and in blocks (a blocked head writes its weight's
// gradient outside autograd, which step() then takes), with a value head in a second group; and the guards: a second
// backward, clipping, a non-finite loss, disarming; and with gradient checkpointing, in float32 and bf16-mixed.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { CausalLM } from "../../src/models/causal-lm.js";
import { Optimizer } from "../../src/models/optimizer.js";
import type { NativeOptimizer, NativeValueHead } from "../../src/native/binding.js";
import { addon } from "../../src/native/loader.js";
import { setLogitsBlockRows } from "../../src/runtime.js";
import { batchOf, tinyLM } from "./tiny-lm.js";

const disposables: Array<{ dispose(): void }> = [];
afterAll(() => disposables.forEach((d) => d.dispose()));
afterEach(() => setLogitsBlockRows(0));

const prompts = [[1, 2, 3], [4, 5]];
const completions = [[6, 7], [8, 9, 10]];
const valueBatch = { ...batchOf(prompts, completions), readout: "q" as const, targets: Float32Array.from([0.5, -1]) };

interface Twin {
  model: CausalLM;
  critic: NativeValueHead;
  optimizer: NativeOptimizer;
}

/** A model and a value head under one optimizer of two groups with their own lr and weight decay. */
function twin(seed: number, tied: boolean): Twin {
  const model = tinyLM(seed, { tieWordEmbeddings: tied });
  const critic = new (addon().NativeValueHead)({ hiddenSize: 16, hiddenDim: 8, dtype: "float32", device: "cpu", seed });
  const optimizer = new (addon().NativeOptimizer)([{ module: model.native, weightDecay: 0.1 }, { module: critic, lr: 3e-2, weightDecay: 0 }], { lr: 1e-2 });
  disposables.push(model, critic, optimizer);
  return { model, critic, optimizer };
}

const parameters = (t: Twin) => [
  ...t.model.native.parameterNames().map(({ name }) => t.model.native.getParameter(name)),
  ...t.critic.parameterNames().map(({ name }) => t.critic.getParameter(name)),
];
const gradientNames = (t: Twin) => t.model.native.parameterNames().flatMap(({ name }) => (t.model.native.getGradient(name) ? [name] : []));

/** One step's gradients: a policy gradient through the model alone, or a value loss through both groups. */
async function backward(t: Twin, headless: boolean, advantages = [1, -0.5]): Promise<void> {
  await t.model.zeroGrad();
  await t.critic.zeroGrad();
  if (headless) await t.model.policyGradientBackward(prompts, completions, advantages);
  else await addon().valueLossBackward(t.model.native, t.critic, valueBatch);
}

describe("a step taken in backward", () => {
  it("is the step after the backward, bit for bit, and leaves no gradient behind but a blocked head's", async () => {
    for (const tied of [false, true]) {
      for (const blockRows of [0, 2]) {
        setLogitsBlockRows(blockRows);
        const after = twin(21, tied);
        const within = twin(21, tied);
        for (let step = 0; step < 4; step++) {
          const headless = step % 2 === 0;
          await backward(after, headless);
          const expected = await after.optimizer.step();
          await within.optimizer.stepInBackward(true);
          await backward(within, headless);
          // A blocked, untied head's weight has its gradient written outside autograd (no accumulator sees it): it
          // waits for step(). Every other gradient was applied and dropped inside the backward.
          const waiting = headless && blockRows > 0 && !tied ? ["lm_head.weight"] : [];
          expect(gradientNames(within), `tied ${tied}, blocks ${blockRows}, step ${step}`).toEqual(waiting);
          const taken = await within.optimizer.step();
          expect(taken.gradNorm, `tied ${tied}, blocks ${blockRows}, step ${step}`).toBe(expected.gradNorm);
          expect(parameters(within), `tied ${tied}, blocks ${blockRows}, step ${step}`).toEqual(parameters(after));
        }
      }
    }
  });

  it("refuses a second gradient for a stepped parameter, clipping, and a libtorch step; off disarms", async () => {
    const t = twin(22, true);
    await t.optimizer.stepInBackward(true);
    await backward(t, true);
    await expect(t.model.policyGradientBackward(prompts, completions, [1, -0.5])).rejects.toThrow(/received a second gradient in one step/);
    expect(() => t.optimizer.step({ maxGradNorm: 1 })).toThrow(/maxGradNorm cannot apply to a step begun in backward/);
    expect(() => t.optimizer.step({ libtorch: true })).toThrow(/libtorch cannot apply to a step begun in backward/);
    await t.optimizer.stepInBackward(false);
    // Disarmed: the next backward leaves its gradients for an ordinary step.
    await backward(t, true);
    expect(gradientNames(t).length).toBeGreaterThan(0);
    await expect(t.optimizer.step({ maxGradNorm: 1 })).resolves.toBeDefined();
  });

  it("never begins on a non-finite loss: no backward runs, no parameter moves", async () => {
    const t = twin(23, false);
    const before = parameters(t);
    await t.optimizer.stepInBackward(true);
    await backward(t, true, [Number.NaN, 1]);
    expect(gradientNames(t)).toEqual([]);
    expect((await t.optimizer.step()).gradNorm).toBe(0);
    expect(parameters(t)).toEqual(before);
  });
});

describe("a step taken in backward with gradient checkpointing (MAGRPO's default stepInBackward with gradientCheckpointing: true)", () => {
  // The checkpointed layers' parameters get their gradients in the re-entrant backward of each layer's recompute, so
  // their hooks fire inside that inner graph task; bf16-mixed steps float32 masters there and copies them back.
  it("is the step after the backward, bit for bit, in float32 and with bf16-mixed's master weights", async () => {
    for (const dtype of ["float32", "bfloat16"] as const) {
      const make = async () => {
        const base = tinyLM(41, { numLayers: 2, tieWordEmbeddings: true });
        const model = dtype === "float32" ? base : await base.clone({ dtype });
        if (model !== base) base.dispose();
        model.setGradientCheckpointing(true);
        const optimizer = new Optimizer(model, { lr: 1e-3, precision: "bf16-mixed" });
        disposables.push(model, optimizer);
        return { model, optimizer };
      };
      const after = await make();
      const within = await make();
      expect(within.optimizer.precision).toBe(dtype === "float32" ? "fp32" : "bf16-mixed");
      const weights = (model: CausalLM) => model.native.parameterNames().map(({ name }) => model.native.getParameter(name));
      const start = weights(within.model);
      for (let step = 0; step < 3; step++) {
        await after.model.zeroGrad();
        await after.model.policyGradientBackward(prompts, completions, [1, -0.5]);
        const expected = await after.optimizer.step();
        await within.model.zeroGrad();
        await within.optimizer.armStepInBackward();
        await within.model.policyGradientBackward(prompts, completions, [1, -0.5]);
        expect(within.model.native.parameterNames().flatMap(({ name }) => (within.model.native.getGradient(name) ? [name] : [])), `${dtype} step ${step}`).toEqual([]);
        const taken = await within.optimizer.step();
        expect(taken.gradNorm, `${dtype} step ${step}`).toBe(expected.gradNorm);
        expect(weights(within.model), `${dtype} step ${step}`).toEqual(weights(after.model));
      }
      expect(weights(within.model)).not.toEqual(start);
    }
  });
});

describe("the token embedding's gradient", () => {
  // With a gradient already in .grad the lookup's backward adds its rows there in place (summed per token id first)
  // instead of building a dense table-sized gradient for autograd to add: the same bits as that addition. Repeated
  // ids in both batches take the per-id sums.
  it("adds into an existing .grad exactly as autograd's accumulation of the dense gradient does", async () => {
    const model = tinyLM(24);
    disposables.push(model);
    const table = "model.embed_tokens.weight";
    const first = { prompts: [[1, 1, 2], [3, 1]], completions: [[1, 4], [5, 5, 1]], advantages: [0.7, -1.3] };
    const second = { prompts: [[2, 2, 6], [1, 3]], completions: [[6, 1], [2, 2, 2]], advantages: [-0.4, 0.9] };
    const gradientOf = async (...batches: Array<typeof first>) => {
      await model.zeroGrad();
      for (const b of batches) await model.policyGradientBackward(b.prompts, b.completions, b.advantages);
      return Float32Array.from(model.native.getGradient(table)!);
    };
    const alone = [await gradientOf(first), await gradientOf(second)];
    const accumulated = await gradientOf(first, second);
    expect(Array.from(accumulated)).toEqual(Array.from(alone[0], (g, i) => Math.fround(g + alone[1][i])));
  });
});
