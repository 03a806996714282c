// IAC — independent actor-critic (COMLRL-SPEC §2.2, §3.5; "CoLLM-DC"): every agent has its own critic, either a
// separate LM with a value head fed the agent's own token ids, or a value head on the agent's backbone trained by
// one backward of actor loss + valueLossCoef · (clipped) value loss. IACTrainer is the shared lifecycle around
// IACLearner, which MARLHF's RL phase also runs in its own host; the shared machinery is ActorCriticLearner's.
import { iacConfig, type IACConfig, type IACConfigInput } from "../../config/index.js";
import { iacRunConfig } from "../../logging/run-config.js";
import type { RolloutEnvironment } from "../../rollout/tree.js";
import { defaultOutputDir, setUpActors, type ActorExtras, type Actors } from "../actors.js";
import { construct } from "../construction.js";
import { registerAgents, resolveAgentCount, type Agent, type ModelSource } from "../agents.js";
import type { StageHost, StepFunction } from "../lifecycle/stage-host.js";
import { placeOnAgentLane } from "../lanes.js";
import { adamW, checkOptionKeys } from "../options.js";
import { actorsOnly, type ModuleDeclaration } from "../placement.js";
import { loadCritics, refuseCriticSources, registerCritics, resolveSeparateCriticSources, type Critic } from "./critics.js";
import { ACTOR_CRITIC_OPTION_KEYS, ActorCriticLearner, ActorCriticTrainer, requireTokenizerWithAgents, type ActorCriticMinibatch, type ActorCriticOptions } from "./learner.js";
import { headValues, NO_TOKENS, type CriticView } from "./samples.js";

/** IACTrainer.create()'s options: the task and agents, and the critics (criticModel or critics; none with useSeparateCritic false). */
export type IACTrainerOptions = ActorCriticOptions<IACConfigInput | IACConfig>;

/** IAC: actors trained A2C-style against independent LLM critics, or value heads on the actors (docs/actor-critic.md). */
export class IACTrainer extends ActorCriticTrainer<IACConfig, IACLearner> {
  readonly algorithm = "IAC";

  protected override comlrlRunConfig(): Record<string, unknown> {
    return iacRunConfig(this.config);
  }

  /** Builds the trainer: validates options and config, loads actors and critics, and registers them. */
  static async create(options: IACTrainerOptions): Promise<IACTrainer> {
    checkOptionKeys(options, ACTOR_CRITIC_OPTION_KEYS, "IACTrainer.create()");
    const config = iacConfig(resolveAgentCount(options.config, options.numAgents, options.agents));
    const n = config.numAgents;
    let criticSources: ModelSource[] = [];
    return construct({
      algorithm: "IAC",
      options,
      config,
      check: () => {
        requireTokenizerWithAgents(options);
        criticSources = config.useSeparateCritic ? resolveSeparateCriticSources(options, n) : (refuseCriticSources(options), []);
      },
      // References are always deep copies of the agents in IAC (spec §3.6).
      load: () => setUpActors(options, config, { ...iacActorExtras(config), modules: () => iacModules(config, criticSources) }),
      make: async (actors) => {
        const critics = await loadIACCritics(config, actors, criticSources);
        return new IACTrainer(config, options, defaultOutputDir("IACTrainer", options.outputDir), (host) => new IACLearner(config, actors.agents, critics, options, actors.environment, host));
      },
      register: (trainer, actors) => {
        // CoMLRL's layout (spec §7.1): agent_i/ (+ critic/ inside), or, for one agent, the output dir itself and critic/.
        registerAgents(trainer.components, actors.agents, (i) => (n === 1 ? "" : `agent_${i}`));
        registerCritics(trainer.components, trainer.critics, (i) => `agent_${i}/critic`, (i) => (n === 1 ? "critic" : `agent_${i}/critic`));
      },
    });
  }
}

/** What IAC asks of its actors: copied references, and value heads on them when the critics are not separate. */
export function iacActorExtras(config: Pick<IACConfig, "useSeparateCritic" | "valueHeadHiddenDim">): Pick<ActorExtras, "referencesAsCopies" | "valueHeads"> {
  return { referencesAsCopies: true, valueHeads: config.useSeparateCritic ? null : { hiddenDim: config.valueHeadHiddenDim } };
}

/** IAC's modules: a critic per agent from its sources, or none with the value heads on the actors. */
export function iacModules(config: Pick<IACConfig, "useSeparateCritic" | "referenceKlEnabled">, criticSources: readonly ModelSource[]): ModuleDeclaration {
  return { ...actorsOnly(config), critics: config.useSeparateCritic ? "per-agent" : "none", criticSources };
}

/**
 * IAC's critics for actors set up by setUpActors (IACTrainer's, or MARLHF's for its RL phase): one per source on
 * the agents' critic devices, none when the value heads sit on the actors. The caller registers them.
 */
export async function loadIACCritics(config: IACConfig, actors: Pick<Actors, "agents" | "placement">, criticSources: readonly ModelSource[]): Promise<Critic[]> {
  if (!config.useSeparateCritic && actors.agents.some((a) => !a.valueHead)) throw new TypeError("IAC with useSeparateCritic false needs actors built with value heads (setUpActors' valueHeads)");
  const critics = await loadCritics({
    sources: criticSources,
    devices: actors.placement.criticDevices,
    dtype: config.dtype,
    seed: config.seed,
    headHiddenDim: config.criticValueHeadHiddenDim,
    optimizer: adamW(config, config.criticLearningRate),
    tokenizers: actors.agents.map((a) => a.tokenizer),
  });
  // Each critic on its agent's lane (agents sharing one critic model have none: their updates take turns).
  critics.forEach((critic, i) => placeOnAgentLane(actors.placement.lanes, i, [critic.model]));
  return critics;
}

/** IAC's rollouts and updates, in the host of IACTrainer or of MARLHF's RL phase. */
export class IACLearner extends ActorCriticLearner<IACConfig> {
  constructor(config: IACConfig, agents: Agent[], critics: Critic[], options: IACTrainerOptions, environment: RolloutEnvironment, host: StageHost) {
    super(config, agents, critics, options, environment, host);
  }

  protected readonly criticView: CriticView = {
    shared: false,
    row: (node, agent, g) => ({ prompt: node.promptIds[agent], completion: this.config.criticType === "q" ? node.completionIds[agent][g] : NO_TOKENS }),
    values: (agent, rows) => headValues(this.critics[agent]?.valueHead ?? this.agents[agent].valueHead!, rows, this.config.criticType),
  };

  protected async step(agent: Agent, { minibatch, advantages }: ActorCriticMinibatch, step: StepFunction): Promise<void> {
    const c = this.config;
    const name = `agent_${agent.index}`;
    const head = agent.valueHead;
    if (!head) {
      await this.actorStep(step, agent, minibatch, advantages);
      await this.criticStep(step, agent, minibatch, this.critics[agent.index], `${name}/critic`, c.criticType);
      return;
    }
    // The value head on the actor: one loss, one backward and one step over backbone and head.
    const backward = async () => {
      if (minibatch.length === 0) return 0;
      const result = await head.actorCriticBackward(minibatch.map((s) => s.promptIds), minibatch.map((s) => s.completionIds), {
        advantages: Float32Array.from(advantages, (a) => a / minibatch.length),
        targets: Float32Array.from(minibatch, (s) => s.target),
        valueLossCoef: c.valueLossCoef,
        readout: c.criticType,
        ...(c.valueClipRange === null ? {} : { oldValues: Float32Array.from(minibatch, (s) => s.oldValue), clipRange: c.valueClipRange }),
      });
      return result.loss;
    };
    await this.stepOn(step, agent, minibatch, { component: name, optimizer: agent.optimizer, zeroGrad: () => Promise.all([agent.model.zeroGrad(), head.zeroGrad()]), backward });
  }
}
