// The one policy loss over rows (src/trainers/policy-loss.ts) on a tiny model made here, against losses worked out by
// hand from the model's own token log-probs: CoMLRL's loss weighs a row A / (|group| · groups) (an empty row counts
// in its group, unscored) with the gradient of that weighted sum; TRL's grpo and dapo at ratio 1 and with recorded
// old log-probs that push every ratio past the clip; masked truncated rows; and the agreement metrics.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { iacConfig, type IACConfigInput } from "../../src/config/index.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { Optimizer } from "../../src/models/optimizer.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { Agent } from "../../src/trainers/agents.js";
import { PolicyLoss, type PolicyRow } from "../../src/trainers/policy-loss.js";

const PARAMETER = "model.layers.0.mlp.up_proj.weight";
let model: CausalLM;
let agent: Agent;
const prompts = [[5, 6, 7], [8, 9]];
const completions = [Int32Array.from([11, 12, 13]), Int32Array.from([14, 15]), Int32Array.from([16, 17, 18, 19])];
// Each row's Σ_t log π and per-token log-probs under the model, without gradients.
let sums: number[];
let tokenLogprobs: Float32Array[];

beforeAll(async () => {
  const dir = path.join(mkdtempSync(path.join(tmpdir(), "comlrl-policy-loss-")), "model");
  const tokenizer = await createTinyModel(dir, { seed: 5, hiddenSize: 32, numLayers: 1 });
  model = await CausalLM.fromDirectory(dir);
  const sampling = { maxNewTokens: 4, temperature: 1, topP: 1, topK: null, repetitionPenalty: null, maxPromptTokens: null, promptOverflow: "error" as const };
  agent = new Agent(0, model, tokenizer, new Optimizer(model, { lr: 1e-3 }), sampling, null);
  const rowPrompts = [prompts[0], prompts[0], prompts[1]];
  const scores = await model.score(rowPrompts, completions, { tokenLogprobs: true });
  sums = Array.from(scores.sum);
  let offset = 0;
  tokenLogprobs = completions.map((ids) => scores.tokenLogprobs!.slice(offset, (offset += ids.length)));
}, 60_000);

afterAll(() => model.dispose());

/** The objectives of a one-agent actor-critic config with these fields. */
const lossWith = (fields: IACConfigInput) => new PolicyLoss({ ...iacConfig({ numAgents: 1, maxNewTokens: 4, ...fields }) });

async function gradientOf(run: () => Promise<unknown>): Promise<{ result: unknown; gradient: Float32Array }> {
  await model.zeroGrad();
  const result = await run();
  const gradient = Float32Array.from(model.native.getGradient(PARAMETER) ?? []);
  await model.zeroGrad();
  return { result, gradient };
}

const rowsWith = (advantages: number[], groups: number[], sampled?: (i: number) => PolicyRow["sampled"]): PolicyRow[] =>
  completions.map((completion, i) => ({ prompt: i < 2 ? prompts[0] : prompts[1], completion, advantage: advantages[i], group: groups[i], ...(sampled ? { sampled: sampled(i) } : {}) }));

describe("lossType comlrl: CoMLRL's weighting over groups", () => {
  it("weighs a row A / (|group| · groups): the loss −Σ w · Σ log π, and the gradient of policyGradientBackward with those weights", async () => {
    const loss = lossWith({});
    const empty: PolicyRow = { prompt: prompts[1], completion: new Int32Array(0), advantage: 5, group: 1 };
    // Groups {row 0, row 1} and {row 2, an empty row}: two groups of two.
    const rows = [...rowsWith([1, -0.5, 2], [0, 0, 1]), empty];
    const weights = [1 / 4, -0.5 / 4, 2 / 4];
    const ours = await gradientOf(() => loss.backward(agent, rows, 0));
    const expected = -weights.reduce((s, w, i) => s + w * sums[i], 0);
    expect((ours.result as { loss: number }).loss).toBeCloseTo(expected, 5);
    expect((ours.result as { metrics: object }).metrics).toEqual({});
    const direct = await gradientOf(() => model.policyGradientBackward([prompts[0], prompts[0], prompts[1]], completions, weights, 1));
    expect(ours.gradient).toEqual(direct.gradient);
    expect(ours.gradient.some((g) => g !== 0)).toBe(true);
  });

  it("has nothing to score in rows without tokens: loss 0, no gradient", async () => {
    const { result, gradient } = await gradientOf(() => lossWith({}).backward(agent, [{ prompt: prompts[0], completion: new Int32Array(0), advantage: 1, group: 0 }], 0));
    expect(result).toEqual({ loss: 0, metrics: {} });
    expect(gradient.every((g) => g === 0)).toBe(true); // none at all, or zeros
  });
});

describe("clipped-ratio losses over rows (TRL's, by hand)", () => {
  const advantages = [1, -0.5, 2];
  const lengths = completions.map((c) => c.length);

  it("grpo at ratio 1 (one pass: the old log-probs are the current ones): −mean over rows of A", async () => {
    const result = await lossWith({ lossType: "grpo" }).backward(agent, rowsWith(advantages, [0, 1, 2]), 0);
    expect(result.loss).toBeCloseTo(-(1 - 0.5 + 2) / 3, 5);
    expect(result.metrics["objective/ratio_mean"]).toBeCloseTo(1, 6);
    expect(result.metrics["objective/clip_ratio/high_mean"]).toBe(0);
  });

  it("dapo at ratio 1: −Σ_rows |o| · A over every token", async () => {
    const result = await lossWith({ lossType: "dapo" }).backward(agent, rowsWith(advantages, [0, 1, 2]), 0);
    const tokens = lengths.reduce((a, b) => a + b, 0);
    expect(result.loss).toBeCloseTo(-advantages.reduce((s, a, i) => s + a * lengths[i], 0) / tokens, 5);
  });

  it("grpo with recorded old log-probs 0.5 below the current ones (ratio e^0.5 > 1 + ε): A > 0 clipped to (1 + ε) · A, A < 0 kept at e^0.5 · A", async () => {
    const epsilon = 0.2;
    const sampled = (i: number) => ({ logprobs: tokenLogprobs[i].map((lp) => lp - 0.5), policySteps: 0 });
    const result = await lossWith({ lossType: "grpo", numIterations: 2, epsilon }).backward(agent, rowsWith(advantages, [0, 1, 2], sampled), 1);
    const perRow = advantages.map((a) => -(a > 0 ? (1 + epsilon) * a : Math.exp(0.5) * a));
    expect(result.loss).toBeCloseTo(perRow.reduce((s, l) => s + l, 0) / 3, 4);
    // The rows with A > 0 hold 3 + 4 of the 9 tokens, all clipped high.
    expect(result.metrics["objective/clip_ratio/high_mean"]).toBeCloseTo(7 / 9, 5);
    // Sampled before the policy's last step: the figures are the drift, each token 0.5 away.
    expect(result.metrics["drift/mean_abs_logp_diff"]).toBeCloseTo(0.5, 4);
    expect(result.metrics["mismatch/mean_abs_logp_diff"]).toBeUndefined();
  });

  it("measures the sampler/trainer mismatch while the policy has not stepped since sampling", async () => {
    const sampled = (i: number) => ({ logprobs: tokenLogprobs[i], policySteps: 3 });
    const result = await lossWith({ lossType: "dapo", numIterations: 2 }).backward(agent, rowsWith(advantages, [0, 1, 2], sampled), 3);
    expect(result.metrics["mismatch/mean_abs_logp_diff"]).toBeLessThanOrEqual(1e-6);
    expect(result.metrics["mismatch/mean_sequence_ratio"]).toBeCloseTo(1, 5);
  });

  it("masks truncated rows (maxNewTokens reached, no EOS): only the others carry loss", async () => {
    // maxNewTokens 4: the 4-token row is truncated; grpo's mean over rows still counts it, with no loss (TRL's).
    const masked = await lossWith({ lossType: "grpo", maskTruncatedCompletions: true }).backward(agent, rowsWith(advantages, [0, 1, 2]), 0);
    expect(masked.loss).toBeCloseTo(-(1 - 0.5 + 0) / 3, 5);
  });

  it("refuses passes over a rollout without the sampler's log-probs", async () => {
    await expect(lossWith({ lossType: "grpo", numIterations: 2 }).backward(agent, rowsWith(advantages, [0, 1, 2]), 0)).rejects.toThrow(/numIterations 2 needs the rollout's log-probs/);
  });
});
