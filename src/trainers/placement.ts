// Where every module of a trainer goes (COMLRL-SPEC §5.4), decided in one place before anything loads: the actors
// and their references, the critics, the reward model, and whether the agents update in turn or on CPU agent lanes
// of their own (lanes.ts). The algorithm declares what it loads (ModuleDeclaration); the config says where; the
// machine's facts are passed in, so the plan is pure and tested without libtorch. The memory check estimates from
// the same plan (memory-check.ts) and the loaders put each module where it says.
import type { CudaFacts, DeviceSpec } from "../config/devices.js";
import { ConfigError } from "../config/fields.js";
import { forRank, isAuto, rankDevice, resolveDevices, resolveSingleDevice } from "../config/devices.js";
import type { ModelSource } from "../models/causal-lm.js";
import { planCpuLanes, sharesModels } from "./lanes.js";

/**
 * What an algorithm loads beside its actors. MAGRPO's family: no critics, no reward model. IAC: a critic per agent
 * (or none with the value heads on the actors). MAAC: one centralized critic. MARLHF: a reward model, and its RL
 * phase's critics.
 */
export interface ModuleDeclaration {
  /**
   * "per-agent": one critic per agent, stepped in its agent's update; "centralized": one critic stepped in every
   * agent's update, so the agents update in turn; "none".
   */
  readonly critics: "per-agent" | "centralized" | "none";
  /** The critics' sources, one per critic: one model object given for two agents is one module, whose updates take turns. */
  readonly criticSources: readonly ModelSource[];
  /** A reward model trained beside the actors; null: none. */
  readonly rewardModel: RewardModelDeclaration | null;
  /** Whether frozen reference copies of the actors are loaded (the reference KL term). */
  readonly references: boolean;
}

/** A reward model as its algorithm declares it. */
export interface RewardModelDeclaration {
  /** Where its backbone loads from; null when the trainer cannot tell yet (its loader reports why). */
  readonly source: ModelSource | null;
  /** Whether the backbone trains (false: only the score head does). */
  readonly trainsBackbone: boolean;
  /** Its device: null means the trainer's (the first actor's). */
  readonly device: string | null;
  /** Whether the device was given rather than defaulted: a defaulted CUDA device falls back where there is no CUDA. */
  readonly deviceGiven: boolean;
}

/** The declaration of an algorithm that loads actors only (and their references when the KL term is on). */
export function actorsOnly(config: { readonly referenceKlEnabled: boolean }): ModuleDeclaration {
  return { critics: "none", criticSources: [], rewardModel: null, references: config.referenceKlEnabled };
}

/** The parts of a trainer config that decide placement. */
export interface PlacementConfig {
  /** "none": one device for all actors; "mp": one per actor; "ddp": "none" in each data-parallel process. */
  readonly parallelTraining: "none" | "mp" | "ddp";
  /** The actors' devices; null or "auto" places them automatically. */
  readonly agentDevices: DeviceSpec | null;
  /** The frozen references' devices; null = their actors'. */
  readonly referenceDevices: DeviceSpec | null;
  /** The critics' devices under "mp" (null: the agents'); elsewhere the critics share the agents' device. */
  readonly criticDevices?: DeviceSpec | null;
}

/** What the machine offers: CUDA, and the intra-op threads that decide CPU agent lanes. */
export interface MachineFacts extends CudaFacts {
  /** Intra-op threads (runtimeInfo().numThreads). */
  readonly threads: number;
  /** Where COMLRL_CPU_LANES is read (default: process.env). */
  readonly env?: Record<string, string | undefined>;
}

/** What is placed: the declaration, the actors' sources, and this process's data-parallel local rank. */
export interface PlacementRequest {
  /** What the algorithm loads beside its actors. */
  readonly modules: ModuleDeclaration;
  /** One source per actor placed (centralized collaboration: its one joint actor); one object given twice is shared. */
  readonly actors: readonly ModelSource[];
  /** The rank's local index under "ddp" (ignored otherwise). */
  readonly localRank: number;
}

/** Where each module of a trainer goes and how its agents run, as planPlacement decides. */
export interface Placement {
  /** One device per actor. */
  readonly agentDevices: string[];
  /** One device per reference model (loaded when the declaration has references). */
  readonly referenceDevices: string[];
  /** One device per critic ([] without critics). */
  readonly criticDevices: string[];
  /** Where the reward model goes; null without one. */
  readonly rewardModel: RewardModelPlace | null;
  /** Whether the agents' updates take turns (a centralized critic, or one critic model shared by agents). */
  readonly updatesInTurn: boolean;
  /** CPU agent lanes: agent i's CPU models run on lane i mod lanes (1: none, see lanes.ts). */
  readonly lanes: number;
  /** Whether per-agent generation (and, unless updatesInTurn, updates) may run at the same time. */
  readonly concurrent: boolean;
}

/** The reward model's device, and what its trainer prints about how it was chosen. */
export interface RewardModelPlace {
  /** The device it loads on. */
  readonly device: string;
  /** The fallback of a defaulted CUDA device to the trainer's device on a machine without CUDA; null otherwise. */
  readonly note: string | null;
}

/**
 * Where a trainer puts its modules. Actors — "none": every actor on one device, the first of agentDevices. "mp": one
 * device per actor from agentDevices. "ddp": as "none" on each rank, auto and an index-less "cuda" meaning the rank's
 * own GPU (rankDevice of localRank; see forRank). References default to their actors' devices; an explicit
 * referenceDevices is honoured in every mode (a second GPU can hold the frozen copies even when actors share one).
 * Critics — under "mp" one per critic from criticDevices (default: the agents' devices, agent 0's for a centralized
 * critic); otherwise on the agents' one device. The reward model — see rewardModelPlace. Lanes — none when the
 * updates take turns (they would overlap only their sampling and lose the second intra-op thread in every update);
 * else planCpuLanes over the actors' and references' devices.
 */
export function planPlacement(config: PlacementConfig, machine: MachineFacts, request: PlacementRequest): Placement {
  const { modules, actors, localRank } = request;
  const ddp = config.parallelTraining === "ddp";
  const spec = (given: DeviceSpec | null, kind: string) => (ddp ? forRank(given, kind, localRank, machine) : given);
  const agentSpec = spec(config.agentDevices, "agentDevices");
  const single = (): string => (ddp && isAuto(agentSpec) ? rankDevice(localRank, machine) : resolveSingleDevice([agentSpec], machine, "agentDevices"));
  const agentDevices = config.parallelTraining === "mp" ? resolveDevices(agentSpec, actors.length, "agentDevices", machine) : Array<string>(actors.length).fill(single());
  const referenceSpec = spec(config.referenceDevices, "referenceDevices");
  const referenceDevices = referenceSpec === null ? [...agentDevices] : resolveDevices(referenceSpec, actors.length, "referenceDevices", machine);
  const criticDevices = criticPlaces(config, modules, agentDevices, machine);
  const updatesInTurn = modules.critics === "centralized" || (modules.critics === "per-agent" && sharesModels(modules.criticSources));
  const laneDevices = [...agentDevices, ...(modules.references ? referenceDevices : [])];
  const lanes = updatesInTurn ? 1 : planCpuLanes({ parallelTraining: config.parallelTraining, devices: laneDevices, sources: actors, threads: machine.threads }, machine.env);
  const onDistinctDevices = config.parallelTraining === "mp" && actors.length > 1 && new Set(agentDevices).size > 1;
  return {
    agentDevices,
    referenceDevices,
    criticDevices,
    rewardModel: modules.rewardModel && rewardModelPlace(modules.rewardModel, agentDevices[0]!, ddp ? localRank : null, machine),
    updatesInTurn,
    lanes,
    concurrent: onDistinctDevices || lanes > 1,
  };
}

function criticPlaces(config: PlacementConfig, modules: ModuleDeclaration, agentDevices: readonly string[], facts: CudaFacts): string[] {
  if (modules.critics === "none") return [];
  const count = modules.critics === "centralized" ? 1 : modules.criticSources.length;
  if (config.parallelTraining !== "mp") return Array<string>(count).fill(agentDevices[0]!);
  const given = config.criticDevices ?? null;
  if (modules.critics === "centralized" && Array.isArray(given) && given.length > 1) {
    throw new ConfigError(`criticDevices must name one device for the one centralized critic, got ${given.length}: ${given.join(", ")}`, "criticDevices");
  }
  return resolveDevices(given ?? agentDevices.slice(0, count), count, "criticDevices", facts);
}

/**
 * The reward model's device: null means the trainer's device. A defaulted CUDA device falls back to the trainer's
 * device where CUDA is unavailable (and says so through `note`), so that MARLHF's defaults run on a CPU-only machine;
 * under "ddp" (localRank given) it is each rank's own GPU, as auto placement is. A given device is read as every
 * device field is under "ddp" (forRank), and without CUDA a given CUDA device is an error naming the field.
 */
function rewardModelPlace(declared: RewardModelDeclaration, trainerDevice: string, localRank: number | null, facts: CudaFacts): RewardModelPlace {
  if (declared.device === null) return { device: trainerDevice, note: null };
  if (!declared.deviceGiven && !facts.cudaAvailable) {
    return { device: trainerDevice, note: `rewardModelDevice: CUDA is not available, so the default "${declared.device}" falls back to the trainer's device (${trainerDevice})` };
  }
  if (localRank === null) return { device: resolveSingleDevice([declared.device], facts, "rewardModelDevice"), note: null };
  if (!declared.deviceGiven) return { device: rankDevice(localRank, facts), note: null };
  return { device: resolveSingleDevice([forRank(declared.device, "rewardModelDevice", localRank, facts)], facts, "rewardModelDevice"), note: null };
}
