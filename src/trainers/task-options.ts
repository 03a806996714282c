// The options every trainer takes to describe its agents and its task: where the actors come from, the shared
// reward, formatters, transitions and data. Each trainer adds its own algorithm's options beside these.
import type { ComlrlTokenizer } from "../models/tokenizer.js";
import type { ExternalTransition, Formatter, Item, RewardFunction, RewardProcessor } from "../rollout/types.js";
import type { ModelSource } from "./agents.js";
import type { EvaluationHooks } from "./evaluation.js";
import type { GenerationKwargs } from "./generation-kwargs.js";
import { LIFECYCLE_OPTION_KEYS, type LifecycleOptions } from "./lifecycle/trainer.js";

/** The options every trainer's create() takes: the agents, the task (reward, formatters, transition, data) and the config (docs/rewards-and-environments.md). */
export interface TaskOptions<ConfigInput> extends LifecycleOptions, EvaluationHooks {
  /** The base model of every agent: a hub id, a local Hugging Face directory, or a loaded CausalLM (then `tokenizer` too); with numAgents. */
  agentModel?: ModelSource | null;
  /** One model source per agent (ids, directories or loaded models; one model twice shares its weights), instead of agentModel. */
  agents?: ModelSource[] | null;
  /** The agent count; must agree with config.numAgents when both are given, and follows `agents` otherwise. */
  numAgents?: number;
  /** The agents' tokenizer (one for all, or one per agent); loaded from the model when the agents are ids. */
  tokenizer?: ComlrlTokenizer | ComlrlTokenizer[] | null;
  /** The shared reward of each joint action. */
  rewardFunc: RewardFunction;
  /** Maps every reward before training (RewardProcessors); default identity. */
  rewardProcessor?: RewardProcessor;
  /** One prompt formatter per agent, or one for all; default: item.prompt. */
  formatters?: Formatter | Formatter[] | null;
  /** The environment between turns (numTurns > 1). */
  externalTransition?: ExternalTransition | null;
  /** The items trained on. */
  trainDataset: Item[];
  /** The items evaluated on (default: the train dataset). */
  evalDataset?: Item[] | null;
  /** The trainer's config fields (camelCase or snake_case), or a built config; see the trainer's page for every field. */
  config?: ConfigInput;
  /** Hugging Face generate() arguments that override the sampling settings in training rollouts: CoMLRL's train(**kwargs). */
  generationKwargs?: GenerationKwargs | null;
}

export const TASK_OPTION_KEYS = {
  ...LIFECYCLE_OPTION_KEYS,
  agentModel: true,
  agents: true,
  numAgents: true,
  tokenizer: true,
  rewardFunc: true,
  rewardProcessor: true,
  formatters: true,
  externalTransition: true,
  trainDataset: true,
  evalDataset: true,
  config: true,
  evalLogger: true,
  evalAggregator: true,
  generationKwargs: true,
} as const satisfies Record<keyof TaskOptions<unknown>, true>;
