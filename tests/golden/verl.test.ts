// MAPPO's math against verl 0.9.1's own PPO core (verl/trainer/ppo/core_algos.py; tests/golden/verl/ppo.json, made by
// scripts/reference/make_verl_goldens.py): GAE(λ) returns and advantages over ragged episodes, the clipped value loss
// through a real value head, and PPO's clipped-ratio policy loss with verl's dual clip through the native objective.
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CausalLM } from "../../src/models/causal-lm.js";
import { ValueHead } from "../../src/models/value-head.js";
import { addon } from "../../src/native/loader.js";
import { lambdaReturns } from "../../src/trainers/actor-critic/samples.js";
import { maxAbsDiff, norm } from "../support/safetensors.js";

interface Golden {
  gae: Array<{ gamma: number; lambda: number; episodes: Array<{ rewards: number[]; values: number[]; returns: number[]; advantages: number[] }> }>;
  valueLoss: Array<{ prediction: number; clipRange: number; returns: number[]; oldValues: number[]; loss: number; gradPrediction: number; clipFraction: number }>;
  policyLoss: Array<{
    lossAggMode: "token-mean" | "seq-mean-token-mean";
    clipRatioLow: number;
    clipRatioHigh: number;
    clipRatioC: number;
    rowLengths: number[];
    advantages: number[];
    logprobs: number[];
    oldLogprobs: number[];
    loss: number;
    gradLogprobs: number[];
    clipFraction: number;
  }>;
}

const golden = JSON.parse(readFileSync(path.resolve(__dirname, "verl", "ppo.json"), "utf8")) as Golden;
const MODEL = path.resolve(__dirname, "comlrl", "model");

// verl computes in fp32 tensors, we in doubles (GAE) or fp32 kernels with another summation order.
const RTOL = 1e-6;
const close = (ours: number, theirs: number, scale = 1) => expect(Math.abs(ours - theirs), `${ours} vs ${theirs}`).toBeLessThanOrEqual(RTOL * Math.max(scale, Math.abs(theirs)));

describe("GAE(λ) against verl's compute_gae_advantage_return", () => {
  for (const { gamma, lambda, episodes } of golden.gae) {
    it(`γ ${gamma}, λ ${lambda}: the returns, and the advantages before verl whitens them`, () => {
      for (const { rewards, values, returns, advantages } of episodes) {
        const ours = lambdaReturns(rewards, values, gamma, lambda);
        ours.forEach((g, t) => {
          close(g, returns[t]);
          close(g - values[t], advantages[t]);
        });
      }
    });
  }
});

describe("the clipped value loss against verl's compute_value_loss", () => {
  let model: CausalLM;
  beforeAll(async () => {
    model = await CausalLM.fromDirectory(MODEL, { dtype: "float32" });
  });
  afterAll(() => model?.dispose());

  // A head whose weight is zero reads its bias on every row: the prediction verl is given, with its gradient the bias's.
  for (const { prediction, clipRange, returns, oldValues, loss, gradPrediction } of golden.valueLoss) {
    it(`V ${prediction}, clip ${clipRange}: the loss and its gradient (verl halves the squared error; we do not)`, async () => {
      const head = ValueHead.create(model);
      try {
        const zeros = new Float32Array(model.config.hiddenSize);
        head.native.loadStateDict({
          weight: { dtype: "float32", shape: [1, zeros.length], data: new Uint8Array(zeros.buffer) },
          bias: { dtype: "float32", shape: [1], data: new Uint8Array(Float32Array.of(prediction).buffer) },
        });
        const prompts = returns.map((_, i) => [3 + i, 7, 11]);
        const result = await head.valueLossBackward(prompts, prompts.map(() => new Int32Array(0)), { readout: "v", targets: returns, oldValues, clipRange });
        expect(Array.from(result.values)).toEqual(returns.map(() => Math.fround(prediction)));
        close(result.loss / 2, loss);
        close(head.native.getGradient("bias")![0] / 2, gradPrediction, loss);
      } finally {
        head.dispose();
      }
    });
  }

  it("the goldens reach both sides of the clip", () => {
    expect(golden.valueLoss.some((g) => g.clipFraction > 0)).toBe(true);
    expect(golden.valueLoss.some((g) => g.clipFraction === 0)).toBe(true);
  });
});

describe("PPO's clipped ratio against verl's compute_policy_loss_vanilla", () => {
  // verl's dual clip at c caps −A·r at −A·c for A < 0: TRL's two-sided delta = c. Token-mean over the batch is bnpo;
  // the mean over rows of their token means is grpo.
  for (const g of golden.policyLoss) {
    it(`${g.lossAggMode}, ε ${g.clipRatioLow}/${g.clipRatioHigh}: loss, gradient and clip fraction`, async () => {
      const result = await addon().objectiveLoss({
        objective: { lossType: g.lossAggMode === "token-mean" ? "bnpo" : "grpo", epsilon: g.clipRatioLow, epsilonHigh: g.clipRatioHigh, delta: g.clipRatioC },
        logprobs: Float32Array.from(g.logprobs),
        oldLogprobs: Float32Array.from(g.oldLogprobs),
        rowLengths: Int32Array.from(g.rowLengths),
        advantages: Float32Array.from(g.advantages),
      });
      close(result.loss, g.loss);
      expect(maxAbsDiff(result.gradLogprobs, g.gradLogprobs) / norm(g.gradLogprobs)).toBeLessThanOrEqual(1e-6);
      // verl's pg_clipfrac counts tokens where the clipped term wins, on either side: our low and high clips together.
      close(result.clipLow + result.clipHigh, g.clipFraction);
    });
  }

  it("the goldens cap ratios above the dual clip (A < 0, r > c) and clip on both sides", () => {
    const ratios = golden.policyLoss[0].logprobs.map((lp, i) => Math.exp(lp - golden.policyLoss[0].oldLogprobs[i]));
    let offset = 0;
    const capped = golden.policyLoss[0].rowLengths.some((n, row) => {
      const hit = golden.policyLoss[0].advantages[row] < 0 && ratios.slice(offset, offset + n).some((r) => r > 3);
      offset += n;
      return hit;
    });
    expect(capped).toBe(true);
    expect(ratios.some((r) => r < 0.8) && ratios.some((r) => r > 1.28)).toBe(true);
  });
});
