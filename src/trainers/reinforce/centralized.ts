// Centralized MAGRPO (COMLRL-SPEC §3.8): one joint policy writes every role's part in one response. An adapter builds
// the joint prompt from the roles' prompts and splits each response back into roles; the task reward scores the
// split roles. Internally this is single-actor MAGRPO over joint responses, scored on the full joint sequence.
import { centralizedMagrpoConfig, type CentralizedMAGRPOConfigInput, type MAGRPOConfig, type MAGRPOConfigInput } from "../../config/index.js";
import { centralizedRunConfig } from "../../logging/run-config.js";
import type { ComlrlTokenizer } from "../../models/tokenizer.js";
import { buildFormatters, formatPrompt } from "../../rollout/formatters.js";
import type { Formatter, Item, RewardFunction } from "../../rollout/types.js";
import { AgentResolutionError, type ModelSource } from "../agents.js";
import { checkOptionKeys } from "../options.js";
import type { TaskOptions } from "../task-options.js";
import { MAGRPO_OPTION_KEYS, MAGRPOTrainer, type MAGRPOTrainerOptions, type TrainerClass } from "./magrpo.js";

/** A joint completion the adapter cannot split into the roles. */
export class CentralizedParseError extends Error {
  /** Always "CentralizedParseError". */
  override name = "CentralizedParseError";
}

/** How one joint policy sees a decentralized task: one prompt from the roles' prompts, and its completion split back into roles. */
export interface CentralizedAdapter {
  /** The joint prompt from each role's formatted prompt. */
  buildPrompt(item: Item, rolePrompts: string[]): string;
  /** Exactly numRoles strings; throw CentralizedParseError when the text has no recognisable structure. */
  parseCompletion(text: string, item: Item, numRoles: number): string[];
}

/** Lists each role's prompt and asks for <agent_i> … </agent_i> sections, roles numbered from 0, in CoMLRL 1.4.3's words. */
export class TaggedAdapter implements CentralizedAdapter {
  buildPrompt(_item: Item, rolePrompts: string[]): string {
    const roles = rolePrompts.map((p, i) => `Agent ${i} original prompt:\n${p}`).join("\n\n");
    const sections = rolePrompts.map((_, i) => `<agent_${i}>\n...\n</agent_${i}>`).join("\n");
    return (
      `You are a centralized coordinator producing the separate outputs of ${rolePrompts.length} agents.\n\n` +
      "Each output must satisfy its corresponding original prompt. Keep the outputs separate;\n" +
      "do not merge them or add commentary outside the required tags.\n\n" +
      `${roles}\n\nReturn exactly one section for each agent in this format:\n${sections}\n`
    );
  }

  parseCompletion(text: string, _item: Item, numRoles: number): string[] {
    const sections = new Map<number, string>();
    for (const match of text.matchAll(/<\s*agent_(\d+)\s*>([\s\S]*?)<\s*\/\s*agent_\1\s*>/gi)) {
      if (!sections.has(Number(match[1]))) sections.set(Number(match[1]), match[2].trim());
    }
    if (sections.size === 0) throw new CentralizedParseError(`no <agent_i> sections in the response (${numRoles} roles expected)`);
    return Array.from({ length: numRoles }, (_, i) => sections.get(i) ?? "");
  }
}

/**
 * A decentralized task seen by one joint policy: the formatter builds the adapter's joint prompt from every role's
 * prompt, and the reward splits each joint response into roles (a response without structure gives every role "")
 * before calling the task reward, which sees one list per role exactly as in decentralized training.
 */
function centralizedTask(
  adapter: CentralizedAdapter,
  formatters: Formatter | Formatter[] | null | undefined,
  taskReward: RewardFunction,
  roles: number,
): { formatter: Formatter; rewardFunc: RewardFunction; splitRoles: (text: string, item: Item) => string[] } {
  const roleFormatters = buildFormatters(formatters, roles);
  const formatter: Formatter = (item) => {
    const prompt = adapter.buildPrompt(item, roleFormatters.map((f, role) => formatPrompt(f, item, role)));
    if (typeof prompt !== "string" || prompt.length === 0) throw new TypeError("the centralized adapter built an empty prompt");
    return prompt;
  };
  const splitRoles = (text: string, item: Item) => {
    try {
      return adapter.parseCompletion(text, item, roles);
    } catch (error) {
      if (error instanceof CentralizedParseError) return Array(roles).fill("");
      throw error;
    }
  };
  const rewardFunc: RewardFunction = (completions, context) => {
    const split = completions[0].map((text) => splitRoles(text, context.item));
    return taskReward(Array.from({ length: roles }, (_, role) => split.map((parts) => parts[role])), context);
  };
  return { formatter, rewardFunc, splitRoles };
}

/**
 * The task options a centralized trainer hands to its single-actor base: the one actor and its tokenizer, the
 * adapter's joint prompt as the only formatter and the reward that splits joint responses into `roles`. Any other
 * count of actor models or tokenizers is an error naming `algorithm`.
 */
export function centralizedActorOptions(
  options: Pick<TaskOptions<unknown>, "agentModel" | "agents" | "tokenizer" | "formatters" | "rewardFunc">,
  adapter: CentralizedAdapter | undefined,
  roles: number,
  algorithm: string,
): { agentModel: null; agents: ModelSource[]; tokenizer: ComlrlTokenizer | null | undefined; formatters: Formatter[]; rewardFunc: RewardFunction } {
  const actors = options.agents ?? (options.agentModel ? [options.agentModel] : []);
  if (actors.length !== 1) throw new AgentResolutionError(`Centralized ${algorithm} trains exactly one actor model, got ${actors.length}`);
  if (Array.isArray(options.tokenizer) && options.tokenizer.length !== 1) {
    throw new AgentResolutionError(`Centralized ${algorithm} takes one actor tokenizer, got ${options.tokenizer.length}`);
  }
  const joint = centralizedTask(adapter ?? new TaggedAdapter(), options.formatters, options.rewardFunc, roles);
  const tokenizer = Array.isArray(options.tokenizer) ? options.tokenizer[0] : options.tokenizer;
  return { agentModel: null, agents: actors, tokenizer, formatters: [joint.formatter], rewardFunc: joint.rewardFunc };
}

/** CentralizedMAGRPOTrainer.create()'s options: MAGRPO's, with one joint actor and its adapter. */
export interface CentralizedMAGRPOTrainerOptions extends Omit<MAGRPOTrainerOptions, "agentModel" | "agents" | "tokenizer" | "config" | "externalTransition"> {
  /** The joint policy's model: a hub id, a local directory or a loaded model. */
  agentModel?: ModelSource | null;
  /** At most one actor: the joint policy. */
  agents?: ModelSource[] | null;
  /** The joint policy's tokenizer (one, or a one-element list); null loads the model's own. */
  tokenizer?: ComlrlTokenizer | ComlrlTokenizer[] | null;
  /** The role count; must match config.numAgents. */
  numAgents?: number;
  /** Training settings: MAGRPO's, with numAgents counting roles. */
  config?: CentralizedMAGRPOConfigInput;
  /** Formats one joint prompt for all roles and splits the joint completion back into per-role parts. */
  adapter?: CentralizedAdapter;
}

// Centralized MAGRPO is single-turn: it has no external transition.
const { externalTransition: _singleTurn, ...MAGRPO_KEYS_BUT_TRANSITION } = MAGRPO_OPTION_KEYS;
const CENTRALIZED_OPTION_KEYS = { ...MAGRPO_KEYS_BUT_TRANSITION, adapter: true } as const satisfies Record<keyof CentralizedMAGRPOTrainerOptions, true>;

/** Centralized MAGRPO: one joint policy writes every role's part through an adapter (docs/magrpo.md). */
export class CentralizedMAGRPOTrainer extends MAGRPOTrainer {
  override readonly algorithm = "CentralizedMAGRPO";
  /** How many roles the joint policy writes for. */
  numRoles = 0;

  // CoMLRL's centralized trainer has no algorithm name of its own: it logs MAGRPO's, with the collaboration keys.
  protected override comlrlRunConfig(): Record<string, unknown> {
    return { ...super.comlrlRunConfig(), algorithm: "MAGRPO", ...centralizedRunConfig(this.numRoles, 1, false) };
  }

  static override buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig {
    return centralizedMagrpoConfig(input);
  }

  static override async create<T extends MAGRPOTrainer>(this: TrainerClass<T>, options: CentralizedMAGRPOTrainerOptions): Promise<T> {
    checkOptionKeys(options, CENTRALIZED_OPTION_KEYS, `${this.name}.create()`);
    const { adapter: givenAdapter, ...magrpoOptions } = options;
    const roleConfig = centralizedMagrpoConfig(options.config ?? {});
    const roles = roleConfig.numAgents;
    if (options.numAgents !== undefined && options.numAgents !== roles) {
      throw new RangeError(`numAgents (${options.numAgents}) must match config.numAgents (${roles}), the role count`);
    }
    const actor = centralizedActorOptions(options, givenAdapter, roles, "MAGRPO");
    // The one actor replaces the role count, under either spelling a config (or a config file) gives it; a built
    // config's objectives, one per role, are derived again for it.
    const { num_agents: _roles, objectives: _perRole, ...actorConfig } = (options.config ?? {}) as Record<string, unknown>;
    const trainer = (await MAGRPOTrainer.create.call(this, {
      ...magrpoOptions,
      ...actor,
      numAgents: undefined,
      config: { ...actorConfig, numAgents: 1 },
    })) as T & CentralizedMAGRPOTrainer;
    trainer.numRoles = roles;
    return trainer;
  }
}
