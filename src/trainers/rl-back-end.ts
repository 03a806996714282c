// MARLHF's RL phase as a plug (COMLRL-SPEC §6.4): what a trainer's registry entry offers to run its learner over
// MARLHF's actors — rollouts scored by the reward model, inside MARLHF's host — and what the phase hands it. The
// learner's config comes from the learner's own builder fed the fields MARLHF's config shares with it by name (a
// field MARLHF lacks takes the learner's default). Critics come from the first source given of critics,
// criticModel, criticModelName or the first agent's model id.
import type { MARLHFConfig } from "../config/preference.js";
import type { RolloutEnvironment } from "../rollout/tree.js";
import type { Item } from "../rollout/types.js";
import type { ComponentRegistry } from "../components/registry.js";
import type { ActorExtras, Actors } from "./actors.js";
import { AgentResolutionError, type ModelSource } from "./agents.js";
import type { RolloutLearner, RolloutLearnerConfig, RolloutSample } from "./learner.js";
import type { StageHost } from "./lifecycle/stage-host.js";
import type { MAGRPOTrainerOptions } from "./reinforce/magrpo.js";


/** MARLHF's config as MARLHF and MARLHFIter have it (their pair selection aside): what the reward model and the RL phase read. */
export type RlhfConfig = Omit<MARLHFConfig, "pairSelection">;

/** MARLHF's critic sources for an actor-critic RL phase (its create()'s criticModel / critics). */
export interface RLPhaseCritics {
  /** Every critic's model. */
  criticModel?: ModelSource | null;
  /** One critic model per agent (MAAC: one). */
  critics?: ModelSource[] | null;
}

/** What MARLHF's RL phase hands the back-end that builds its learner. */
export interface RLPhaseSetUp {
  /** MARLHF's config, the learner's read from it. */
  config: RlhfConfig;
  /** MARLHF's actors, loaded with what the back-end asked of them. */
  actors: Pick<Actors, "agents" | "sources" | "placement">;
  /** Where the learner's rollouts run: MARLHF's reward-model environment. */
  environment: RolloutEnvironment;
  /** The critic sources MARLHF was given. */
  critics: RLPhaseCritics;
  /** MARLHF's task options the learner reads. */
  options: Pick<MAGRPOTrainerOptions, "rewardBatching" | "sampleLogInterval"> & {
    /** The items the RL phase trains on. */
    trainDataset: Item[];
    /** The items evaluated on (task reward); null: none. */
    evalDataset: Item[] | null;
  };
  /** The trainer the learner runs inside; its registry takes the critics. */
  host: StageHost;
  /** The host's component registry, where the back-end registers its critics. */
  registry: ComponentRegistry;
}

/** A learner MARLHF's RL phase can run. */
export type RLPhaseLearner = RolloutLearner<RolloutSample, unknown, RolloutSample, RolloutLearnerConfig>;


/** How a trainer's learner runs as MARLHF's RL phase: its registry entry's `rlBackEnd`. */
export interface RLBackEnd {
  /** Whether its learner has critics: MARLHF's criticModel / critics are for these back-ends only. */
  readonly critics: boolean;
  /** What it asks of MARLHF's actors as they load and declares beside them (its critics), as its standalone trainer does. */
  actorExtras(config: RlhfConfig, critics: RLPhaseCritics): ActorExtras;
  /**
   * Builds the learner over MARLHF's actors and registers its critics in setUp.registry. The learner registers
   * nothing else and is never closed on its own: the host's registry frees what it loaded.
   */
  learner(setUp: RLPhaseSetUp): Promise<RLPhaseLearner>;
}

/**
 * The learner's config input: every field of `fields` that MARLHF's config has, `derived` over them. Data parallel
 * is the host's, so the learner runs as "none" (or "mp") in each rank.
 */
export function learnerConfigInput(fields: Readonly<Record<string, unknown>>, c: RlhfConfig, derived: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const values: Readonly<Record<string, unknown>> = c;
  const shared = Object.keys(fields).filter((key) => key in values).map((key) => [key, values[key]]);
  return { ...Object.fromEntries(shared), ...derived, parallelTraining: c.parallelTraining === "mp" ? "mp" : "none" };
}

/** Whether MARLHF was given a critic source of its own (criticModel or critics). */
export function criticSourceGiven(critics: RLPhaseCritics): boolean {
  return (critics.criticModel ?? null) !== null || (critics.critics ?? null) !== null;
}

/**
 * The critics' sources when MARLHF was given none: criticModelName, else the first actor's model id for every critic
 * (as CoMLRL does, so heterogeneous actors still get critics of one size).
 */
export function defaultCriticSources(config: RlhfConfig, actorSources: readonly ModelSource[], count: number): ModelSource[] {
  if (config.criticModelName !== null) return Array<ModelSource>(count).fill(config.criticModelName);
  const [first] = actorSources;
  if (typeof first !== "string") {
    throw new AgentResolutionError(`MARLHF: rlAlgorithm "${config.rlAlgorithm}" needs its critics' source: set criticModelName, criticModel or critics (the first actor is a loaded model object, with no model id to load critics from)`);
  }
  return Array<ModelSource>(count).fill(first);
}
