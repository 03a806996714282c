// The options every trainer takes to describe its agents and its task: where the actors come from, the shared
// reward, formatters, transitions and data. Each trainer adds its own algorithm's options beside these.
import type { ComlrlTokenizer } from "../models/tokenizer.js";
import type { ExternalTransition, Formatter, Item, RewardFunction, RewardProcessor } from "../rollout/types.js";
import type { ModelSource } from "./agents.js";
import type { EvaluationHooks } from "./evaluation.js";
import type { GenerationKwargs } from "./generation-kwargs.js";
import { LIFECYCLE_OPTION_KEYS, type LifecycleOptions } from "./lifecycle/trainer.js";

export interface TaskOptions<ConfigInput> extends LifecycleOptions, EvaluationHooks {
  agentModel?: ModelSource | null;
  agents?: ModelSource[] | null;
  /** The agent count; must agree with config.numAgents when both are given, and follows `agents` otherwise. */
  numAgents?: number;
  tokenizer?: ComlrlTokenizer | ComlrlTokenizer[] | null;
  rewardFunc: RewardFunction;
  rewardProcessor?: RewardProcessor;
  formatters?: Formatter | Formatter[] | null;
  externalTransition?: ExternalTransition | null;
  trainDataset: Item[];
  evalDataset?: Item[] | null;
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
