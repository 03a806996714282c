// MADPO's DPO step and MARLHF's reward-model step against the real CoMLRL 1.4.3 (tests/golden/comlrl, made by
// scripts/reference/make_comlrl_goldens.py from its _update_from_preference_batch and _train_reward_model).
//
// Token accounting: CoMLRL's MADPO log-prob cuts a row at its first pad (EOS, as pad == eos) and then, feeding
// row[:-1], drops its last token as well; ours scores the completion's own ids up to and including EOS. Replaying the
// tokens CoMLRL scores (`scoredWinners`, `scoredLosers`) reproduces its step, so the difference is exactly those tokens.
import { describe, expect, it } from "vitest";
import { Optimizer } from "../../src/models/optimizer.js";
import type { PreferencePair } from "../../src/trainers/preference/pairs.js";
import { MADPOTrainer } from "../../src/trainers/preference/madpo.js";
import { comlrlRewardHeadInit, JointRewardModel, jointText } from "../../src/trainers/preference/reward-model.js";
import { COMLRL_MODEL, expectClose, golden, goldenStateDict, LOSS_RTOL, maxParamDiff, PARAM_ATOL, scratch } from "./comlrl-golden.js";

describe("CoMLRL 1.4.3 parity: MADPO", () => {
  const ref = golden.madpo;
  it("the joint DPO loss, each agent's gradient norm and agent 0's parameters after one step", async () => {
    const trainer = await MADPOTrainer.create({
      agents: [COMLRL_MODEL, COMLRL_MODEL], numAgents: 2, rewardFunc: () => [0], trainDataset: [{ prompt: "x" }], quiet: true, outputDir: scratch(),
      config: { numAgents: 2 },
    });
    try {
      expect(trainer.config.dpoBeta).toBe(ref.config.dpoBeta);
      const batch: PreferencePair[] = ref.prompts.map((promptIds: number[][], p: number) => ({
        itemIndex: p, prompts: ["", ""], promptIds,
        winnerIds: ref.scoredWinners[p].map((ids: number[]) => Int32Array.from(ids)),
        loserIds: ref.scoredLosers[p].map((ids: number[]) => Int32Array.from(ids)),
        winnerTexts: ["", ""], loserTexts: ["", ""], winnerReward: 1, loserReward: 0, candidateRewardMean: 0.5,
      }));
      const metrics = await trainer.update(batch);
      ref.agentLosses.forEach((loss: number) => expectClose(metrics.loss, loss, LOSS_RTOL, "DPO loss"));
      metrics.gradNorms.forEach((n, i) => expectClose(n, ref.gradNorms[i], LOSS_RTOL, `agent ${i} gradient norm`));
      const model = trainer.agents[0].model.native;
      expect(maxParamDiff((p) => model.getParameter(p), "madpo.after.0").diff).toBeLessThanOrEqual(PARAM_ATOL);
    } finally {
      await trainer.close();
    }
  });
});

describe("CoMLRL 1.4.3 parity: MARLHF's reward model", () => {
  const ref = golden.reward_model;
  it("joint texts, their token ids, the Bradley–Terry loss and the parameters after one step from CoMLRL's head", async () => {
    const rm = await JointRewardModel.load(COMLRL_MODEL);
    const optimizer = new Optimizer([{ module: rm.model }, { module: rm.head }], { lr: ref.config.rewardLearningRate });
    try {
      // CoMLRL's JointRewardModel names its Linear(H, 1) reward_head; ours is a linear value head.
      const init = goldenStateDict("reward_model.head_init");
      rm.head.loadStateDict({ "value_projection.weight": init.weight, "value_projection.bias": init.bias });
      // The joint texts are CoMLRL's _format_joint_text, and tokenise to the same ids.
      const winners = ref.pairs.map((p: any) => jointText(p.prompts, p.winner));
      const losers = ref.pairs.map((p: any) => jointText(p.prompts, p.loser));
      expect({ winners, losers }).toEqual(ref.texts);
      expect({ winners: winners.map((t: string) => rm.tokenizer.encode(t)), losers: losers.map((t: string) => rm.tokenizer.encode(t)) }).toEqual(ref.ids);
      await rm.zeroGrad();
      const { loss } = await rm.bradleyTerryBackward(winners, losers);
      expectClose(loss, ref.loss, LOSS_RTOL, "Bradley–Terry loss");
      expectClose((await optimizer.step()).gradNorm, ref.gradNorm, LOSS_RTOL, "gradient norm");
      expect(maxParamDiff((p) => rm.model.native.getParameter(p), "reward_model.after").diff).toBeLessThanOrEqual(PARAM_ATOL);
      const after = goldenStateDict("reward_model.head_after");
      const head = rm.head.stateDict();
      const floats = (t: { data: Uint8Array }) => new Float32Array(Uint8Array.from(t.data).buffer);
      floats(head["value_projection.weight"]).forEach((v, i) => expect(Math.abs(v - floats(after.weight)[i]), "head weight").toBeLessThanOrEqual(PARAM_ATOL));
      // The bias's gradient vanishes analytically (it cancels in s_w − s_l); AdamW scales whatever rounding leaves of
      // it to a step of up to lr on either side, so the bias is only held within one step of CoMLRL's.
      expect(Math.abs(floats(head["value_projection.bias"])[0] - floats(after.bias)[0])).toBeLessThanOrEqual(ref.config.rewardLearningRate * 1.01);
    } finally {
      optimizer.dispose();
      rm.dispose();
    }
  });
});

describe("CoMLRL 1.4.3 parity: MARLHF's reward-head initialisation", () => {
  const ref = golden.reward_head_init;
  const floats = (t: { data: Uint8Array }) => Array.from(new Float32Array(Uint8Array.from(t.data).buffer));
  const stats = (xs: number[]) => {
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
    return { mean, std: Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (xs.length - 1)), maxAbs: Math.max(...xs.map(Math.abs)) };
  };

  it("weight and bias from U(−1/√H, 1/√H), as CoMLRL's nn.Linear(H, 1): statistics over 16 heads of H = 4096 on both sides", () => {
    const bound = 1 / Math.sqrt(ref.hiddenSize);
    const heads = Array.from({ length: ref.heads }, (_, seed) => comlrlRewardHeadInit(ref.hiddenSize, seed));
    const ours = { weight: stats(heads.flatMap((h) => floats(h["value_projection.weight"]))), bias: heads.flatMap((h) => floats(h["value_projection.bias"])) };
    // U(−b, b) has std b/√3; over 65 536 draws the sample std is within 0.3 % of it (1 % allowed), the mean within
    // 3 standard errors of 0, and the largest |w| within 0.1 % of b.
    for (const [side, w] of [["CoMLRL", ref.weight], ["ours", ours.weight]] as const) {
      expect(Math.abs(w.std / (bound / Math.sqrt(3)) - 1), `${side} weight std ${w.std}`).toBeLessThan(0.01);
      expect(Math.abs(w.mean), `${side} weight mean`).toBeLessThan((3 * bound) / Math.sqrt(3) / Math.sqrt(ref.hiddenSize * ref.heads));
      expect(w.maxAbs, `${side} weight max |w|`).toBeLessThanOrEqual(bound);
      expect(w.maxAbs, `${side} weight max |w|`).toBeGreaterThan(0.999 * bound);
    }
    // The biases are drawn too (not zero, as a value head's): 16 of them spread over the same interval.
    for (const [side, b] of [["CoMLRL", ref.bias.values as number[]], ["ours", ours.bias]] as const) {
      expect(Math.max(...b.map(Math.abs)), `${side} bias`).toBeLessThanOrEqual(bound);
      expect(new Set(b).size, `${side} biases distinct`).toBe(ref.heads);
      expect(stats(b).std, `${side} bias std`).toBeGreaterThan(bound / Math.sqrt(3) / 2);
    }
  });

  it("a fresh JointRewardModel starts from that head, seeded", async () => {
    const rm = await JointRewardModel.load(COMLRL_MODEL, { seed: 3 });
    try {
      const expected = comlrlRewardHeadInit(16, 3);
      const head = rm.head.stateDict();
      for (const key of ["value_projection.weight", "value_projection.bias"]) expect(floats(head[key]), key).toEqual(floats(expected[key]));
    } finally {
      rm.dispose();
    }
  });
});
