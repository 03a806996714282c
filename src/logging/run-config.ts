// The W&B run config as CoMLRL 1.4.3's trainers log it (each trainer's _init_wandb): its snake_case keys with its
// value formats (null for None, device lists as lists), computed from our config, so that dashboards, sweeps and
// run comparisons built on CoMLRL's keys line up. What only this package has — the trainer's own name and our whole
// camelCase config (seed, dtype, sampling, …) — goes under the one key OURS_RUN_CONFIG_KEY beside them.
// tests/golden/comlrl-wandb.test.ts checks every trainer against what the real library hands wandb.init.
import type { ActorCriticConfig, IACConfig } from "../config/actor-critic.js";
import type { DeviceSpec } from "../config/devices.js";

export const OURS_RUN_CONFIG_KEY = "comlrl_ts";

interface ReferenceKlFields {
  readonly referenceKlEnabled: boolean;
  readonly referenceKlCoef: number;
  readonly referenceDevices: DeviceSpec | null;
}

function referenceKl(c: ReferenceKlFields): Record<string, unknown> {
  return { reference_kl_enabled: c.referenceKlEnabled, reference_kl_coef: c.referenceKlCoef, reference_devices: c.referenceDevices };
}

/** A model source as trainers take it: a hub id or path, or a loaded model. */
type ModelSourceLike = string | { readonly config: { readonly modelType: string } };

/**
 * CoMLRL's model_name: the first actor's source — a hub id or path as given, or for a loaded model its model_type
 * (CoMLRL's infer_model_name reads a transformers model's config.model_type first).
 */
export function comlrlModelName(options: { agentModel?: ModelSourceLike | null; agents?: readonly ModelSourceLike[] | null }): string | null {
  const first = options.agents?.[0] ?? options.agentModel ?? null;
  return first === null || typeof first === "string" ? first : first.config.modelType;
}

/** The fields of a config the MAGRPO family logs (MADPO, MARLHF and the iterative trainers inherit its _init_wandb). */
export interface MagrpoFamilyFields extends ReferenceKlFields {
  readonly numTurns: number;
  readonly advantageMode: string;
  readonly advantageNormalization: boolean;
  readonly agentLearningRate: number;
  readonly numTrainEpochs: number;
  readonly maxNewTokens: number;
  /** MADPO's config has none, as CoMLRL's has none, which then logs no num_generations. */
  readonly numGenerations?: number;
}

export interface MagrpoFamilyRun {
  /** CoMLRL's algorithm_name. */
  algorithm: string;
  modelName: string | null;
  /** The trainer's actor models (one under centralized collaboration). */
  numAgents: number;
  config: MagrpoFamilyFields;
}

export function magrpoFamilyRunConfig({ algorithm, modelName, numAgents, config: c }: MagrpoFamilyRun): Record<string, unknown> {
  return {
    model_name: modelName,
    num_agents: numAgents,
    num_turns: c.numTurns,
    algorithm,
    advantage_mode: c.advantageMode,
    advantage_normalization: c.advantageNormalization,
    ...referenceKl(c),
    agent_learning_rate: c.agentLearningRate,
    num_train_epochs: c.numTrainEpochs,
    max_new_tokens: c.maxNewTokens,
    ...(c.numGenerations === undefined ? {} : { num_generations: c.numGenerations }),
  };
}

/** What centralized collaboration adds; `comparator`: the config has a comparator generation mode (the iterative trainers). */
export function centralizedRunConfig(numRoles: number, numActorModels: number, comparator: boolean): Record<string, unknown> {
  return {
    collaboration_mode: "centralized",
    num_roles: numRoles,
    num_actor_models: numActorModels,
    ...(comparator ? { comparator_generation_mode: "centralized" } : {}),
  };
}

export function iacRunConfig(c: IACConfig): Record<string, unknown> {
  return {
    algorithm: "IAC",
    num_agents: c.numAgents,
    num_turns: c.numTurns,
    agent_learning_rate: c.agentLearningRate,
    critic_learning_rate: c.criticLearningRate,
    rollout_buffer_size: c.rolloutBufferSize,
    train_batch_size: c.trainBatchSize,
    value_loss_coef: c.valueLossCoef,
    max_new_tokens: c.maxNewTokens,
    use_separate_critic: c.useSeparateCritic,
    critic_type: c.criticType,
    ...referenceKl(c),
  };
}

export function maacRunConfig(c: ActorCriticConfig): Record<string, unknown> {
  return {
    algorithm: "MAAC",
    num_agents: c.numAgents,
    num_turns: c.numTurns,
    agent_learning_rate: c.agentLearningRate,
    critic_learning_rate: c.criticLearningRate,
    max_new_tokens: c.maxNewTokens,
    num_generations: c.numGenerations,
    critic_type: c.criticType,
    ...referenceKl(c),
  };
}
