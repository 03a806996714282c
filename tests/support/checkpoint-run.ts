// Small deterministic runs of every trainer kind, shared by the checkpoint tests and their child processes: every
// registered trainer, built as a config file builds it (its registry entry's config and create), and a few
// variants of them. A new trainer joins the exact-resume suite by being registered.
import path from "node:path";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { RewardFunction } from "../../src/rollout/types.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { ActorCriticLearner } from "../../src/trainers/actor-critic/learner.js";
import type { Agent } from "../../src/trainers/agents.js";
import { trainerDefinition, trainerDefinitions, type TrainerDefinition } from "../../src/trainers/builtins.js";
import type { Trainer } from "../../src/trainers/lifecycle/trainer.js";
import type { RLPhaseLearner } from "../../src/trainers/rl-back-end.js";
import { RolloutTrainer } from "../../src/trainers/rollout-trainer.js";
import type { CentralizedAdapter } from "../../src/trainers/reinforce/centralized.js";
import type { MAGRPOTrainerOptions } from "../../src/trainers/reinforce/magrpo.js";
import { TRAINER_VARIANTS } from "./trainer-variants.js";

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
type Built = Trainer & { agents: Agent[] };

/** The learner of a trainer that has one: its own (the online trainers) or its RL phase's (MARLHF's). */
function learnerOf(trainer: Built): RLPhaseLearner | null {
  if (trainer instanceof RolloutTrainer) return trainer.learner as RLPhaseLearner;
  return "rl" in trainer ? (trainer.rl as RLPhaseLearner) : null;
}

/** Every trained weight: the agents' (and their value heads'), and the critics' when the learner has them. */
function withWeights(trainer: Built): ResumableTrainer {
  const learner = learnerOf(trainer);
  const critics = learner instanceof ActorCriticLearner ? learner.critics : [];
  const modules = [...trainer.agents.map((a) => a.model.native), ...trainer.agents.flatMap((a) => (a.valueHead ? [a.valueHead.native] : [])), ...critics.flatMap((c) => [c.model.native, c.valueHead.native])];
  return Object.assign(trainer, { weights: () => modules.flatMap((m) => m.parameterNames().map(({ name }) => m.getParameter(name))) });
}

/**
 * The suite's settings beyond makeTrainer's, each given to the trainers whose config has the field: preference
 * trainers take 4 candidates per item (24 env steps of collection, as the suite expects of checkpoint-1), 2 pairs
 * each, and evaluate every 2 steps, whose task-reward calls the killed child slows, so it cannot outrun the kill;
 * critics learn fast enough to move.
 */
const SUITE_SETTINGS: Record<string, unknown> = { preferenceNumCandidates: 4, preferencePairsPerSample: 2, rewardTrainBatchSize: 4, rewardHeldOutFraction: 0, criticLearningRate: 2e-3 };
const PREFERENCE_EVALUATION = { evalInterval: 2, evalNumSamples: 2 };

/** The config input of `definition` from the suite's: the fields its config has, the suite's settings among them. */
function suiteConfig(definition: TrainerDefinition, config: Record<string, unknown>): Record<string, unknown> {
  const fields = definition.fields;
  const preference = "preferenceNumCandidates" in fields;
  // Iterative trainers: the suite's epochs are iterations (three epochs each), so resuming raises numIterations.
  const iterative = "preferenceReplayMode" in fields ? { numIterations: config.numTrainEpochs, numTrainEpochs: 3, rewardNumTrainEpochs: 1 } : {};
  const suite = { ...config, ...SUITE_SETTINGS, ...(preference ? PREFERENCE_EVALUATION : {}), ...iterative };
  const input: Record<string, unknown> = Object.fromEntries(Object.entries(suite).filter(([key]) => key in fields));
  // A baseline of its own (raw returns, the group max, leave-one-out) differs from MAGRPO's only unnormalized.
  const { advantageMode } = definition.config({ numAgents: 2 }, {}) as { advantageMode?: string };
  if (advantageMode !== undefined && advantageMode !== "mean") input.advantageNormalization = false;
  return input;
}

/** Builds `section`'s trainer as a config file does, from the suite's options and `config` over the suite's config. */
const registered =
  (section: string, config: Record<string, unknown> = {}) =>
  async (o: MAGRPOTrainerOptions): Promise<ResumableTrainer> => {
    const definition = trainerDefinition(section);
    const built = definition.config(suiteConfig(definition, { ...(o.config as Record<string, unknown>), ...config }), {});
    const centralized = definition.centralized?.(built) ?? false;
    const { rewardBatching: _batching, sampleLogInterval: _log, config: _config, ...task } = o;
    const run = {
      ...task,
      agents: centralized ? [o.agents![0]] : o.agents,
      ...(centralized && { adapter: halves }),
      ...("preferenceNumCandidates" in definition.fields && { evalDataset: coverVowelsDataset(2) }),
    } as Parameters<TrainerDefinition["create"]>[0];
    const critics = definition.critics?.required(built) ? { criticModel: o.agents![0] as string, critics: null } : { criticModel: null, critics: null };
    return withWeights((await definition.create(run, built, critics)) as Built);
  };

export const TRAINER_KINDS: Record<string, (options: MAGRPOTrainerOptions) => Promise<ResumableTrainer>> = {
  ...Object.fromEntries(trainerDefinitions().map((definition) => [definition.trainer.name.replace(/Trainer$/, ""), registered(definition.section)])),
  ...Object.fromEntries(TRAINER_VARIANTS.map(({ label, section, config }) => [label, registered(section, config)])),
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
    config: { numTurns: 1, numTrainEpochs: epochs, numGenerations: 4, maxNewTokens: 4, temperature: 1, topP: 1, topK: 0, agentLearningRate: 2e-3, rolloutBufferSize: 2, trainBatchSize: 2, loggingSteps: 1, evalInterval: 0, seed: 3, ...(extra.config ?? {}) },
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
