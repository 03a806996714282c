// CPU agent lanes (native/bridge, native/runtime/compute_lanes.cc): a model's calls move to "cpu#k" and back, run
// beside the "cpu" lane's work instead of queueing behind it, and give the numbers the device lane gives (one
// intra-op thread there, as the test workers run).
import { describe, expect, it } from "vitest";
import { Optimizer } from "../../src/models/optimizer.js";
import { ValueHead } from "../../src/models/value-head.js";
import { addon } from "../../src/native/loader.js";
import { tinyLM } from "./tiny-lm.js";
import { illTyped } from "../support/ill-typed.js";

const PROMPTS = [[1, 2, 3], [4, 5]];
const COMPLETIONS = [Int32Array.from([6, 7]), Int32Array.from([8])];

describe("compute lanes", () => {
  it("moves a model's calls to an agent lane and back; a head, too; bad lanes are refused by name", () => {
    const model = tinyLM(3);
    const head = ValueHead.create(model, { hiddenDim: null, seed: 1 });
    expect(addon().computeLane(model.native)).toBe("cpu");
    addon().setComputeLane(model.native, 1);
    addon().setComputeLane(head.native, 0);
    expect(addon().computeLane(model.native)).toBe("cpu#1");
    expect(addon().computeLane(head.native)).toBe("cpu#0");
    addon().setComputeLane(model.native, null);
    expect(addon().computeLane(model.native)).toBe("cpu");
    for (const lane of [-1, 1.5, 1024, "1"]) {
      expect(() => addon().setComputeLane(model.native, illTyped(lane))).toThrow(/lane must be an integer from 0 to 1023 or null/);
    }
    expect(() => addon().setComputeLane(illTyped({}), 0)).toThrow(/setComputeLane\(module, lane\): module must be a NativeModel or a NativeValueHead/);
    head.dispose();
    model.dispose();
    expect(() => addon().computeLane(model.native)).toThrow(/disposed/);
  });

  it("runs an agent lane's call while the cpu lane is busy, where the cpu lane would queue it", async () => {
    const model = tinyLM(4);
    const order = async () => {
      const events: string[] = [];
      const n = 384;
      const m = new Float32Array(n * n).fill(0.001);
      const busy = addon().matmulAsync(m, [n, n], m, [n, n], 60).then(() => events.push("matmul"));
      const small = model.score(PROMPTS, COMPLETIONS).then(() => events.push("score"));
      await Promise.all([busy, small]);
      return events;
    };
    expect(await order()).toEqual(["matmul", "score"]);
    addon().setComputeLane(model.native, 0);
    expect(await order()).toEqual(["score", "matmul"]);
    model.dispose();
  });

  it("gives the device lane's scores, gradients and optimizer steps (the optimizer follows its first module)", async () => {
    const run = async (lane: number | null) => {
      const model = tinyLM(5);
      const head = ValueHead.create(model, { hiddenDim: 4, seed: 2 });
      addon().setComputeLane(model.native, illTyped(lane));
      const optimizer = new Optimizer([{ module: model }, { module: head }], { lr: 1e-2 });
      const scores = await model.score(PROMPTS, COMPLETIONS);
      await model.policyGradientBackward(PROMPTS, COMPLETIONS, [0.5, -1]);
      const { gradNorm } = await optimizer.step({ maxGradNorm: 1 });
      const values = await head.readout(PROMPTS, COMPLETIONS, "q");
      const weights = model.native.parameterNames().map(({ name }) => Array.from(model.native.getParameter(name)));
      optimizer.dispose();
      head.dispose();
      model.dispose();
      return { sum: Array.from(scores.sum), gradNorm, values: Array.from(values), weights };
    };
    expect(await run(1)).toEqual(await run(null));
  });
});
