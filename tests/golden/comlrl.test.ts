// One update of our MAGRPO family and centralized MAGRPO against the real CoMLRL 1.4.3 (tests/golden/comlrl, made by
// scripts/reference/make_comlrl_goldens.py): the same rollouts replayed through trainer.update() must give CoMLRL's
// loss, gradient norm and parameters after its AdamW step (lr 5e-6, PyTorch's AdamW defaults).
//
// Token accounting differs by design and the replay states it exactly: CoMLRL's MAGRPO feeds prompt + row[:-1] of the
// EOS-padded generate() row and scores every position — it drops each completion's last token and scores the trailing
// pads; ours scores a completion's own tokens up to its EOS. Handing our trainer the tokens CoMLRL scores
// (`scoredCompletions`) reproduces its numbers, so the difference is exactly those tokens; tokenAccounting "comlrl"
// makes those rows from our own completions. Centralized MAGRPO scores up to and including the first EOS in both.
//
// One more difference shows only when the pad token is an input, as CoMLRL's scored pads are: transformers builds
// Qwen2's embedding as nn.Embedding(..., padding_idx=pad_token_id), so the pad row of the (tied) embedding gets no
// gradient from its lookups there; our core's embedding has no padding index. That row is left out of the parameter
// comparison and the gradient norm (which includes it) is compared only where no pad is an input (centralized).
import { describe, expect, it } from "vitest";
import type { NodeSample } from "../../src/rollout/types.js";
import { CentralizedMAGRPOTrainer } from "../../src/trainers/reinforce/centralized.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";
import { COMLRL_MODEL, expectClose, golden, LOSS_RTOL, maxParamDiff, PARAM_ATOL, scratch } from "./comlrl-golden.js";

function samples(completions: number[][][]): NodeSample[] {
  return golden.prompts.map((promptIds: number[], n: number) => ({
    agent: 0, turn: 0, promptIds,
    completionIds: completions[n].map((ids) => Int32Array.from(ids)),
    returns: golden.returns[n], referenceKl: golden.returns[n].map(() => 0),
    nodeMeanReward: 0, nodeMeanReturn: 0, envStep: 1,
  }));
}

const item = { prompt: "unused: the rollouts are given" };
const reward = () => [0, 0, 0];

describe("CoMLRL 1.4.3 parity: MAGRPO family", () => {
  for (const [name, ref] of Object.entries<any>(golden.magrpo)) {
    it(`${name}: loss and parameters after one update`, async () => {
      const trainer = await MAGRPOTrainer.create({
        agents: [COMLRL_MODEL], numAgents: 1, rewardFunc: reward, trainDataset: [item], quiet: true,
        outputDir: scratch(),
        config: { numTurns: 1, numGenerations: 3, rolloutBufferSize: 2, advantageMode: ref.config.advantageMode, advantageNormalization: ref.config.advantageNormalization },
      });
      try {
        const [result] = await trainer.update(samples(ref.scoredCompletions));
        expectClose(result.loss, ref.loss, LOSS_RTOL, "loss");
        const model = trainer.agents[0].model.native;
        const hidden = model.getParameter("model.norm.weight").length;
        const padRow = (p: string, i: number) => p === "model.embed_tokens.weight" && Math.floor(i / hidden) === golden.eos;
        const { diff } = maxParamDiff((p) => model.getParameter(p), `magrpo_${name}.after`, padRow);
        expect(diff).toBeLessThanOrEqual(PARAM_ATOL);
      } finally {
        await trainer.close();
      }
    });
  }

  const natural = (row: number[]) => (row.includes(golden.eos) ? row.slice(0, row.indexOf(golden.eos) + 1) : row);

  // The four advantage modes on rows with a dropped last token and scored pads, and rows that all end with EOS (the
  // longest ones' EOS dropped).
  const accountingCases: Array<[string, any, number[][][], string]> = [
    ...Object.entries<any>(golden.magrpo).map(([name, ref]): [string, any, number[][][], string] => [name, ref, golden.rows, `magrpo_${name}`]),
    ["eos_ended", golden.magrpo_token_accounting.eos_ended, golden.magrpo_token_accounting.eos_ended.rows, "magrpo_eos_ended"],
  ];
  for (const [name, ref, rows, tensors] of accountingCases) {
    it(`${name}: tokenAccounting "comlrl" on our own completions gives CoMLRL's loss and parameters`, async () => {
      const trainer = await MAGRPOTrainer.create({
        agents: [COMLRL_MODEL], numAgents: 1, rewardFunc: reward, trainDataset: [item], quiet: true,
        outputDir: scratch(),
        config: {
          numTurns: 1, numGenerations: 3, rolloutBufferSize: 2, advantageMode: ref.config.advantageMode,
          advantageNormalization: ref.config.advantageNormalization, tokenAccounting: "comlrl",
        },
      });
      try {
        const [result] = await trainer.update(samples(rows.map((node) => node.map(natural))));
        expectClose(result.loss, ref.loss, LOSS_RTOL, "loss");
        const model = trainer.agents[0].model.native;
        const hidden = model.getParameter("model.norm.weight").length;
        const padRow = (p: string, i: number) => p === "model.embed_tokens.weight" && Math.floor(i / hidden) === golden.eos;
        expect(maxParamDiff((p) => model.getParameter(p), `${tensors}.after`, padRow).diff).toBeLessThanOrEqual(PARAM_ATOL);
      } finally {
        await trainer.close();
      }
    });
  }

  it("the difference from our accounting is exactly the dropped last token and the scored pads", async () => {
    const ref = golden.magrpo.mean_unnormalized;
    const trainer = await MAGRPOTrainer.create({
      agents: [COMLRL_MODEL], numAgents: 1, rewardFunc: reward, trainDataset: [item], quiet: true,
      outputDir: scratch(),
      config: { numTurns: 1, numGenerations: 3, rolloutBufferSize: 2, advantageNormalization: false, agentLearningRate: 0 },
    });
    try {
      // Per completion: CoMLRL's score minus ours is log π of the pads it scores minus log π of the last token it drops.
      const model = trainer.agents[0].model;
      let expected = 0;
      for (const [n, rows] of (golden.rows as number[][][]).entries()) {
        const own = rows.map(natural).map((r) => Int32Array.from(r));
        const theirs = (ref.scoredCompletions[n] as number[][]).map((r) => Int32Array.from(r));
        const prompts = rows.map(() => golden.prompts[n]);
        const a = golden.returns[n].map((r: number, _: number, all: number[]) => r - all.reduce((x, y) => x + y, 0) / all.length);
        const [ours, comlrl] = [await model.score(prompts, own), await model.score(prompts, theirs)];
        rows.forEach((_, k) => (expected += (-a[k] * (comlrl.sum[k] - ours.sum[k])) / rows.length / golden.rows.length));
        expect(theirs.map((r) => r.length)).not.toEqual(own.map((r) => r.length));
      }
      const [natural_] = await trainer.update(samples((golden.rows as number[][][]).map((rows) => rows.map(natural))));
      expectClose(ref.loss - natural_.loss, expected, LOSS_RTOL, "CoMLRL's loss minus ours");
    } finally {
      await trainer.close();
    }
  });
});

describe("CoMLRL 1.4.3 parity: centralized MAGRPO", () => {
  const ref = golden.centralized;
  it("loss, gradient norm and parameters after one update (every joint token up to EOS scored, as there)", async () => {
    const trainer = await CentralizedMAGRPOTrainer.create({
      agents: [COMLRL_MODEL], numAgents: 2, rewardFunc: reward, trainDataset: [item], quiet: true,
      outputDir: scratch(),
      config: { numGenerations: 3, rolloutBufferSize: 2 },
    });
    try {
      const [result] = await trainer.update(samples(ref.scoredCompletions));
      expectClose(result.loss, ref.loss, LOSS_RTOL, "loss");
      expectClose(result.gradNorm, ref.gradNorm, LOSS_RTOL, "gradient norm");
      const model = trainer.agents[0].model.native;
      expect(maxParamDiff((p) => model.getParameter(p), "centralized.after").diff).toBeLessThanOrEqual(PARAM_ATOL);
    } finally {
      await trainer.close();
    }
  });
});
