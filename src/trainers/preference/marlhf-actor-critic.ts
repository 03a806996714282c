// MARLHF's actor-critic back-ends (COMLRL-SPEC §6.4, rlAlgorithm "iac" / "maac"): an IAC or MAAC trainer built around
// MARLHF's own agents and tokenizers, its config copied from MARLHF's fields, its critics loaded from the first source
// given of critics, criticModel, criticModelName and the agents' model ids. Its rollouts run in MARLHF's reward-model
// environment; MARLHF hosts its training stage and registers its critics, so checkpoints and resume cover them.
import { iacConfig, maacConfig, type DeviceSpec, type IACConfig, type MAACConfig, type MARLHFConfig } from "../../config/index.js";
import type { RolloutEnvironment } from "../../rollout/tree.js";
import type { Item } from "../../rollout/types.js";
import type { Actors } from "../actors.js";
import { AgentResolutionError, type ModelSource } from "../agents.js";
import type { ComponentRegistry } from "../components.js";
import { refuseCriticSources, registerCritics, resolveCentralCriticSource, resolveSeparateCriticSources } from "../actor-critic/critics.js";
import { IACTrainer } from "../actor-critic/iac.js";
import { MAACTrainer } from "../actor-critic/maac.js";

export type ActorCriticBackend = IACTrainer | MAACTrainer;

/** Whether MARLHF's RL phase is an actor-critic trainer. */
export function isActorCriticBackend(config: Pick<MARLHFConfig, "rlAlgorithm">): config is MARLHFConfig & { rlAlgorithm: "iac" | "maac" } {
  return config.rlAlgorithm === "iac" || config.rlAlgorithm === "maac";
}

/** What setUpActors must add to MARLHF's actors for the back-end: IAC's value heads on the actors and copied references. */
export function actorExtras(config: MARLHFConfig): { referencesAsCopies?: boolean; valueHeads?: { hiddenDim: number | null } | null } {
  if (config.rlAlgorithm !== "iac") return {};
  return { referencesAsCopies: true, valueHeads: config.useSeparateCritic ? null : { hiddenDim: config.valueHeadHiddenDim } };
}

/**
 * The MARLHF fields an actor-critic config shares, for `numAgents` actors placed on agentDevices. Data parallel is
 * the host's (the hosted trainer runs as "none" in each rank). Critic devices under "mp": criticDevices, else the
 * agents' devices for IAC and agent 0's one device for MAAC, whose centralized critic takes a single device (§10.16).
 */
function sharedFields(c: MARLHFConfig, numAgents: number, criticDevicesUnderMp: DeviceSpec) {
  return {
    numGenerations: c.numGenerations,
    maxNewTokens: c.maxNewTokens,
    temperature: c.temperature,
    topP: c.topP,
    topK: c.topK,
    parallelTraining: c.parallelTraining === "mp" ? ("mp" as const) : ("none" as const),
    agentDevices: c.agentDevices,
    evalInterval: c.evalInterval,
    evalNumSamples: c.evalNumSamples,
    evalBatchSize: c.evalBatchSize,
    referenceKlEnabled: c.referenceKlEnabled,
    referenceKlCoef: c.referenceKlCoef,
    referenceDevices: c.referenceDevices,
    seed: c.seed,
    dtype: c.dtype,
    maxGradNorm: c.maxGradNorm,
    weightDecay: c.weightDecay,
    adamBetas: c.adamBetas,
    adamEps: c.adamEps,
    numTrainEpochs: c.numTrainEpochs,
    agentLearningRate: c.agentLearningRate,
    criticLearningRate: c.criticLearningRate ?? c.agentLearningRate,
    loggingSteps: c.loggingSteps,
    numAgents,
    numTurns: c.numTurns,
    discount: c.discount,
    earlyTerminationThreshold: c.earlyTerminationThreshold,
    externalPromptPassthrough: c.externalPromptPassthrough,
    rolloutBufferSize: c.rolloutBufferSize,
    trainBatchSize: c.trainBatchSize,
    valueLossCoef: c.valueLossCoef,
    advantageNormalization: c.advantageNormalization,
    criticType: c.criticType,
    criticDevices: c.parallelTraining === "mp" ? criticDevicesUnderMp : c.criticDevices,
  };
}

export function iacConfigOf(c: MARLHFConfig, numAgents: number, agentDevices: readonly string[]): IACConfig {
  return iacConfig({
    ...sharedFields(c, numAgents, c.criticDevices ?? [...agentDevices]),
    useSeparateCritic: c.useSeparateCritic,
    valueClipRange: c.valueClipRange,
    criticValueHeadHiddenDim: c.criticValueHeadHiddenDim,
    valueHeadHiddenDim: c.valueHeadHiddenDim,
  });
}

export function maacConfigOf(c: MARLHFConfig, numAgents: number, agentDevices: readonly string[]): MAACConfig {
  const given = c.criticDevices;
  if (Array.isArray(given) && given.length > 1) {
    throw new RangeError(`MARLHF: criticDevices must name one device with rlAlgorithm "maac" (its one centralized critic), got ${given.length}: ${given.join(", ")}`);
  }
  return maacConfig(sharedFields(c, numAgents, given ?? agentDevices[0]));
}

export interface CriticOptions {
  criticModel?: ModelSource | null;
  critics?: ModelSource[] | null;
}

const sourceGiven = (options: CriticOptions) => (options.criticModel ?? null) !== null || (options.critics ?? null) !== null;

/** The critics' sources: critics or criticModel, else criticModelName, else the agents' model ids (one per critic). */
function criticSources(config: MARLHFConfig, options: CriticOptions, actorSources: readonly ModelSource[], count: number): ModelSource[] {
  if (sourceGiven(options)) return config.rlAlgorithm === "maac" ? [resolveCentralCriticSource(options)] : resolveSeparateCriticSources(options, count);
  if (config.criticModelName !== null) return Array(count).fill(config.criticModelName);
  if (actorSources.some((s) => typeof s !== "string")) {
    throw new AgentResolutionError(`MARLHF: rlAlgorithm "${config.rlAlgorithm}" needs its critics' source: set criticModelName, criticModel or critics (the actors are loaded model objects, with no model id to load critics from)`);
  }
  return actorSources.slice(0, count);
}

export interface BackendSetUp {
  config: MARLHFConfig;
  actors: Pick<Actors, "agents" | "sources" | "placement">;
  /** Where the hosted trainer's rollouts run: MARLHF's reward-model environment. */
  environment: RolloutEnvironment;
  critics: CriticOptions;
  trainDataset: Item[];
  evalDataset: Item[] | null;
  outputDir: string;
  quiet: boolean;
}

/**
 * Builds the IAC or MAAC trainer around MARLHF's actors and registers its critics in `registry` (IAC: agent_i/critic,
 * exported there; MAAC: critic). The hosted trainer itself registers nothing and is never closed: MARLHF's registry
 * frees what it loaded.
 */
export async function buildActorCriticBackend(setUp: BackendSetUp, registry: ComponentRegistry): Promise<ActorCriticBackend> {
  const { config: c, actors } = setUp;
  const n = actors.agents.length;
  const environment = { ...setUp.environment };
  const options = { rewardFunc: environment.rewardFunc, trainDataset: setUp.trainDataset, evalDataset: setUp.evalDataset, outputDir: setUp.outputDir, quiet: setUp.quiet };
  const hosted = { agents: actors.agents, placement: actors.placement, environment };
  if (c.rlAlgorithm === "iac") {
    const iac = iacConfigOf(c, n, actors.placement.agentDevices);
    const sources = iac.useSeparateCritic ? criticSources(c, setUp.critics, actors.sources, n) : (refuseCriticSources(setUp.critics), []);
    const trainer = await IACTrainer.around(iac, hosted, sources, options);
    registerCritics(registry, trainer.critics, (i) => `agent_${i}/critic`, (i) => `agent_${i}/critic`);
    return trainer;
  }
  const maac = maacConfigOf(c, n, actors.placement.agentDevices);
  const [source] = criticSources(c, setUp.critics, actors.sources, 1);
  const trainer = await MAACTrainer.around(maac, hosted, source, c.criticValueHeadHiddenDim, options);
  registerCritics(registry, trainer.critics, () => "critic", () => "critic");
  return trainer;
}
