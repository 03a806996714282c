// Small deterministic runs of every trainer kind, shared by the checkpoint tests and their child processes. A new
// trainer joins the exact-resume suite by one entry in TRAINER_KINDS.
import path from "node:path";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { RewardFunction } from "../../src/rollout/types.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer } from "../../src/trainers/reinforce/baselines.js";
import { CentralizedMAGRPOTrainer, type CentralizedAdapter } from "../../src/trainers/reinforce/centralized.js";
import { MAGRPOTrainer, type MAGRPOTrainerOptions } from "../../src/trainers/reinforce/magrpo.js";
import type { Trainer } from "../../src/trainers/trainer.js";

export async function makeBase(dir: string): Promise<ComlrlTokenizer> {
  return createTinyModel(dir, { seed: 11, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
}

/** What the resume tests read of any trainer: its trained weights. */
export interface ResumableTrainer extends Trainer {
  weights(): Float32Array[];
}

// The joint policy's response split in half, so that a random model earns varied rewards.
const halves: CentralizedAdapter = {
  buildPrompt: (_item, rolePrompts) => rolePrompts.join("\n"),
  parseCompletion: (text) => [text.slice(0, Math.ceil(text.length / 2)), text.slice(Math.ceil(text.length / 2))],
};

type Extra = Partial<MAGRPOTrainerOptions>;
const magrpoFamily = (create: (o: MAGRPOTrainerOptions) => Promise<MAGRPOTrainer>) => async (options: MAGRPOTrainerOptions) => {
  const trainer = await create(options);
  return Object.assign(trainer, { weights: () => trainer.agents.flatMap((a) => a.model.native.parameterNames().map(({ name }) => a.model.native.getParameter(name))) });
};

export const TRAINER_KINDS: Record<string, (options: MAGRPOTrainerOptions) => Promise<ResumableTrainer>> = {
  MAGRPO: magrpoFamily((o) => MAGRPOTrainer.create(o)),
  MAREINFORCE: magrpoFamily((o) => MAREINFORCETrainer.create({ ...o, config: { ...o.config, advantageNormalization: false } })),
  MAReMax: magrpoFamily((o) => MAReMaxTrainer.create({ ...o, config: { ...o.config, advantageNormalization: false } })),
  MARLOO: magrpoFamily((o) => MARLOOTrainer.create({ ...o, config: { ...o.config, advantageNormalization: false } })),
  CentralizedMAGRPO: magrpoFamily((o) => CentralizedMAGRPOTrainer.create({ ...o, agents: [o.agents![0]], numAgents: undefined, adapter: halves, externalTransition: undefined } as never)),
};

export async function makeTrainer(base: string, tokenizer: ComlrlTokenizer, outputDir: string, epochs: number, extra: Extra = {}, kind = "MAGRPO"): Promise<ResumableTrainer> {
  const rewardFunc: RewardFunction = extra.rewardFunc ?? coverVowelsRewardFunc;
  return TRAINER_KINDS[kind]({
    agents: [base, base],
    rewardFunc,
    formatters: coverVowelsFormatters((m) => tokenizer.applyChatTemplate(m, { addGenerationPrompt: true })),
    trainDataset: coverVowelsDataset(6),
    outputDir,
    quiet: true,
    ...extra,
    config: { ...(extra.config ?? {}), numTurns: 1, numTrainEpochs: epochs, numGenerations: 4, maxNewTokens: 4, temperature: 1, topP: 1, topK: null, agentLearningRate: 2e-3, rolloutBufferSize: 2, trainBatchSize: 2, loggingSteps: 1, evalInterval: 0, seed: 3 },
  });
}

// As a child process: node --import tsx checkpoint-run.ts <base> <outputDir> <checkpointDir> <epochs> [<slowMs> [<kind>]]
if (process.argv[1] && path.basename(process.argv[1]).startsWith("checkpoint-run")) {
  const [base, outputDir, checkpointDir, epochs, slowMs = "0", kind = "MAGRPO"] = process.argv.slice(2);
  const { ComlrlTokenizer } = await import("../../src/models/tokenizer.js");
  const tokenizer = await ComlrlTokenizer.fromDirectory(base);
  const delay = Number(slowMs);
  const trainer = await makeTrainer(
    base,
    tokenizer,
    outputDir,
    Number(epochs),
    {
      // Slows each reward call so the parent can kill the run in the middle of an epoch.
      rewardFunc: async (completions, ctx) => {
        if (delay) await new Promise((resolve) => setTimeout(resolve, delay));
        return coverVowelsRewardFunc(completions, ctx);
      },
    },
    kind,
  );
  await trainer.train({ checkpointDir, checkpointInterval: 1 });
  await trainer.close();
}
