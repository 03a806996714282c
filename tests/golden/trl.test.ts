// The clipped-ratio objectives against TRL 1.16's own GRPOTrainer._compute_loss (tests/golden/trl, made by
// scripts/reference/make_trl_goldens.py): on fixed per-token tensors for every loss type × importance-sampling level
// × case, the loss, its gradient with respect to the log-probs (and entropies) and the metrics TRL logs; and one whole
// loss of a tiny Qwen2 through the model, with every parameter's gradient.
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CausalLM } from "../../src/models/causal-lm.js";
import { addon } from "../../src/native/loader.js";
import type { NativeObjectiveOptions } from "../../src/native/binding.js";
import { maxAbsDiff, norm, readSafetensors } from "../support/safetensors.js";

const DIR = path.resolve(__dirname, "trl");
const MODEL = path.resolve(__dirname, "comlrl", "model");

interface TensorGolden {
  name: string;
  options: NativeObjectiveOptions;
  inputs: {
    rowLengths: number[];
    logprobs: number[];
    oldLogprobs: number[] | null;
    refLogprobs: number[] | null;
    entropies: number[];
    tokenMask: number[];
    advantages: number[];
  };
  expected: { loss: number; gradLogprobs: number[]; gradEntropies: number[] | null; metrics: Record<string, number> };
}

const tensors = JSON.parse(readFileSync(path.join(DIR, "tensors.json"), "utf8")) as { goldens: TensorGolden[] };
const modelSteps = JSON.parse(readFileSync(path.join(DIR, "model_step.json"), "utf8")) as {
  steps: Array<{
    name: string;
    options: NativeObjectiveOptions;
    prompts: number[][];
    completions: number[][];
    oldLogprobs: number[];
    refLogprobs: number[];
    advantages: number[];
    tokenLogprobs: number[];
    loss: number;
  }>;
};
const modelGrads = readSafetensors(path.join(DIR, "model_step.safetensors"));

// Tolerances. On the same fp32 tensors only the order of the sums differs: 1e-6 relative on the loss, 1e-5 of the
// gradient's norm per element. Where the loss is a small difference of terms of the advantages' size (sapo's terms
// are ≈ 2·A each), fp32 rounding is relative to those terms: the loss's scale is then the mean |A|. Through the model our forward and transformers' differ by ≈ 1e-6 in log-probs (the
// model goldens' scale), so the whole step keeps the model goldens' 1e-4 of each gradient's norm.
const LOSS_RTOL = 1e-6;
const GRAD_RTOL = 1e-5;
const MODEL_LOSS_RTOL = 1e-5;
const MODEL_GRAD_RTOL = 1e-4;

const f32 = (values: readonly number[] | null) => (values === null ? undefined : Float32Array.from(values));
const relative = (ours: number, theirs: number) => Math.abs(ours - theirs) / Math.max(Math.abs(theirs), 1e-12);

// TRL's metric names and ours.
const METRICS: Array<[string, "clipLow" | "clipHigh" | "klMean" | "entropyMean" | "policyLoss"]> = [
  ["clip_ratio/low_mean", "clipLow"],
  ["clip_ratio/high_mean", "clipHigh"],
  ["cispo_clip_ratio", "clipHigh"],
  ["kl", "klMean"],
  ["entropy", "entropyMean"],
  ["policy_loss", "policyLoss"],
];

describe("objectives against TRL's GRPOTrainer loss", () => {
  const errors: Record<string, { loss: number; grad: number }> = {};

  it("has a golden for every loss type and level", () => {
    const names = new Set(tensors.goldens.map((g) => g.name.split("/").slice(0, 2).join("/")));
    for (const loss of ["grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo"]) for (const level of ["token", "sequence"]) expect(names.has(`${loss}/${level}`)).toBe(true);
  });

  for (const golden of tensors.goldens) {
    it(`${golden.name}: loss, gradients and metrics`, async () => {
      const { inputs, expected } = golden;
      const result = await addon().objectiveLoss({
        objective: golden.options,
        logprobs: Float32Array.from(inputs.logprobs),
        rowLengths: Int32Array.from(inputs.rowLengths),
        advantages: Float32Array.from(inputs.advantages),
        oldLogprobs: f32(inputs.oldLogprobs),
        refLogprobs: f32(inputs.refLogprobs),
        entropies: golden.options.entropyCoef ? Float32Array.from(inputs.entropies) : undefined,
        tokenMask: Float32Array.from(inputs.tokenMask),
      });
      const termScale = inputs.advantages.reduce((a, x) => a + Math.abs(x), 0) / inputs.advantages.length;
      const lossError = Math.abs(result.loss - expected.loss) / Math.max(Math.abs(expected.loss), termScale);
      const gradError = maxAbsDiff(result.gradLogprobs, expected.gradLogprobs) / Math.max(norm(expected.gradLogprobs), 1e-12);
      errors[golden.name] = { loss: lossError, grad: gradError };
      expect(lossError, `loss ${result.loss} vs ${expected.loss}`).toBeLessThanOrEqual(LOSS_RTOL);
      expect(gradError).toBeLessThanOrEqual(GRAD_RTOL);
      if (expected.gradEntropies) {
        expect(result.gradEntropies).toBeDefined();
        expect(maxAbsDiff(result.gradEntropies!, expected.gradEntropies) / norm(expected.gradEntropies)).toBeLessThanOrEqual(GRAD_RTOL);
      }
      for (const [theirs, ours] of METRICS) {
        if (!(theirs in expected.metrics)) continue;
        if (theirs === "entropy" && !golden.options.entropyCoef) continue; // TRL logs it always; we see entropies only with the bonus
        expect(Math.abs(result[ours] - expected.metrics[theirs]), `${theirs}: ${result[ours]} vs ${expected.metrics[theirs]}`).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(expected.metrics[theirs])));
      }
    });
  }

  afterAll(() => {
    if (process.env.COMLRL_TRL_GOLDEN_REPORT) console.log(JSON.stringify(errors, null, 1));
  });
});

describe("a whole objective step of a tiny Qwen2 against TRL", () => {
  let model: CausalLM;
  beforeAll(async () => {
    model = await CausalLM.fromDirectory(MODEL, { dtype: "float32" });
  });
  afterAll(() => model?.dispose());

  for (const step of modelSteps.steps) {
    it(`${step.name}: loss and every parameter's gradient`, async () => {
      await model.zeroGrad();
      const prompts = step.completions.map((_, i) => step.prompts[i]);
      const lengths = step.completions.map((c) => c.length);
      const flatten = (rows: number[][]) => Int32Array.from(rows.flat());
      const result = await addon().objectiveBackward(model.native, {
        prompts: flatten(prompts),
        promptLengths: Int32Array.from(prompts.map((p) => p.length)),
        completions: flatten(step.completions),
        completionLengths: Int32Array.from(lengths),
        advantages: Float32Array.from(step.advantages),
        oldLogprobs: Float32Array.from(step.oldLogprobs),
        refLogprobs: Float32Array.from(step.refLogprobs),
        objective: step.options,
      });
      expect(maxAbsDiff(result.tokenLogprobs, step.tokenLogprobs)).toBeLessThan(1e-5);
      expect(relative(result.loss, step.loss), `loss ${result.loss} vs ${step.loss}`).toBeLessThanOrEqual(MODEL_LOSS_RTOL);
      let checked = 0;
      for (const { name } of model.native.parameterNames()) {
        const expected = modelGrads.get(`grad.${step.name.replace("/", ".")}.${name}`);
        if (!expected) continue; // lm_head.weight of a tied model: the embedding's tensor
        const ours = model.native.getGradient(name)!;
        expect(maxAbsDiff(ours, expected.data) / Math.max(norm(expected.data), 1e-12), name).toBeLessThanOrEqual(MODEL_GRAD_RTOL);
        checked++;
      }
      expect(checked).toBeGreaterThan(5);
    });
  }
});
