// IAC — independent actor-critic (COMLRL-SPEC §2.2, §3.5; "CoLLM-DC"): every agent has its own critic, either a
// separate LM with a value head fed the agent's own token ids, or a value head on the agent's backbone trained by
// one backward of actor loss + valueLossCoef · (clipped) value loss. The shared machinery is ActorCriticTrainer's.
import { iacConfig, type IACConfig, type IACConfigInput } from "../../config/index.js";
import { iacRunConfig } from "../../logging/run-config.js";
import { completionBatch } from "../../models/causal-lm.js";
import { defaultOutputDir, setUpActors, type Actors } from "../actors.js";
import { construct } from "../construction.js";
import { AgentResolutionError, registerAgents, resolveAgentCount, type Agent, type ModelSource } from "../agents.js";
import type { StageHost } from "../lifecycle/stage-host.js";
import { placeOnAgentLane, sharesModels } from "../lanes.js";
import { checkOptionKeys } from "../options.js";
import { criticDevices, loadCritics, refuseCriticSources, registerCritics, resolveSeparateCriticSources } from "./critics.js";
import { headValues, type CriticView } from "./samples.js";
import { ACTOR_CRITIC_OPTION_KEYS, ActorCriticTrainer, type ActorCriticMinibatch, type ActorCriticOptions, type StepLog } from "./trainer.js";

export type IACTrainerOptions = ActorCriticOptions<IACConfigInput | IACConfig>;

const NO_TOKENS = new Int32Array(0);

/** IAC and MAAC load tokenizers for agentModel only; with `agents`, even ids, the tokenizer is given (REQUIREMENTS). */
export function requireTokenizerWithAgents(options: ActorCriticOptions<unknown>): void {
  if (options.agents !== null && options.agents !== undefined && !options.tokenizer) throw new AgentResolutionError("Tokenizer must be provided when using agents.");
}

export class IACTrainer extends ActorCriticTrainer<IACConfig> {
  readonly algorithm = "IAC";

  protected comlrlRunConfig(): Record<string, unknown> {
    return iacRunConfig(this.config);
  }

  static async create(options: IACTrainerOptions): Promise<IACTrainer> {
    checkOptionKeys(options, ACTOR_CRITIC_OPTION_KEYS, "IACTrainer.create()");
    const config = iacConfig(resolveAgentCount(options.config, options.numAgents, options.agents) as IACConfigInput);
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
      load: () => setUpActors(options, config, { referencesAsCopies: true, valueHeads: config.useSeparateCritic ? null : { hiddenDim: config.valueHeadHiddenDim } }),
      make: (actors) => IACTrainer.around(config, actors, criticSources, options, null),
      register: (trainer, actors) => {
        // CoMLRL's layout (spec §7.1): agent_i/ (+ critic/ inside), or, for one agent, the output dir itself and critic/.
        registerAgents(trainer.components, actors.agents, actors.sources, (i) => (n === 1 ? "" : `agent_${i}`));
        registerCritics(trainer.components, trainer.critics, (i) => `agent_${i}/critic`, (i) => (n === 1 ? "critic" : `agent_${i}/critic`));
      },
    });
  }

  /**
   * An IAC trainer around actors set up elsewhere (MARLHF's rl stage, which passes its host): loads the critics and
   * registers nothing, so the caller registers agents and critics where its checkpoints see them.
   */
  static async around(
    config: IACConfig,
    actors: Pick<Actors, "agents" | "placement" | "environment" | "lanes">,
    criticSources: ModelSource[],
    options: IACTrainerOptions,
    hostedBy: StageHost | null,
  ): Promise<IACTrainer> {
    if (!config.useSeparateCritic && actors.agents.some((a) => !a.valueHead)) throw new TypeError("IAC with useSeparateCritic false needs actors built with value heads (setUpActors' valueHeads)");
    const critics = await loadCritics({
      sources: criticSources,
      devices: criticDevices(config, actors.placement.agentDevices, criticSources.length),
      dtype: config.dtype,
      seed: config.seed,
      headHiddenDim: config.criticValueHeadHiddenDim,
      optimizer: { lr: config.criticLearningRate, betas: [config.adamBetas[0], config.adamBetas[1]], eps: config.adamEps, weightDecay: config.weightDecay },
      tokenizers: actors.agents.map((a) => a.tokenizer),
    });
    // Each critic on its agent's lane; a critic shared by agents is one module, so then the agents take turns.
    if (sharesModels(criticSources)) actors.environment.concurrent = actors.placement.concurrent;
    else critics.forEach((critic, i) => placeOnAgentLane(actors.lanes, i, [critic.model]));
    return new IACTrainer(config, actors.agents, critics, options, actors.environment, defaultOutputDir("IACTrainer", options.outputDir), hostedBy);
  }

  protected readonly criticView: CriticView = {
    shared: false,
    row: (node, agent, g) => ({ prompt: node.promptIds[agent], completion: this.config.criticType === "q" ? node.completionIds[agent][g] : NO_TOKENS }),
    values: (agent, rows) => headValues(this.critics[agent]?.valueHead ?? this.agents[agent].valueHead!, rows, this.config.criticType),
  };

  protected async step(agent: Agent, { minibatch, advantages }: ActorCriticMinibatch): Promise<StepLog[]> {
    const c = this.config;
    const prompts = minibatch.map((s) => s.promptIds);
    const completions = minibatch.map((s) => s.completionIds);
    const weights = Float32Array.from(advantages, (a) => a / minibatch.length);
    const targets = Float32Array.from(minibatch, (s) => s.target);
    const name = `agent_${agent.index}`;
    const some = minibatch.length > 0;
    agent.model.zeroGrad();
    if (agent.valueHead) {
      agent.valueHead.zeroGrad();
      let loss = 0;
      if (some) {
        const result = await agent.valueHead.actorCriticBackward(prompts, completions, {
          advantages: weights,
          targets,
          valueLossCoef: c.valueLossCoef,
          readout: c.criticType,
          ...(c.valueClipRange === null ? {} : { oldValues: Float32Array.from(minibatch, (s) => s.oldValue), clipRange: c.valueClipRange }),
        });
        loss = result.loss;
      }
      const head = agent.valueHead;
      return [await this.stepIfFinite(name, agent.optimizer, loss, agent, minibatch, () => (agent.model.zeroGrad(), head.zeroGrad()))];
    }
    const actorLoss = some ? (await agent.model.policyGradientBackward(prompts, completions, weights)).loss : 0;
    const actorStep = await this.stepIfFinite(name, agent.optimizer, actorLoss, agent, minibatch, () => agent.model.zeroGrad());
    const critic = this.critics[agent.index];
    critic.model.zeroGrad();
    critic.valueHead.zeroGrad();
    const valueLoss = some
      ? (await critic.valueHead.valueLossBackward(minibatch.map((s) => s.critic.prompt), minibatch.map((s) => s.critic.completion), { readout: c.criticType, targets, scale: c.valueLossCoef })).loss
      : 0;
    const criticStep = await this.stepIfFinite(`${name}/critic`, critic.optimizer, c.valueLossCoef * valueLoss, agent, minibatch, () => (critic.model.zeroGrad(), critic.valueHead.zeroGrad()));
    return [actorStep, criticStep];
  }
}
