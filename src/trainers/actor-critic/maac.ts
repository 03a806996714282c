// MAAC — multi-agent actor-critic with one centralized critic (COMLRL-SPEC §2.3, §3.5; "CoLLM-CC"). The critic reads
// the joint history as text, "[Agent i] <prompt_i>" blocks (and for a Q critic the joint action), tokenized with
// agent 0's tokenizer, and is stepped inside every agent's update — N critic steps per batch, as CoMLRL does (§10.10),
// which is why agent updates never run concurrently. MAACTrainer is the shared lifecycle around MAACLearner, which
// MARLHF's RL phase also runs in its own host.
import { maacConfig, type MAACConfig, type MAACConfigInput } from "../../config/index.js";
import { maacRunConfig } from "../../logging/run-config.js";
import type { RolloutEnvironment, RolloutNode } from "../../rollout/tree.js";
import { defaultOutputDir, setUpActors, type Actors } from "../actors.js";
import { construct } from "../construction.js";
import { registerAgents, resolveAgentCount, type Agent, type ModelSource } from "../agents.js";
import type { StageHost, StepFunction } from "../lifecycle/stage-host.js";
import { adamW, checkOptionKeys, TrainerOptionError } from "../options.js";
import { actorsOnly, type ModuleDeclaration } from "../placement.js";
import { loadCritics, registerCritics, resolveCentralCriticSource, type Critic } from "./critics.js";
import { ACTOR_CRITIC_OPTION_KEYS, ActorCriticLearner, ActorCriticTrainer, requireTokenizerWithAgents, type ActorCriticMinibatch, type ActorCriticOptions } from "./learner.js";
import { headValues, NO_TOKENS, type CriticRow, type CriticView } from "./samples.js";

export interface MAACTrainerOptions extends ActorCriticOptions<MAACConfigInput | MAACConfig> {
  /**
   * CoMLRL's model_config: the centralized critic's head hidden size (null: Linear(H, 1)). Any other key is refused
   * by name (the dtype is `config.dtype`).
   */
  modelConfig?: {
    /** Hidden size of the critic head's MLP; null (the default): a single Linear(H, 1). */
    criticValueHeadHiddenDim?: number | null;
    /** CoMLRL's spelling of criticValueHeadHiddenDim, taken as it. */
    critic_value_head_hidden_dim?: number | null;
  } | null;
}

const MAAC_OPTION_KEYS = { ...ACTOR_CRITIC_OPTION_KEYS, modelConfig: true } as const satisfies Record<keyof MAACTrainerOptions, true>;

/** The critic's text for a joint history (spec §3.5): prompts, and with `actions` the joint action, agents from 0. */
export function jointCriticText(prompts: readonly string[], actions: readonly string[] | null): string {
  const base = prompts.map((p, i) => `[Agent ${i}] ${p}`).join("\n\n");
  if (actions === null) return base;
  return `${base}\n\n${["[Joint Action]", ...actions.map((a, i) => `[Agent ${i} action]\n${a}`)].join("\n\n")}`;
}

const HEAD_DIM_SPELLINGS = ["criticValueHeadHiddenDim", "critic_value_head_hidden_dim"] as const;

/** modelConfig's critic head size under either spelling; a key it does not take is an error, never ignored. */
function headHiddenDim(options: MAACTrainerOptions): number | null {
  const modelConfig: Record<string, unknown> = options.modelConfig ?? {};
  for (const key of Object.keys(modelConfig)) {
    if ((HEAD_DIM_SPELLINGS as readonly string[]).includes(key)) continue;
    const hint = key === "torch_dtype" || key === "dtype" ? "set config.dtype" : `it takes only ${HEAD_DIM_SPELLINGS.join(" or ")}`;
    throw new TrainerOptionError(`modelConfig.${key} is not supported by MAACTrainer (${hint})`);
  }
  const given = HEAD_DIM_SPELLINGS.filter((key) => (modelConfig[key] ?? null) !== null);
  if (given.length > 1) throw new TrainerOptionError(`modelConfig sets both ${given.join(" and ")}: give one`);
  if (given.length === 0) return null;
  const dim = modelConfig[given[0]];
  if (!(typeof dim === "number" && Number.isInteger(dim) && dim >= 1)) throw new TrainerOptionError(`modelConfig.${given[0]} must be a positive integer or null, got ${String(dim)}`);
  return dim;
}

/** MAAC: actors trained A2C-style against one centralized critic that reads every agent's prompt (docs/actor-critic.md). */
export class MAACTrainer extends ActorCriticTrainer<MAACConfig, MAACLearner> {
  readonly algorithm = "MAAC";

  protected override comlrlRunConfig(): Record<string, unknown> {
    return maacRunConfig(this.config);
  }

  /** Builds the trainer: validates options and config, loads actors and the critic, and registers them. */
  static async create(options: MAACTrainerOptions): Promise<MAACTrainer> {
    checkOptionKeys(options, MAAC_OPTION_KEYS, "MAACTrainer.create()");
    const config = maacConfig(resolveAgentCount(options.config, options.numAgents, options.agents));
    let source: ModelSource = "";
    let dim: number | null = null;
    return construct({
      algorithm: "MAAC",
      options,
      config,
      check: () => {
        requireTokenizerWithAgents(options);
        source = resolveCentralCriticSource(options);
        dim = headHiddenDim(options);
      },
      load: () => setUpActors(options, config, { modules: () => maacModules(config, source) }),
      make: async (actors) => {
        const critic = await loadMAACCritic(config, actors, source, dim);
        return new MAACTrainer(config, options, defaultOutputDir("MAACTrainer", options.outputDir), (host) => new MAACLearner(config, actors.agents, critic, options, actors.environment, host));
      },
      register: (trainer, actors) => {
        registerAgents(trainer.components, actors.agents);
        registerCritics(trainer.components, trainer.critics, () => "critic", () => "critic");
      },
    });
  }
}

/** MAAC's modules: one centralized critic, stepped in every agent's update (so the agents update in turn). */
export function maacModules(config: Pick<MAACConfig, "referenceKlEnabled">, criticSource: ModelSource): ModuleDeclaration {
  return { ...actorsOnly(config), critics: "centralized", criticSources: [criticSource] };
}

/**
 * MAAC's centralized critic (with a head of headHiddenDim) for actors set up by setUpActors (MAACTrainer's, or
 * MARLHF's for its RL phase); the caller registers it.
 */
export async function loadMAACCritic(config: MAACConfig, actors: Pick<Actors, "agents" | "placement">, source: ModelSource, headHiddenDim: number | null): Promise<Critic> {
  const [critic] = await loadCritics({
    sources: [source],
    devices: actors.placement.criticDevices,
    dtype: config.dtype,
    seed: config.seed,
    headHiddenDim,
    optimizer: adamW(config, config.criticLearningRate),
    tokenizers: [actors.agents[0].tokenizer],
  });
  return critic;
}

/** MAAC's rollouts and updates, in the host of MAACTrainer or of MARLHF's RL phase. */
export class MAACLearner extends ActorCriticLearner<MAACConfig> {
  private readonly jointRows = new WeakMap<RolloutNode, CriticRow[]>();

  constructor(config: MAACConfig, agents: Agent[], critic: Critic, options: MAACTrainerOptions, environment: RolloutEnvironment, host: StageHost) {
    super(config, agents, [critic], options, environment, host);
  }

  protected override get concurrentUpdates(): boolean {
    return false;
  }

  protected readonly criticView: CriticView = {
    shared: true,
    row: (node, _agent, g) => this.jointRowsOf(node)[g],
    // The value at the joint text's last token (its "prompt" alone: the row has no completion).
    values: (_agent, rows) => headValues(this.critics[0].valueHead, rows, "v"),
  };

  private jointRowsOf(node: RolloutNode): CriticRow[] {
    let rows = this.jointRows.get(node);
    if (!rows) {
      const tokenizer = this.agents[0].tokenizer;
      const width = node.completionIds[0].length;
      rows = Array.from({ length: width }, (_, g) => ({
        prompt: tokenizer.encode(jointCriticText(node.prompts, this.config.criticType === "q" ? node.texts.map((t) => t[g]) : null)),
        completion: NO_TOKENS,
      }));
      this.jointRows.set(node, rows);
    }
    return rows;
  }

  protected async step(agent: Agent, { minibatch, advantages }: ActorCriticMinibatch, step: StepFunction): Promise<void> {
    await this.actorStep(step, agent, minibatch, advantages);
    await this.criticStep(step, agent, minibatch, this.critics[0], "critic", "v");
  }
}
