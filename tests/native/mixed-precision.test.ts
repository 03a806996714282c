// precision "bf16-mixed": a bf16 model whose optimizer steps float32 master weights with float32 moments and copies
// them back rounded, against the float32 update from the same weights and against pure-bf16 AdamW (CoMLRL's), at the
// default learning rate 5e-6; the bytes per parameter each holds; an exact resume of the masters through save/load;
// the refusals of a load; and the one-time warning of pure bf16.
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CausalLM } from "../../src/models/causal-lm.js";
import { buildConfigJson } from "../../src/models/config.js";
import { Optimizer } from "../../src/models/optimizer.js";
import { TINY_SHAPE } from "./tiny-lm.js";
import { illTyped } from "../support/ill-typed.js";

const CONFIG = buildConfigJson("qwen2", { ...TINY_SHAPE, numLayers: 2 }, { bosTokenId: null, eosTokenId: 63 });
const PROMPTS = [[3, 4, 5], [9, 10]];
const COMPLETIONS = [[6, 7, 8], [11, 12, 13, 14]];
const LR = 5e-6;

const disposables: Array<{ dispose(): void }> = [];
afterAll(() => disposables.forEach((d) => d.dispose()));

function keep<T extends { dispose(): void }>(value: T): T {
  disposables.push(value);
  return value;
}

async function train(model: CausalLM, optimizer: Optimizer, steps: number): Promise<void> {
  for (let i = 0; i < steps; i++) {
    await model.zeroGrad();
    await model.policyGradientBackward(PROMPTS, COMPLETIONS, [1, -0.5]);
    await optimizer.step();
  }
}

const weights = (model: CausalLM) => model.native.parameterNames().map(({ name }) => model.native.getParameter(name));

// float32 → bfloat16 → float32, rounding to nearest even (as torch's conversion).
function roundToBf16(values: Float32Array): Float32Array {
  const bits = new Uint32Array(Float32Array.from(values).buffer);
  for (let i = 0; i < bits.length; i++) bits[i] = ((bits[i] + 0x7fff + ((bits[i] >>> 16) & 1)) & 0xffff0000) >>> 0;
  return new Float32Array(bits.buffer);
}

// Over every element of every tensor: the share where a and b are equal.
function shareEqual(a: Float32Array[], b: Float32Array[]): number {
  let equal = 0;
  let total = 0;
  a.forEach((tensor, t) => tensor.forEach((x, i) => ((equal += x === b[t][i] ? 1 : 0), total++)));
  return equal / total;
}

// Mean |a − b| over every element.
function meanDistance(a: Float32Array[], b: Float32Array[]): number {
  let sum = 0;
  let total = 0;
  a.forEach((tensor, t) => tensor.forEach((x, i) => ((sum += Math.abs(x - b[t][i])), total++)));
  return sum / total;
}

/** A bf16 model whose weights are those of a float32 one with LLM-sized init (std 0.02), rounded. */
async function bf16Start(): Promise<CausalLM> {
  const fp32 = CausalLM.create(CONFIG, { seed: 3, initStd: 0.02 });
  try {
    return keep(await fp32.clone({ dtype: "bfloat16" }));
  } finally {
    fp32.dispose();
  }
}

/** A bf16-mixed model and optimizer after `steps` steps, the optimizer's state saved to `file` in `scratch`. */
async function savedAfter(steps: number) {
  const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-mixed-"));
  const model = await bf16Start();
  const optimizer = keep(new Optimizer(model, { lr: LR, precision: "bf16-mixed" }));
  await train(model, optimizer, steps);
  const file = path.join(scratch, "adamw.pt");
  await optimizer.save(file);
  return { model, optimizer, scratch, file };
}

describe('precision "bf16-mixed"', () => {
  it("at lr 5e-6 moves the weights as the float32 update does, within bf16 rounding of the result; pure bf16 leaves them", async () => {
    const start = await bf16Start();
    const initial = weights(start);
    const runs: Record<string, CausalLM> = {};
    for (const [name, dtype, precision] of [["fp32", "float32", "auto"], ["bf16-mixed", "bfloat16", "bf16-mixed"], ["pure-bf16", "bfloat16", "pure-bf16"]] as const) {
      const model = keep(await start.clone({ dtype }));
      const optimizer = keep(new Optimizer(model, { lr: LR, precision }));
      expect(optimizer.precision).toBe(name);
      await train(model, optimizer, 40);
      runs[name] = model;
    }
    const fp32 = weights(runs.fp32);
    const fp32Rounded = fp32.map(roundToBf16);
    const mixed = weights(runs["bf16-mixed"]);
    const pure = weights(runs["pure-bf16"]);
    const moved = { fp32: 1 - shareEqual(fp32Rounded, initial), mixed: 1 - shareEqual(mixed, initial), pure: 1 - shareEqual(pure, initial) };
    const displacement = { fp32: meanDistance(fp32, initial), mixed: meanDistance(mixed, initial), pure: meanDistance(pure, initial) };
    const agreement = { mixed: shareEqual(mixed, fp32Rounded), pure: shareEqual(pure, fp32Rounded) };
    console.log(`40 steps at lr ${LR}: share of bf16 weights moved ${JSON.stringify(moved)}; mean |Δw| ${JSON.stringify(displacement)}; share equal to the float32 result rounded ${JSON.stringify(agreement)}`);
    // Rounding the float32 result moves most weights (86% measured); bf16-mixed moves as many, by the same amounts,
    // and differs from the rounded float32 result (3% measured) only where the bf16 forward's gradients part from the
    // float32 ones next to a rounding boundary. Pure bf16 moves 8% and matches the float32 result on 14%.
    expect(moved.fp32).toBeGreaterThan(0.1);
    expect(Math.abs(moved.mixed - moved.fp32)).toBeLessThan(0.1 * moved.fp32);
    expect(Math.abs(displacement.mixed - displacement.fp32)).toBeLessThan(0.1 * displacement.fp32);
    expect(agreement.mixed).toBeGreaterThan(0.95);
    // Pure bf16 moves only the weights smaller than ~256 · lr, where a step of lr is over half an ulp.
    expect(moved.pure).toBeLessThan(0.25 * moved.fp32);
    expect(agreement.pure).toBeLessThan(agreement.mixed - 0.5 * moved.fp32);
  });

  it("holds 2 + 4 + 8 bytes per parameter, and a 2-byte gradient; pure bf16 2 + 4 and 2; float32 4 + 8 and 4", async () => {
    const start = await bf16Start();
    const held: Record<string, ReturnType<Optimizer["memory"]>> = {};
    for (const [dtype, precision] of [["float32", "auto"], ["bfloat16", "bf16-mixed"], ["bfloat16", "pure-bf16"]] as const) {
      const model = keep(await start.clone({ dtype }));
      const optimizer = keep(new Optimizer(model, { lr: LR, precision }));
      expect(optimizer.memory().masterBytes).toBe(0);
      await train(model, optimizer, 1);
      held[optimizer.precision] = optimizer.memory();
    }
    console.log(`bytes per parameter (weight + master + moments; gradient): ${JSON.stringify(Object.fromEntries(Object.entries(held).map(([k, m]) => [k, [m.bytesPerParameter, m.gradientBytesPerParameter]])))}`);
    const parameters = held.fp32.parameters;
    expect(held["bf16-mixed"]).toEqual({ parameters, weightBytes: 2 * parameters, masterBytes: 4 * parameters, momentBytes: 8 * parameters, gradientBytes: 2 * parameters, bytesPerParameter: 14, gradientBytesPerParameter: 2 });
    expect(held["pure-bf16"]).toMatchObject({ masterBytes: 0, momentBytes: 4 * parameters, bytesPerParameter: 6, gradientBytesPerParameter: 2 });
    expect(held.fp32).toMatchObject({ masterBytes: 0, momentBytes: 8 * parameters, bytesPerParameter: 12, gradientBytesPerParameter: 4 });
  });

  it("resumes exactly: the master weights save and load with the optimizer's state", async () => {
    const { model, optimizer, scratch, file } = await savedAfter(5);
    const snapshot = keep(await model.clone());
    const saved = path.join(scratch, "weights");
    await snapshot.save(saved);
    await train(model, optimizer, 5);

    const resumed = keep(new Optimizer(snapshot, { lr: LR, precision: "bf16-mixed" }));
    await resumed.load(file);
    await train(snapshot, resumed, 5);
    expect(weights(snapshot)).toEqual(weights(model));

    // The weights written again after the load: the masters are taken again from the rounded weights (what a resume
    // without them would do), and the run parts from the one that kept them.
    const rewritten = keep(await CausalLM.fromDirectory(saved, { dtype: "bfloat16" }));
    const lost = keep(new Optimizer(rewritten, { lr: LR, precision: "bf16-mixed" }));
    await lost.load(file);
    await rewritten.loadWeights(saved);
    await train(rewritten, lost, 5);
    expect(weights(rewritten)).not.toEqual(weights(model));
  });

  it("refuses a load into an optimizer without masters, or beside other weights than the masters round to", async () => {
    const { model, file } = await savedAfter(2);
    const pure = keep(new Optimizer(model, { lr: LR, precision: "pure-bf16" }));
    await expect(pure.load(file)).rejects.toThrow(/adamw\.pt: holds float32 master weights \(saved with precision "bf16-mixed"\); this optimizer keeps none/);
    const other = keep(await bf16Start());
    const elsewhere = keep(new Optimizer(other, { lr: LR, precision: "bf16-mixed" }));
    await expect(elsewhere.load(file)).rejects.toThrow(/adamw\.pt: master weight 0 does not round to its parameter: load the model weights saved with this optimizer state first/);
  });

  it("auto is pure bf16 on a CPU, bf16-mixed asked for by name; float32 models step in float32 whatever is asked", async () => {
    const start = await bf16Start();
    expect(keep(new Optimizer(start, { lr: LR })).precision).toBe("pure-bf16");
    expect(keep(new Optimizer(start, { lr: LR, precision: "bf16-mixed" })).precision).toBe("bf16-mixed");
    const fp32 = keep(await start.clone({ dtype: "float32" }));
    expect(keep(new Optimizer(fp32, { lr: LR, precision: "bf16-mixed" })).precision).toBe("fp32");
    expect(keep(new Optimizer(fp32, { lr: LR, precision: "pure-bf16" })).precision).toBe("fp32");
    expect(() => new Optimizer([{ module: illTyped({}) }], { lr: LR })).toThrow("groups[0].module must be a NativeModel or a NativeValueHead");
  });

  // In a fresh process: the warning is once per process, and the tests above already met it here.
  it("pure bf16 warns once per process when a step of the learning rate cannot move most weights; bf16-mixed never", () => {
    const module = (file: string) => JSON.stringify(path.resolve(__dirname, file));
    const script = `
      const { CausalLM } = await import(${module("../../src/models/causal-lm.ts")});
      const { Optimizer } = await import(${module("../../src/models/optimizer.ts")});
      const warnings = [];
      process.on("warning", (w) => warnings.push({ code: w.code, message: w.message }));
      const fp32 = CausalLM.create(${JSON.stringify(CONFIG)}, { seed: 3, initStd: 0.02 });
      const start = await fp32.clone({ dtype: "bfloat16" });
      const stepOnce = async (lr, precision) => {
        const model = await start.clone();
        const optimizer = new Optimizer(model, { lr, precision });
        await model.policyGradientBackward(${JSON.stringify(PROMPTS)}, ${JSON.stringify(COMPLETIONS)}, [1, -0.5]);
        await optimizer.step();
        await new Promise((resolve) => setImmediate(resolve));
        return warnings.length;
      };
      const counts = [await stepOnce(${LR}, "bf16-mixed"), await stepOnce(1e-2, "pure-bf16"), await stepOnce(${LR}, "pure-bf16"), await stepOnce(${LR}, "pure-bf16")];
      console.log(JSON.stringify({ counts, warnings }));
    `;
    const run = spawnSync(process.execPath, ["--import", "tsx", "-e", script], { encoding: "utf8", env: { ...process.env, COMLRL_NUM_THREADS: "1" } });
    expect(run.status, run.stderr).toBe(0);
    const { counts, warnings } = JSON.parse(run.stdout.trim().split("\n").at(-1)!);
    expect(counts).toEqual([0, 0, 1, 1]);
    expect(warnings[0].code).toBe("COMLRL_PURE_BF16_STALL");
    expect(warnings[0].message).toMatch(/precision "pure-bf16": a step of the learning rate \(0\.000005\) is under half a bf16 ulp for \d+\.\d% of the weights/);
  });
});
