// Small deterministic runs of every trainer kind, shared by the checkpoint tests and their child processes. A new
// trainer joins the exact-resume suite by one entry in TRAINER_KINDS.
import path from "node:path";
import type { IACConfigInput, MAACConfigInput, MADPOConfigInput, MAGRPOConfigInput, MARLHFConfigInput } from "../../src/config/index.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { RewardFunction } from "../../src/rollout/types.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer } from "../../src/trainers/reinforce/baselines.js";
import { CentralizedMAGRPOTrainer, type CentralizedAdapter } from "../../src/trainers/reinforce/centralized.js";
import { MAGRPOTrainer, type MAGRPOTrainerOptions } from "../../src/trainers/reinforce/magrpo.js";
import { MADPOTrainer } from "../../src/trainers/preference/madpo.js";
import { MARLHFTrainer } from "../../src/trainers/preference/marlhf.js";
import { MADPOIterTrainer } from "../../src/trainers/preference/iterative/madpo-iter.js";
import { MARLHFIterTrainer } from "../../src/trainers/preference/iterative/marlhf-iter.js";
import type { Trainer } from "../../src/trainers/lifecycle/trainer.js";
import { IACTrainer, type IACTrainerOptions } from "../../src/trainers/actor-critic/iac.js";
import { MAACTrainer } from "../../src/trainers/actor-critic/maac.js";

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

type Extra = Partial<MAGRPOTrainerOptions> & { config?: MAGRPOConfigInput };
/** What each trainer kind is built from: the MAGRPO options of a small run, its config fields as given. */
type SuiteRun = MAGRPOTrainerOptions & { config: MAGRPOConfigInput };
/** The suite's run as the actor-critic trainers take it: the task, and the config fields IAC and MAAC share. */
type ActorCriticRun = Omit<IACTrainerOptions, "config"> & { config: IACConfigInput & MAACConfigInput };
const withoutTransition = ({ externalTransition: _transition, ...options }: SuiteRun) => options;
const magrpoFamily = (create: (o: SuiteRun) => Promise<MAGRPOTrainer>) => async (options: SuiteRun) => {
  const trainer = await create(options);
  return Object.assign(trainer, { weights: () => trainer.agents.flatMap((a) => a.model.native.parameterNames().map(({ name }) => a.model.native.getParameter(name))) });
};

// Preference trainers: 4 candidates per item (24 env steps of collection, as the suite expects of checkpoint-1), 2
// pairs each; evaluation every 2 steps, whose task-reward calls the killed child slows, so it cannot outrun the kill.
/** The suite's run as every preference trainer takes it: the task, and the config fields they all have. */
type PreferenceRun = Omit<MAGRPOTrainerOptions, "config" | "rewardBatching" | "scoring" | "sampleLogInterval"> & { config: MADPOConfigInput & Pick<MARLHFConfigInput, "numGenerations" | "rewardTrainBatchSize" | "rewardHeldOutFraction"> };
const preference = <T extends Trainer & { agents: { model: MAGRPOTrainer["agents"][number]["model"] }[] }>(kind: "MADPO" | "MARLHF", create: (o: PreferenceRun) => Promise<T>) => async (o: SuiteRun) => {
  const { numGenerations, ...config } = o.config;
  const { rewardBatching: _batching, scoring: _scoring, sampleLogInterval: _log, ...task } = o;
  const trainer = await create({
    ...task,
    evalDataset: coverVowelsDataset(2),
    config: { ...config, ...(kind === "MARLHF" ? { numGenerations, rewardTrainBatchSize: 4, rewardHeldOutFraction: 0 } : {}), preferenceNumCandidates: 4, preferencePairsPerSample: 2, evalInterval: 2, evalNumSamples: 2 },
  });
  return Object.assign(trainer, { weights: () => trainer.agents.flatMap((a) => a.model.native.parameterNames().map(({ name }) => a.model.native.getParameter(name))) });
};

// Actor-critic trainers take the suite's tokenizer explicitly (agents are given) and every weight includes the critics'.
const actorCritic = (create: (o: ActorCriticRun) => Promise<IACTrainer | MAACTrainer>) => async (o: SuiteRun) => {
  const { rewardBatching: _batching, scoring: _scoring, sampleLogInterval: _log, ...task } = o;
  const { ComlrlTokenizer } = await import("../../src/models/tokenizer.js");
  const trainer = await create({ ...task, tokenizer: await ComlrlTokenizer.fromDirectory(o.agents![0] as string), config: { ...o.config, criticLearningRate: 2e-3 } });
  const lms = [...trainer.agents.map((a) => a.model), ...trainer.critics.map((c) => c.model)];
  const heads = [...trainer.agents.flatMap((a) => (a.valueHead ? [a.valueHead] : [])), ...trainer.critics.map((c) => c.valueHead)];
  return Object.assign(trainer, {
    weights: () => [...lms, ...heads].flatMap((m) => m.native.parameterNames().map(({ name }) => m.native.getParameter(name))),
  });
};

// MARLHF with an actor-critic RL phase: every weight includes its critics'.
const marlhfActorCritic = (rlAlgorithm: "iac" | "maac") => async (o: SuiteRun) => {
  const trainer = await preference("MARLHF", (p) => MARLHFTrainer.create({ ...p, config: { ...p.config, rlAlgorithm, criticLearningRate: 2e-3 } }))(o);
  const agents = trainer.weights;
  const critics = trainer.actorCritic!.critics.flatMap(({ model, valueHead }) => [model.native, valueHead.native]);
  return Object.assign(trainer, { weights: () => [...agents(), ...critics.flatMap((m) => m.parameterNames().map(({ name }) => m.getParameter(name)))] });
};

export const TRAINER_KINDS: Record<string, (options: SuiteRun) => Promise<ResumableTrainer>> = {
  MAGRPO: magrpoFamily((o) => MAGRPOTrainer.create(o)),
  MAREINFORCE: magrpoFamily((o) => MAREINFORCETrainer.create({ ...o, config: { ...o.config, advantageNormalization: false } })),
  MAReMax: magrpoFamily((o) => MAReMaxTrainer.create({ ...o, config: { ...o.config, advantageNormalization: false } })),
  MARLOO: magrpoFamily((o) => MARLOOTrainer.create({ ...o, config: { ...o.config, advantageNormalization: false } })),
  CentralizedMAGRPO: magrpoFamily((o) => CentralizedMAGRPOTrainer.create({ ...withoutTransition(o), agents: [o.agents![0]], numAgents: undefined, adapter: halves })),
  MADPO: preference("MADPO", (o) => MADPOTrainer.create(o)),
  MARLHF: preference("MARLHF", (o) => MARLHFTrainer.create(o)),
  // Iterative: the suite's epochs are iterations (three DPO epochs each), so resuming raises numIterations.
  MADPOIter: preference("MADPO", (o) => MADPOIterTrainer.create({ ...o, config: { ...o.config, numIterations: o.config.numTrainEpochs, numTrainEpochs: 3 } })),
  MARLHFIter: preference("MARLHF", (o) =>
    MARLHFIterTrainer.create({ ...o, config: { ...o.config, numIterations: o.config.numTrainEpochs, numTrainEpochs: 3, rewardNumTrainEpochs: 1 } }),
  ),
  "MARLHF (IAC)": marlhfActorCritic("iac"),
  "MARLHF (MAAC)": marlhfActorCritic("maac"),
  "IAC (separate critics)": actorCritic((o) => IACTrainer.create({ ...o, criticModel: o.agents![0], config: { ...o.config, criticType: "q" } })),
  "IAC (shared heads)": actorCritic((o) => IACTrainer.create({ ...o, config: { ...o.config, useSeparateCritic: false, valueHeadHiddenDim: 4 } })),
  MAAC: actorCritic((o) => MAACTrainer.create({ ...o, criticModel: o.agents![0] })),
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
