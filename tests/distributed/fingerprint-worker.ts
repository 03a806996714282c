// One rank of the fingerprint tests: node --import tsx fingerprint-worker.ts <outDir> <model of rank 0>,<model of rank 1>
// <numGenerations of rank 0>,<of rank 1>. Trains MAGRPO one epoch on cover-the-vowels with this rank's model and
// numGenerations, and writes <outDir>/rank-<r>.json when it finishes.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";

const [outDir, models, generations] = process.argv.slice(2);
const rank = Number(process.env.RANK);
const model = models.split(",")[rank];
const tokenizer = await ComlrlTokenizer.fromDirectory(model);
const trainer = await MAGRPOTrainer.create({
  agents: [model, model],
  rewardFunc: coverVowelsRewardFunc,
  formatters: coverVowelsFormatters((m) => tokenizer.applyChatTemplate(m, { addGenerationPrompt: true })),
  trainDataset: coverVowelsDataset(4),
  outputDir: path.join(outDir, `run-${rank}`),
  quiet: true,
  config: {
    parallelTraining: "ddp",
    numTurns: 1,
    numTrainEpochs: 1,
    numGenerations: Number(generations.split(",")[rank]),
    maxNewTokens: 4,
    rolloutBufferSize: 2,
    trainBatchSize: 2,
    evalInterval: 0,
    seed: 3,
  },
});
await trainer.train();
await trainer.close();
writeFileSync(path.join(outDir, `rank-${rank}.json`), JSON.stringify({ trained: true }));
