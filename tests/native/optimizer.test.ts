// NativeOptimizer over parameter groups: per-group learning rate and weight decay, AdamW's first step against a hand
// computation, the total gradient norm over all groups, save/load continuation and refusal of a mismatched file.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { NativeValueHead } from "../../src/native/binding.js";
import { addon } from "../../src/native/loader.js";
import { Optimizer } from "../../src/models/optimizer.js";
import { ValueHead } from "../../src/models/value-head.js";
import { batchOf, tinyLM } from "./tiny-lm.js";
import { illTyped } from "../support/ill-typed.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-optimizer-"));
const disposables: Array<{ dispose(): void }> = [];
afterAll(() => disposables.forEach((d) => d.dispose()));

function head(hiddenDim: number | null = 8, seed = 4): NativeValueHead {
  const h = new (addon().NativeValueHead)({ hiddenSize: 16, hiddenDim, dtype: "float32", device: "cpu", seed });
  disposables.push(h);
  return h;
}

const batch = { ...batchOf([[1, 2, 3], [4, 5]], [[6, 7], [8, 9, 10]]), readout: "q" as const, targets: Float32Array.from([0.5, -1]) };

describe("NativeOptimizer over parameter groups", () => {
  it("takes AdamW's first step per group with that group's lr and weight decay", async () => {
    const model = tinyLM(1);
    const critic = head();
    disposables.push(model);
    const optimizer = new (addon().NativeOptimizer)(
      [{ module: model.native, weightDecay: 0 }, { module: critic, lr: 1e-2, weightDecay: 0.1 }],
      { lr: 1e-3 },
    );
    expect(optimizer.learningRates()).toEqual([1e-3, 1e-2]);
    await addon().valueLossBackward(model.native, critic, batch);
    const before = { norm: model.native.getParameter("model.norm.weight"), head: critic.getParameter("2.weight") };
    const grads = { norm: model.native.getGradient("model.norm.weight")!, head: critic.getGradient("2.weight")! };
    await optimizer.step();
    // First AdamW step (bias-corrected m̂ = g, v̂ = g²): p ← p·(1 − lr·wd) − lr · g / (|g| + eps).
    const expected = (p: Float32Array, g: Float32Array, lr: number, wd: number) =>
      Array.from(p, (x, i) => x * (1 - lr * wd) - (lr * g[i]) / (Math.abs(g[i]) + 1e-8));
    const worst = (a: ArrayLike<number>, b: ArrayLike<number>) => Math.max(...Array.from(a, (x, i) => Math.abs(x - b[i])));
    expect(worst(model.native.getParameter("model.norm.weight"), expected(before.norm, grads.norm, 1e-3, 0))).toBeLessThan(1e-6);
    expect(worst(critic.getParameter("2.weight"), expected(before.head, grads.head, 1e-2, 0.1))).toBeLessThan(1e-6);
    optimizer.setLearningRate(5e-4, 1);
    expect(optimizer.learningRates()).toEqual([1e-3, 5e-4]);
    optimizer.setLearningRate(2e-4);
    expect(optimizer.learningRates()).toEqual([2e-4, 2e-4]);
    expect(() => optimizer.setLearningRate(1, 2)).toThrow(/group 2 does not exist \(2 groups\)/);
    optimizer.dispose();
  });

  it("reports the total gradient norm over every group before clipping, and clips across groups", async () => {
    const model = tinyLM(2);
    const critic = head();
    disposables.push(model);
    const optimizer = new (addon().NativeOptimizer)([{ module: model.native }, { module: critic }], { lr: 1e-3 });
    await addon().valueLossBackward(model.native, critic, batch);
    let squares = 0;
    for (const { name } of model.native.parameterNames()) for (const g of model.native.getGradient(name) ?? []) squares += g * g;
    for (const { name } of critic.parameterNames()) for (const g of critic.getGradient(name) ?? []) squares += g * g;
    const { gradNorm } = await optimizer.step({ maxGradNorm: 1e-3 });
    expect(Math.abs(gradNorm - Math.sqrt(squares)) / Math.sqrt(squares)).toBeLessThan(1e-5);
    // After clipping the gradients held are scaled to norm 1e-3 across both groups.
    let clipped = 0;
    for (const { name } of model.native.parameterNames()) for (const g of model.native.getGradient(name) ?? []) clipped += g * g;
    for (const { name } of critic.parameterNames()) for (const g of critic.getGradient(name) ?? []) clipped += g * g;
    expect(Math.abs(Math.sqrt(clipped) - 1e-3)).toBeLessThan(1e-6);
    optimizer.dispose();
  });

  it("saves and loads group state so a run continues exactly, and refuses a file of other groups or shapes", async () => {
    const run = async (interrupt: boolean) => {
      const model = tinyLM(3);
      const critic = head(8, 5);
      const groups = () => [{ module: model.native }, { module: critic, lr: 1e-2 }];
      let optimizer = new (addon().NativeOptimizer)(groups(), { lr: 1e-3 });
      for (let step = 0; step < 4; step++) {
        if (interrupt && step === 2) {
          const file = path.join(scratch, "groups.pt");
          await optimizer.save(file);
          optimizer.dispose();
          optimizer = new (addon().NativeOptimizer)(groups(), { lr: 1e-3 });
          await optimizer.load(file);
        }
        await model.zeroGrad();
        await critic.zeroGrad();
        await addon().valueLossBackward(model.native, critic, batch);
        await optimizer.step();
      }
      optimizer.dispose();
      const out = [model.native.getParameter("model.norm.weight"), critic.getParameter("0.weight")];
      model.dispose();
      return out;
    };
    expect(await run(true)).toEqual(await run(false));

    const model = tinyLM(3);
    disposables.push(model);
    const file = path.join(scratch, "two-groups.pt");
    const two = new (addon().NativeOptimizer)([{ module: model.native }, { module: head(8) }], { lr: 1e-3 });
    await two.save(file);
    const one = new (addon().NativeOptimizer)(model.native, { lr: 1e-3 });
    await expect(one.load(file)).rejects.toThrow(`${file}: holds 2 parameter groups, this optimizer has 1`);
    const otherShape = new (addon().NativeOptimizer)([{ module: model.native }, { module: head(4) }], { lr: 1e-3 });
    await expect(otherShape.load(file)).rejects.toThrow(new RegExp(`${file}: group 1 parameter 0 has shape \\[8, 16\\] in the file, \\[4, 16\\]`));
    const missing = path.join(scratch, "absent.pt");
    await expect(one.load(missing)).rejects.toThrow(missing);
    [two, one, otherShape].forEach((o) => o.dispose());
  });

  it("refuses frozen, repeated or foreign modules, naming the group", () => {
    const model = tinyLM(4);
    disposables.push(model);
    const frozen = head();
    frozen.freeze();
    const Optimizer = addon().NativeOptimizer;
    expect(() => new Optimizer([{ module: model.native }, { module: frozen }], { lr: 1 })).toThrow("groups[1].module has no trainable parameters (it is frozen)");
    expect(() => new Optimizer([{ module: model.native }, { module: model.native }], { lr: 1 })).toThrow("groups[1].module is groups[0].module again");
    expect(() => new Optimizer([{ module: illTyped({}) }], { lr: 1 })).toThrow("groups[0].module must be a NativeModel or a NativeValueHead");
    expect(() => new Optimizer([], { lr: 1 })).toThrow("groups must not be empty");
    expect(() => new Optimizer(model.native, { lr: 1, betas: illTyped([0.9]) })).toThrow("betas must be [beta1, beta2]");
  });

  it("the Optimizer wrapper owns its native optimizer and disposes it", async () => {
    const model = tinyLM(5);
    disposables.push(model);
    const critic = ValueHead.create(model, { hiddenDim: 8, seed: 4 });
    disposables.push(critic);
    const optimizer = new Optimizer([{ module: model }, { module: critic, lr: 1e-2 }], { lr: 1e-3 });
    expect(optimizer.learningRates()).toEqual([1e-3, 1e-2]);
    await addon().valueLossBackward(model.native, critic.native, batch);
    const { gradNorm } = await optimizer.step({ maxGradNorm: 1 });
    expect(gradNorm).toBeGreaterThan(0);
    const file = path.join(scratch, "wrapper.pt");
    await optimizer.save(file);
    await optimizer.load(file);
    optimizer[Symbol.dispose]();
    await expect(optimizer.step()).rejects.toThrow(/disposed/);
  });
});
