// Setting up a trainer's actors and its rollout environment from TaskOptions (COMLRL-SPEC §5): the task checks, the
// model sources and tokenizers, the placement plan of every module the algorithm declares (placement.ts) and the
// memory check on it, loading with optimizers and references, and the environment the rollout tree runs in. Every
// trainer whose agents are causal LMs starts here; what it loads beside them (critics, a reward model) goes where
// the returned placement says.
import path from "node:path";
import type { RuntimeConfig, SamplingConfig } from "../config/index.js";
import { localRankOf } from "../distributed/environment.js";
import { runtimeInfo } from "../runtime.js";
import { buildFormatters, checkItems } from "../rollout/formatters.js";
import { RewardProcessors, withRewardTimeout } from "../rollout/rewards.js";
import type { RolloutEnvironment } from "../rollout/tree.js";
import { buildAgents, resolveModelSources, resolveTokenizers, type Agent, type BuildAgentsOptions, type ModelSource } from "./agents.js";
import { withGenerationKwargs } from "./generation-kwargs.js";
import { placeOnAgentLane } from "./lanes.js";
import { checkRunMemory } from "./memory-check.js";
import { adamW, checkOneOf } from "./options.js";
import { actorsOnly, planPlacement, type ModuleDeclaration, type Placement, type PlacementConfig } from "./placement.js";
import type { TaskOptions } from "./task-options.js";

/** The config fields actor setup reads. */
export interface ActorConfig extends PlacementConfig, SamplingConfig, RuntimeConfig {
  /** Actors to load (the trainer's count; one in centralized collaboration). */
  readonly numAgents: number;
  readonly numTurns: number;
  readonly agentLearningRate: number;
  readonly referenceKlEnabled: boolean;
}

/** What an algorithm asks of actor setup beyond the actors themselves. */
export interface ActorExtras extends Pick<BuildAgentsOptions, "referencesAsCopies" | "valueHeads"> {
  /** What the algorithm loads beside the actors, given their sources (default: actorsOnly). */
  modules?: (actors: readonly ModelSource[]) => ModuleDeclaration;
}

export interface Actors {
  agents: Agent[];
  sources: ModelSource[];
  /** Where every declared module goes: the actors are there, the caller loads the rest where it says. */
  placement: Placement;
  environment: RolloutEnvironment;
}

/** The checks every task gets before anything is loaded. */
export function checkTask(options: TaskOptions<unknown>, config: { numTurns: number }, algorithm: string): void {
  if (typeof options.rewardFunc !== "function") throw new TypeError("rewardFunc must be a function.");
  checkOneOf(options.onNonFinite, ["skip", "error"], "onNonFinite");
  if (config.numTurns > 1 && !options.externalTransition) throw new Error(`Multi-turn ${algorithm} requires an externalTransition`);
  if (!Array.isArray(options.trainDataset) || options.trainDataset.length === 0) throw new TypeError("trainDataset must be a non-empty array of items");
  const defaultPrompts = options.formatters === null || options.formatters === undefined;
  checkItems(options.trainDataset, "trainDataset", defaultPrompts);
  if (Array.isArray(options.evalDataset)) checkItems(options.evalDataset, "evalDataset", defaultPrompts);
}

export async function setUpActors(options: TaskOptions<unknown>, config: ActorConfig, extra: ActorExtras = {}): Promise<Actors> {
  const n = config.numAgents;
  const evalSampling = {
    maxNewTokens: config.maxNewTokens, temperature: config.temperature, topP: config.topP, topK: config.topK, repetitionPenalty: null,
    maxPromptTokens: config.maxPromptTokens, promptOverflow: config.promptOverflow,
  };
  const sampling = withGenerationKwargs(evalSampling, options.generationKwargs);
  const sources = resolveModelSources(options.agentModel, options.agents, n);
  const modules = extra.modules?.(sources) ?? actorsOnly(config);
  const info = runtimeInfo();
  const localRank = config.parallelTraining === "ddp" ? localRankOf(options.distributed) : 0;
  const machine = { cudaAvailable: info.cudaAvailable, deviceCount: info.cudaDeviceCount, threads: info.numThreads };
  const placement = planPlacement(config, machine, { modules, actors: sources, localRank });
  await checkRunMemory(options, config, { actors: sources, modules, placement });
  const tokenizers = await resolveTokenizers(options.agentModel, options.agents, options.tokenizer, sources);
  const agents = await buildAgents({
    sources,
    tokenizers,
    devices: placement.agentDevices,
    referenceDevices: modules.references ? placement.referenceDevices : null,
    dtype: config.dtype,
    seed: config.seed,
    optimizer: adamW(config, config.agentLearningRate),
    sampling,
    evalSampling,
    referencesAsCopies: extra.referencesAsCopies,
    valueHeads: extra.valueHeads,
  });
  if (config.gradientCheckpointing) for (const agent of agents) agent.model.setGradientCheckpointing(true);
  agents.forEach((agent) => placeOnAgentLane(placement.lanes, agent.index, [agent.model, agent.reference]));
  const environment: RolloutEnvironment = {
    policies: agents,
    formatters: buildFormatters(options.formatters, n),
    rewardFunc: withRewardTimeout(options.rewardFunc, config.rewardTimeoutSeconds),
    rewardProcessor: options.rewardProcessor ?? RewardProcessors.identity(),
    externalTransition: options.externalTransition ?? null,
    concurrent: placement.concurrent,
  };
  return { agents, sources, placement, environment };
}

/** runs/<algorithm>-<timestamp> unless the user chose a directory. */
export function defaultOutputDir(trainerName: string, outputDir: string | undefined): string {
  return outputDir ?? path.join("runs", `${trainerName.replace(/Trainer$/, "").toLowerCase()}-${new Date().toISOString().replace(/[:.]/g, "-")}`);
}
