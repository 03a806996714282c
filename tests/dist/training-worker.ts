// One rank (or the only process) of the data-parallel trainer tests:
//   node --import tsx training-worker.ts <scenario> <base> <outDir> [args...]
// "update": two updates over this rank's share of fixed samples; "train": MAGRPO (or the kind named) on
// cover-the-vowels with checkpoints (optionally resuming, optionally slowed so a test can kill it mid-run). Writes
// <outDir>/rank-<r>.json.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MADPOIterTrainer } from "../../src/trainers/preference/iterative/madpo-iter.js";
import { MARLHFIterTrainer } from "../../src/trainers/preference/iterative/marlhf-iter.js";
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
  const [epochs, checkpointDir, resume = "", slowMs = "0", items = "6", kind = "MAGRPO"] = args;
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
  await trainer.train({ checkpointDir, checkpointInterval: 1, ...(resume ? { resumeFromCheckpoint: resume } : {}) });
  // The iterative trainers: the last iteration's training pairs, as this rank holds them.
  const trained: object = trainer;
  const pairs = trained instanceof MARLHFIterTrainer || trained instanceof MADPOIterTrainer ? trained.preferences.pairs.map((p) => ({ item: p.itemIndex, winner: p.winnerTexts, loser: p.loserTexts })) : null;
  result = { weights: weightsOf(trainer), progress: trainer.progress, pairs };
  await trainer.close();
}
writeFileSync(path.join(outDir, `rank-${rank}.json`), JSON.stringify(result));
