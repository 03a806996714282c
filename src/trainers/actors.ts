// Setting up a trainer's actors and its rollout environment from TaskOptions (COMLRL-SPEC §5): the task checks, the
// model sources and tokenizers, placement on devices, loading with optimizers and references, and the environment
// the rollout tree runs in. Every trainer whose agents are causal LMs starts here.
import path from "node:path";
import { planPlacement, type Placement, type PlacementConfig, type RuntimeConfig, type SamplingConfig } from "../config/index.js";
import { localRankOf } from "../distributed/environment.js";
import { runtimeInfo } from "../runtime.js";
import { buildFormatters, checkItems } from "../rollout/formatters.js";
import { RewardProcessors, withRewardTimeout } from "../rollout/rewards.js";
import type { RolloutEnvironment } from "../rollout/tree.js";
import { buildAgents, resolveModelSources, resolveTokenizers, type Agent, type BuildAgentsOptions, type ModelSource } from "./agents.js";
import { withGenerationKwargs } from "./generation-kwargs.js";
import { cpuLanesFor, placeOnAgentLane } from "./lanes.js";
import { adamW, checkOneOf } from "./options.js";
import type { TaskOptions } from "./task-options.js";

/** The config fields actor setup reads. */
export interface ActorConfig extends PlacementConfig, SamplingConfig, RuntimeConfig {
  readonly numTurns: number;
  readonly agentLearningRate: number;
  readonly referenceKlEnabled: boolean;
}

export interface Actors {
  agents: Agent[];
  sources: ModelSource[];
  placement: Placement;
  environment: RolloutEnvironment;
  /** CPU agent lanes (lanes.ts): agent i's models run on lane i mod lanes; 1: none. */
  lanes: number;
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

export async function setUpActors(
  options: TaskOptions<unknown>,
  config: ActorConfig,
  extra: Pick<BuildAgentsOptions, "referencesAsCopies" | "valueHeads"> & {
    /** The agents' updates take turns (MAAC steps its one critic in each): no CPU agent lanes (lanes.ts). */
    updatesInTurn?: boolean;
  } = {},
): Promise<Actors> {
  const n = config.numAgents;
  const evalSampling = {
    maxNewTokens: config.maxNewTokens, temperature: config.temperature, topP: config.topP, topK: config.topK, repetitionPenalty: null,
    maxPromptTokens: config.maxPromptTokens, promptOverflow: config.promptOverflow,
  };
  const sampling = withGenerationKwargs(evalSampling, options.generationKwargs);
  const sources = resolveModelSources(options.agentModel, options.agents, n);
  const tokenizers = await resolveTokenizers(options.agentModel, options.agents, options.tokenizer, sources);
  const info = runtimeInfo();
  const localRank = config.parallelTraining === "ddp" ? localRankOf(options.distributed) : 0;
  const placement = planPlacement(config, { cudaAvailable: info.cudaAvailable, deviceCount: info.cudaDeviceCount }, n, localRank);
  const agents = await buildAgents({
    sources,
    tokenizers,
    devices: placement.agentDevices,
    referenceDevices: config.referenceKlEnabled ? placement.referenceDevices : null,
    dtype: config.dtype,
    seed: config.seed,
    optimizer: adamW(config, config.agentLearningRate),
    sampling,
    evalSampling,
    referencesAsCopies: extra.referencesAsCopies,
    valueHeads: extra.valueHeads,
  });
  if (config.gradientCheckpointing) for (const agent of agents) agent.model.setGradientCheckpointing(true);
  // Agents whose updates take turns would overlap only their sampling, and lose the second intra-op thread in every
  // update (docs/performance.md, "CPU agent lanes").
  const lanes = extra.updatesInTurn ? 1 : cpuLanesFor(config.parallelTraining, [...placement.agentDevices, ...(config.referenceKlEnabled ? placement.referenceDevices : [])], sources);
  agents.forEach((agent) => placeOnAgentLane(lanes, agent.index, [agent.model, agent.reference]));
  const environment: RolloutEnvironment = {
    policies: agents,
    formatters: buildFormatters(options.formatters, n),
    rewardFunc: withRewardTimeout(options.rewardFunc, config.rewardTimeoutSeconds),
    rewardProcessor: options.rewardProcessor ?? RewardProcessors.identity(),
    externalTransition: options.externalTransition ?? null,
    concurrent: placement.concurrent || lanes > 1,
  };
  return { agents, sources, placement, environment, lanes };
}

/** runs/<algorithm>-<timestamp> unless the user chose a directory. */
export function defaultOutputDir(trainerName: string, outputDir: string | undefined): string {
  return outputDir ?? path.join("runs", `${trainerName.replace(/Trainer$/, "").toLowerCase()}-${new Date().toISOString().replace(/[:.]/g, "-")}`);
}
