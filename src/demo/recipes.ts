// The demo's recipe, shared by `comlrl demo`, the bench suite and the data-parallel example: a tiny Qwen2-style base
// model made from scratch, and two copies of it trained with MAGRPO on the cooperative "cover the vowels" task.
import { createTinyModel } from "../models/tiny-model.js";
import type { ComlrlTokenizer } from "../models/tokenizer.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../tasks/cover-vowels.js";
import type { MAGRPOTrainerOptions } from "../trainers/reinforce/magrpo.js";

export interface DemoOptions {
  outputDir: string;
  epochs: number;
  seed: number;
  quiet: boolean;
}

/** The demo's base model: a tiny Qwen2-style model and tokenizer written to baseDir (kept if already there). */
export function createDemoBaseModel(baseDir: string, seed: number): Promise<ComlrlTokenizer> {
  return createTinyModel(baseDir, { seed, hiddenSize: 64, numLayers: 2 });
}

/** The demo's trainer: two copies of the base model, MAGRPO on cover-the-vowels (the bench suite times this too). */
export function demoTrainerOptions(
  baseDir: string,
  tokenizer: ComlrlTokenizer,
  options: DemoOptions & { items?: number },
): MAGRPOTrainerOptions {
  return {
    agents: [baseDir, baseDir],
    rewardFunc: coverVowelsRewardFunc,
    formatters: coverVowelsFormatters((messages) => tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true })),
    trainDataset: coverVowelsDataset(options.items ?? 16),
    outputDir: options.outputDir,
    quiet: options.quiet,
    sampleLogInterval: 16,
    config: {
      numAgents: 2,
      numTurns: 1,
      numTrainEpochs: options.epochs,
      numGenerations: 8,
      maxNewTokens: 4,
      temperature: 1.0,
      topP: 1.0,
      topK: 0,
      agentLearningRate: 2e-3,
      rolloutBufferSize: 2,
      trainBatchSize: 2,
      loggingSteps: 1,
      evalInterval: 0,
      seed: options.seed,
    },
  };
}
