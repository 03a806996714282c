// One rank (or the only process) of the data-parallel trainer tests:
//   node --import tsx training-worker.ts <scenario> <base> <outDir> [args...]
// "update": two updates over this rank's share of fixed samples; "train": MAGRPO (or the kind named) on
// cover-the-vowels with checkpoints (optionally resuming, optionally slowed so a test can kill it mid-run, optionally
// with one rank's first DPO or reward-model loss made non-finite). Writes <outDir>/rank-<r>.json.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MADPOIterTrainer } from "../../src/trainers/preference/iterative/madpo-iter.js";
import { MARLHFIterTrainer } from "../../src/trainers/preference/iterative/marlhf-iter.js";
import { MADPOTrainer } from "../../src/trainers/preference/madpo.js";
import { MARLHFTrainer } from "../../src/trainers/preference/marlhf.js";
import { fixedSamples, makeDdpTrainer, weightsOf, type DdpKind } from "./trainer-setup.js";

const [scenario, base, outDir, ...args] = process.argv.slice(2);
const rank = Number(process.env.RANK ?? 0);
const worldSize = Number(process.env.WORLD_SIZE ?? 1);
const ddp = process.env.WORLD_SIZE !== undefined;
const tokenizer = await ComlrlTokenizer.fromDirectory(base);
writeFileSync(path.join(outDir, `pid-${rank}`), `${process.pid}`);

let result: Record<string, unknown> = {};
if (scenario === "update") {
  const trainer = await makeDdpTrainer(base, tokenizer, path.join(outDir, `run-${rank}`), { ddp, epochs: 1, trainBatchSize: 8 });
  await trainer.synchronizeReplicas();
  const mine = fixedSamples().filter((_, i) => i % worldSize === rank);
  const updates = [];
  for (let round = 0; round < 2; round++) updates.push(await trainer.update(mine));
  result = { weights: weightsOf(trainer), updates };
  await trainer.close();
} else if (scenario === "train") {
  const [epochs, checkpointDir, resume = "", slowMs = "0", items = "6", kind = "MAGRPO", nonFiniteRank = ""] = args;
  const delay = Number(slowMs);
  const trainer = await makeDdpTrainer(base, tokenizer, path.join(outDir, "run"), {
    ddp,
    kind: kind as DdpKind,
    epochs: Number(epochs),
    // "a,b": rank 0 gets a items, rank 1 b (a dataset that differs between ranks).
    items: Number(items.split(",")[rank] ?? items),
    rewardFunc: async (completions, ctx) => {
      if (delay) await new Promise((resolve) => setTimeout(resolve, delay));
      return coverVowelsRewardFunc(completions, ctx);
    },
  });
  const trained = trainer;
  let nonFinite = 0;
  if (nonFiniteRank !== "" && Number(nonFiniteRank) === rank) {
    // The real forward (and backward) runs; only what the loss is computed from, or the loss itself, is NaN, once.
    if (trained instanceof MADPOTrainer) {
      const model = trained.agents[0].model;
      const score = model.scoreForBackward.bind(model);
      model.scoreForBackward = async (...scored) => {
        const out = await score(...scored);
        // Stage 1 is DPO's (stage 0 collects the pairs).
        return trained.progress.stage === 1 && nonFinite++ === 0 ? { ...out, sum: out.sum.map(() => Number.NaN) } : out;
      };
    } else if (trained instanceof MARLHFTrainer) {
      const rewardModel = trained.rewardModel;
      const backward = rewardModel.bradleyTerryBackward.bind(rewardModel);
      rewardModel.bradleyTerryBackward = async (...pairs) => {
        const out = await backward(...pairs);
        return nonFinite++ === 0 ? { ...out, loss: Number.NaN } : out;
      };
    }
  }
  await trainer.train({ checkpointDir, checkpointInterval: 1, ...(resume ? { resumeFromCheckpoint: resume } : {}) });
  // The iterative trainers: the last iteration's training pairs, as this rank holds them.
  const pairs = trained instanceof MARLHFIterTrainer || trained instanceof MADPOIterTrainer ? trained.preferences.pairs.map((p) => ({ item: p.itemIndex, winner: p.winnerTexts, loser: p.loserTexts })) : null;
  result = { weights: weightsOf(trainer), progress: trainer.progress, pairs, nonFinite };
  await trainer.close();
}
writeFileSync(path.join(outDir, `rank-${rank}.json`), JSON.stringify(result));
