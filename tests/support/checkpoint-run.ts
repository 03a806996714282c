// A small deterministic MAGRPO run shared by the checkpoint tests and their child processes.
import path from "node:path";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MAGRPOTrainer, type MAGRPOTrainerOptions } from "../../src/trainers/reinforce/magrpo.js";

export async function makeBase(dir: string): Promise<ComlrlTokenizer> {
  return createTinyModel(dir, { seed: 11, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
}

export async function makeTrainer(base: string, tokenizer: ComlrlTokenizer, outputDir: string, epochs: number, extra: Partial<MAGRPOTrainerOptions> = {}) {
  return MAGRPOTrainer.create({
    agents: [base, base],
    rewardFunc: extra.rewardFunc ?? coverVowelsRewardFunc,
    formatters: coverVowelsFormatters((m) => tokenizer.applyChatTemplate(m, { addGenerationPrompt: true })),
    trainDataset: coverVowelsDataset(6),
    outputDir,
    quiet: true,
    ...extra,
    config: { ...(extra.config ?? {}), numTurns: 1, numTrainEpochs: epochs, numGenerations: 4, maxNewTokens: 4, temperature: 1, topP: 1, topK: null, agentLearningRate: 2e-3, rolloutBufferSize: 2, trainBatchSize: 2, loggingSteps: 1, evalInterval: 0, seed: 3 },
  });
}

// As a child process: node --import tsx checkpoint-run.ts <base> <outputDir> <checkpointDir> <epochs> [<slowMs>]
if (process.argv[1] && path.basename(process.argv[1]).startsWith("checkpoint-run")) {
  const [base, outputDir, checkpointDir, epochs, slowMs = "0"] = process.argv.slice(2);
  const { ComlrlTokenizer } = await import("../../src/models/tokenizer.js");
  const tokenizer = await ComlrlTokenizer.fromDirectory(base);
  const delay = Number(slowMs);
  const trainer = await makeTrainer(base, tokenizer, outputDir, Number(epochs), {
    // Slows each reward call so the parent can kill the run in the middle of an epoch.
    rewardFunc: async (completions, ctx) => {
      if (delay) await new Promise((resolve) => setTimeout(resolve, delay));
      return coverVowelsRewardFunc(completions, ctx);
    },
  });
  await trainer.train({ checkpointDir, checkpointInterval: 1 });
  await trainer.close();
}
