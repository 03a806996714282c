// The trainer registry: one definition per algorithm — the section a config file names it by, its class, its config
// builder and field specs, how a config file's run builds it, which critics it takes — registered once, the way
// tasks are (tasks/registry.ts). The CLI, config files, docs generator, bench and test tables read it;
// builtins.ts registers the built-in trainers. An entry with an RL back-end (rl-back-end.ts) is also a choice of
// MARLHF's rlAlgorithm. docs/adding-a-trainer.md walks through adding one.
import type { ConfigSource } from "../config/magrpo.js";
import { closestField, ConfigError, type FieldSpec } from "../config/fields.js";
import type { WandbConfig } from "../logging/wandb.js";
import type { ExternalTransition, Formatter, Item, RewardFunction, RewardProcessor } from "../rollout/types.js";
import type { LifecycleConfig, Trainer } from "./lifecycle/trainer.js";
import type { RLBackEnd } from "./rl-back-end.js";

/** What a config file's run hands every trainer's create (docs/cli.md): the agents' model directories and the task. */
export interface FileRun {
  /** One model directory per actor (one under centralized collaboration). */
  agents: string[];
  /** The task's shared reward. */
  rewardFunc: RewardFunction;
  /** The file's reward_processor (scale, then shift), when enabled. */
  rewardProcessor: RewardProcessor | undefined;
  /** The task's prompt formatters, one per agent. */
  formatters: Formatter[];
  /** The task's environment between turns. */
  externalTransition: ExternalTransition | null;
  /** The items trained on. */
  trainDataset: Item[];
  /** The items evaluated on; null: none. */
  evalDataset: Item[] | null;
  /** output.base_dir: metrics, checkpoints and the final model. */
  outputDir: string;
  /** No progress bar or console lines. */
  quiet: boolean;
  /** The file's wandb section; null: no W&B run. */
  wandbConfig: WandbConfig | null;
}

/** The critic sources a config file names (critic_model.name, or a critics list), resolved to model directories. */
export interface FileCritics {
  /** critic_model.name: every critic's model. */
  criticModel: string | null;
  /** One critic model per agent (MAAC: one). */
  critics: string[] | null;
}

/** Which critics a trainer takes from a config file. */
export interface CriticNeeds<C> {
  /** With the trainer's config: whether the file must name a critic source (critic_model or critics). */
  required(config: C): boolean;
}

/** One algorithm, as the registry holds it. C: its built config. */
export interface TrainerDefinition<C extends LifecycleConfig = LifecycleConfig> {
  /** The config file's section that selects it (snake_case, e.g. "magrpo"). */
  readonly section: string;
  /** The trainer class; its name starts the CLI's run line. */
  readonly trainer: {
    /** The class name. */
    readonly name: string;
    /** What its instances are: a trainer of this config. */
    readonly prototype: Trainer<C>;
  };
  /** The built config's type name, as its doc page's generated field table names it (e.g. "MAGRPOConfig"). */
  readonly configName: string;
  /** The interface whose doc comments describe the fields, when not configName's own (e.g. MAAC's: ActorCriticConfig). */
  readonly documentedOn?: string;
  /** The config's field specs: names, defaults and accepted values (the docs' field tables). */
  readonly fields: Readonly<Record<string, FieldSpec<unknown>>>;
  /** Builds the config from camelCase or snake_case fields; errors name `options.source` and the field. */
  config(input: Record<string, unknown>, options: ConfigSource): C;
  /** Builds the trainer of a config file's run, from its built config and critic sources. */
  create(run: FileRun, config: C, critics: FileCritics): Promise<Trainer<C>>;
  /** Present when the trainer can take critics from a config file (critic_model, critics). */
  readonly critics?: CriticNeeds<C>;
  /** Whether the config trains one actor for every role (the file's one model then loads once). */
  centralized?(config: C): boolean;
  /** Present when its learner can be MARLHF's RL phase (rlAlgorithm: this section). */
  readonly rlBackEnd?: RLBackEnd;
  /** Another trainer's section that selects this one when `when` holds of its body (magrpo with collaboration_mode centralized). */
  readonly selectedBy?: {
    /** The other trainer's section. */
    readonly section: string;
    /** Whether a section's body (its fields as the file gives them) selects this trainer. */
    when(body: Readonly<Record<string, unknown>>): boolean;
  };
}

const registry = new Map<string, TrainerDefinition>();

/** Adds a trainer under its section; a second trainer under the same section is a programming error. */
export function registerTrainer<C extends LifecycleConfig>(definition: TrainerDefinition<C>): void {
  if (registry.has(definition.section)) throw new Error(`trainer section "${definition.section}" is already registered`);
  registry.set(definition.section, definition as unknown as TrainerDefinition);
}

/** Every registered trainer, in the order registered. */
export function trainerDefinitions(): TrainerDefinition[] {
  return [...registry.values()];
}

/** The sections of the registered trainers, in the order registered. */
export function trainerSections(): string[] {
  return [...registry.keys()];
}

/** The trainer a config file's `section` selects; an unknown section is an error listing the known ones. */
export function trainerDefinition(section: string): TrainerDefinition {
  const definition = registry.get(section);
  if (definition === undefined) {
    const suggestion = closestField(section, trainerSections());
    throw new Error(`unknown trainer "${section}"${suggestion ? ` (did you mean "${suggestion}"?)` : ""}; known trainers: ${trainerSections().join(", ")}`);
  }
  return definition;
}

/** The sections of the registered trainers whose learner can be MARLHF's RL phase: the values of rlAlgorithm. */
export function rlAlgorithms(): string[] {
  return trainerDefinitions().flatMap((definition) => (definition.rlBackEnd ? [definition.section] : []));
}

/** The RL back-end rlAlgorithm names; another name is a ConfigError naming `configName`.rlAlgorithm and the choices. */
export function rlBackEnd(rlAlgorithm: string, configName: string, options: ConfigSource = {}): RLBackEnd {
  const backEnd = registry.get(rlAlgorithm)?.rlBackEnd;
  if (backEnd !== undefined) return backEnd;
  const prefix = options.source === undefined ? "" : `${options.source}: `;
  throw new ConfigError(`${prefix}${configName}.rlAlgorithm must be one of ${rlAlgorithms().map((name) => `"${name}"`).join(", ")} (a trainer with an RL back-end), got ${JSON.stringify(rlAlgorithm)}`, "rlAlgorithm");
}
