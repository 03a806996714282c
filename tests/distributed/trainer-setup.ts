// The data-parallel tests' trainer: MAGRPO with two agents on cover-the-vowels over a tiny base model, and fixed
// node samples for update() (no rollout, so "the same samples" on one process and on two ranks).
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import type { NodeSample, RewardFunction } from "../../src/rollout/types.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { IACTrainer } from "../../src/trainers/actor-critic/iac.js";
import { MAACTrainer } from "../../src/trainers/actor-critic/maac.js";
import { MAPPOTrainer } from "../../src/trainers/actor-critic/mappo.js";
import { MADPOIterTrainer } from "../../src/trainers/preference/iterative/madpo-iter.js";
import { MARLHFIterTrainer } from "../../src/trainers/preference/iterative/marlhf-iter.js";
import { MADPOTrainer } from "../../src/trainers/preference/madpo.js";
import { MARLHFTrainer } from "../../src/trainers/preference/marlhf.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";

export function makeDdpBase(dir: string): Promise<ComlrlTokenizer> {
  return createTinyModel(dir, { seed: 11, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
}

export type DdpKind = "MAGRPO" | "IAC" | "MAAC" | "MAPPO" | "MADPO" | "MARLHF-IAC" | "MARLHF-MAAC" | "MARLHF-ITER" | "MADPO-ITER";

export interface DdpTrainerOptions {
  ddp: boolean;
  /**
   * MAGRPO (default); IAC runs two turns that end early on some items, so ranks hold different sample counts;
   * MAPPO: the same two turns with per-agent critics, GAE(λ) targets and two passes per update;
   * MADPO: pairs, then DPO epochs over them;
   * MARLHF-IAC / MARLHF-MAAC: MARLHF with an actor-critic RL phase, hosted in MARLHF's data-parallel job;
   * MARLHF-ITER: three MARLHFIter iterations against the history comparator (which loads the policy checkpoint rank 0
   * wrote), pairs drawn at random and trained from the whole replay history (both draw from the shuffle generator);
   * MADPO-ITER: two MADPOIter iterations, pairs drawn at random, the replay sampled with lambda_decay.
   */
  kind?: DdpKind;
  epochs: number;
  trainBatchSize?: number;
  items?: number;
  rewardFunc?: RewardFunction;
}

/** Two agents on cover-the-vowels over the tiny base model, quiet. */
function ddpTask(base: string, tokenizer: ComlrlTokenizer, outputDir: string, o: DdpTrainerOptions) {
  return {
    agents: [base, base],
    rewardFunc: o.rewardFunc ?? coverVowelsRewardFunc,
    formatters: coverVowelsFormatters((m) => tokenizer.applyChatTemplate(m, { addGenerationPrompt: true })),
    trainDataset: coverVowelsDataset(o.items ?? 6),
    outputDir,
    quiet: true,
  };
}

/** A trainer of any of the data-parallel kinds. */
export type DdpTrainer = MAGRPOTrainer | IACTrainer | MAACTrainer | MAPPOTrainer | MADPOTrainer | MARLHFTrainer | MARLHFIterTrainer | MADPOIterTrainer;

export function makeDdpTrainer(base: string, tokenizer: ComlrlTokenizer, outputDir: string, o: DdpTrainerOptions & { kind?: "MAGRPO" }): Promise<MAGRPOTrainer>;
export function makeDdpTrainer(base: string, tokenizer: ComlrlTokenizer, outputDir: string, o: DdpTrainerOptions): Promise<DdpTrainer>;
export async function makeDdpTrainer(base: string, tokenizer: ComlrlTokenizer, outputDir: string, o: DdpTrainerOptions): Promise<DdpTrainer> {
  if (o.kind === "IAC" || o.kind === "MAAC" || o.kind === "MAPPO") return makeActorCritic(base, tokenizer, outputDir, o);
  if (o.kind === "MARLHF-IAC" || o.kind === "MARLHF-MAAC") return makeMarlhf(base, tokenizer, outputDir, o);
  if (o.kind === "MARLHF-ITER") return makeMarlhfIter(base, tokenizer, outputDir, o);
  if (o.kind === "MADPO-ITER") return makeMadpoIter(base, tokenizer, outputDir, o);
  if (o.kind === "MADPO") return makeMadpo(base, tokenizer, outputDir, o);
  return MAGRPOTrainer.create({
    ...ddpTask(base, tokenizer, outputDir, o),
    config: {
      ...(o.ddp ? { parallelTraining: "ddp" } : {}),
      numTurns: 1,
      numTrainEpochs: o.epochs,
      numGenerations: 4,
      maxNewTokens: 4,
      temperature: 1,
      topP: 1,
      topK: 0,
      agentLearningRate: 2e-3,
      rolloutBufferSize: 2,
      trainBatchSize: o.trainBatchSize ?? 2,
      loggingSteps: 1,
      evalInterval: 0,
      seed: 3,
    },
  });
}

function makeActorCritic(base: string, tokenizer: ComlrlTokenizer, outputDir: string, o: DdpTrainerOptions): Promise<IACTrainer | MAACTrainer | MAPPOTrainer> {
  const options = {
    agents: [base, base],
    tokenizer,
    criticModel: base,
    rewardFunc: o.rewardFunc ?? coverVowelsRewardFunc,
    formatters: coverVowelsFormatters((m) => tokenizer.applyChatTemplate(m, { addGenerationPrompt: true })),
    trainDataset: coverVowelsDataset(o.items ?? 6),
    outputDir,
    quiet: true,
  };
  const config = { ...(o.ddp ? { parallelTraining: "ddp" as const } : {}), numTrainEpochs: o.epochs, maxNewTokens: 4, temperature: 1, topP: 1, topK: 0, agentLearningRate: 2e-3, criticLearningRate: 2e-3, rolloutBufferSize: 2, loggingSteps: 1, evalInterval: 0, seed: 3 };
  if (o.kind === "MAAC") return MAACTrainer.create({ ...options, config: { ...config, numTurns: 1, numGenerations: 2 } });
  const twoTurns = {
    ...options,
    externalTransition: ({ agentCompletions }: { agentCompletions: string[] }) => agentCompletions.map((c) => `again: ${c}`),
    config: { ...config, numTurns: 2, numGenerations: 1, earlyTerminationThreshold: 0.3 },
  };
  if (o.kind === "MAPPO") return MAPPOTrainer.create({ ...twoTurns, config: { ...twoTurns.config, centralizedCritic: false, gaeLambda: 0.9, numIterations: 2 } });
  return IACTrainer.create(twoTurns);
}

/** The preference trainers' settings: four candidates per item, two pairs kept of each. */
function preferenceSettings(o: DdpTrainerOptions) {
  return {
    ...(o.ddp ? { parallelTraining: "ddp" as const } : {}),
    numTrainEpochs: o.epochs,
    maxNewTokens: 4,
    temperature: 1,
    topP: 1,
    topK: null,
    agentLearningRate: 2e-3,
    preferenceNumCandidates: 4,
    preferencePairsPerSample: 2,
    rolloutBufferSize: 2,
    loggingSteps: 1,
    evalInterval: 0,
    seed: 3,
  };
}

/** The MARLHF family's: a reward model on the trainer's device, trained on every pair; two RL generations. */
function rlhfSettings(o: DdpTrainerOptions) {
  return { ...preferenceSettings(o), numGenerations: 2, rewardLearningRate: 1e-3, rewardTrainBatchSize: 2, rewardHeldOutFraction: 0, rewardModelDevice: null };
}

function makeMarlhf(base: string, tokenizer: ComlrlTokenizer, outputDir: string, o: DdpTrainerOptions): Promise<MARLHFTrainer> {
  return MARLHFTrainer.create({
    ...ddpTask(base, tokenizer, outputDir, o),
    config: { ...rlhfSettings(o), rlAlgorithm: o.kind === "MARLHF-IAC" ? "iac" : "maac", criticLearningRate: 2e-3 },
  });
}

function makeMadpo(base: string, tokenizer: ComlrlTokenizer, outputDir: string, o: DdpTrainerOptions): Promise<MADPOTrainer> {
  return MADPOTrainer.create({ ...ddpTask(base, tokenizer, outputDir, o), config: { ...preferenceSettings(o), trainBatchSize: 2 } });
}

function makeMarlhfIter(base: string, tokenizer: ComlrlTokenizer, outputDir: string, o: DdpTrainerOptions): Promise<MARLHFIterTrainer> {
  return MARLHFIterTrainer.create({
    ...ddpTask(base, tokenizer, outputDir, o),
    config: { ...rlhfSettings(o), numIterations: 3, comparatorPolicy: "history", pairSelection: "random", preferenceReplayMode: "all_history", trainBatchSize: 2 },
  });
}

function makeMadpoIter(base: string, tokenizer: ComlrlTokenizer, outputDir: string, o: DdpTrainerOptions): Promise<MADPOIterTrainer> {
  return MADPOIterTrainer.create({
    ...ddpTask(base, tokenizer, outputDir, o),
    config: { ...preferenceSettings(o), numIterations: 2, pairSelection: "random", preferenceReplayMode: "lambda_decay", preferenceReplayLambda: 0.5, trainBatchSize: 2 },
  });
}

/** Every agent's, critic's and reward model's parameters, as base64 of their float32 bytes (bit-exact comparison across processes). */
export function weightsOf(trainer: DdpTrainer): string[] {
  const critics = trainer instanceof MARLHFTrainer ? (trainer.actorCritic?.critics ?? []) : "critics" in trainer ? trainer.critics : [];
  const rewardModel = trainer instanceof MARLHFTrainer || trainer instanceof MARLHFIterTrainer ? [trainer.rewardModel.model.native, trainer.rewardModel.head.native] : [];
  const modules = [...trainer.agents.map((a) => a.model.native), ...critics.flatMap((c) => [c.model.native, c.valueHead.native]), ...rewardModel];
  return modules.flatMap((m) =>
    m.parameterNames().map(({ name }) => {
      const w = m.getParameter(name);
      return Buffer.from(w.buffer, w.byteOffset, w.byteLength).toString("base64");
    }),
  );
}

export function decodeWeights(weights: string[]): Float32Array[] {
  return weights.map((b64) => {
    const bytes = Buffer.from(b64, "base64");
    return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  });
}

/** Fixed node samples for both agents: hand-made prompts, completions and returns. */
export function fixedSamples(): NodeSample[] {
  const samples: NodeSample[] = [];
  for (let agent = 0; agent < 2; agent++) {
    for (let n = 0; n < 4; n++) {
      const returns = [0.1 * n, 1 - 0.2 * agent, 0.5, 0.05 * n * n];
      const mean = returns.reduce((a, b) => a + b, 0) / returns.length;
      samples.push({
        agent,
        turn: 0,
        promptIds: [5 + n, 17, 42 + agent],
        completionIds: returns.map((_, k) => Int32Array.from([30 + k, 60 + n, 90 + agent + k].slice(0, 1 + ((n + k) % 3)))),
        returns,
        referenceKl: returns.map(() => 0),
        nodeMeanReward: mean,
        nodeMeanReturn: mean,
        envStep: 4 * n + agent,
      });
    }
  }
  return samples;
}
