// MAPPO — multi-agent PPO (ours; docs/mappo.md): the actor-critic rollouts with GAE(λ) advantages and λ-return
// targets, then numIterations passes (PPO's epochs) over each update's minibatches; each actor steps on its objective
// of the MAGRPO family (by default the token-mean clipped ratio against the rollout's own log-probs) and each critic
// on PPO's clipped value loss around its old values. The critic is MAAC's one centralized critic on the joint text,
// or (centralizedCritic false) one per agent on the agent's own prompt, as IAC's separate critics.
import { mappoConfig, type MAPPOConfig, type MAPPOConfigInput } from "../../config/actor-critic.js";
import type { RolloutEnvironment } from "../../rollout/tree.js";
import { defaultOutputDir, setUpActors } from "../actors.js";
import { construct } from "../construction.js";
import { AgentResolutionError, registerAgents, resolveAgentCount, type Agent, type ModelSource } from "../agents.js";
import type { StageHost, StepFunction } from "../lifecycle/stage-host.js";
import { checkOptionKeys } from "../options.js";
import { registerCritics, resolveCentralCriticSource, resolveSeparateCriticSources, type Critic } from "./critics.js";
import { iacModules, loadIACCritics } from "./iac.js";
import { ACTOR_CRITIC_OPTION_KEYS, ActorCriticLearner, ActorCriticTrainer, requireTokenizerWithAgents, type ActorCriticMinibatch, type ActorCriticOptions } from "./learner.js";
import { jointCriticText, loadMAACCritic, maacModules } from "./maac.js";
import { headValues, NO_TOKENS, type CriticView } from "./samples.js";

/** MAPPOTrainer.create()'s options: the task and agents, and the critic model (one for all, or one per agent). */
export type MAPPOTrainerOptions = ActorCriticOptions<MAPPOConfigInput | MAPPOConfig>;

/** MAPPO: actors trained by PPO against a centralized critic, or one critic per agent (docs/mappo.md). */
export class MAPPOTrainer extends ActorCriticTrainer<MAPPOConfig, MAPPOLearner> {
  readonly algorithm = "MAPPO";

  /** Builds the trainer: validates options and config, loads actors and critics, and registers them. */
  static async create(options: MAPPOTrainerOptions): Promise<MAPPOTrainer> {
    checkOptionKeys(options, ACTOR_CRITIC_OPTION_KEYS, "MAPPOTrainer.create()");
    const config = mappoConfig(resolveAgentCount(options.config, options.numAgents, options.agents));
    let sources: ModelSource[] = [];
    return construct({
      algorithm: "MAPPO",
      options,
      config,
      check: () => {
        requireTokenizerWithAgents(options);
        if ((options.criticModel ?? null) === null && (options.critics ?? null) === null) throw new AgentResolutionError("Either criticModel or critics must be provided for MAPPO.");
        sources = config.centralizedCritic ? [resolveCentralCriticSource(options)] : resolveSeparateCriticSources(options, config.numAgents);
      },
      load: () => setUpActors(options, config, { modules: () => (config.centralizedCritic ? maacModules(config, sources[0]) : iacModules({ ...config, useSeparateCritic: true }, sources)) }),
      make: async (actors) => {
        const critics = config.centralizedCritic
          ? [await loadMAACCritic(config, actors, sources[0], null)]
          : await loadIACCritics({ ...config, useSeparateCritic: true, criticValueHeadHiddenDim: null, valueHeadHiddenDim: null }, actors, sources);
        return new MAPPOTrainer(config, options, defaultOutputDir("MAPPOTrainer", options.outputDir), (host) => new MAPPOLearner(config, actors.agents, critics, options, actors.environment, host));
      },
      register: (trainer, actors) => {
        registerAgents(trainer.components, actors.agents);
        const name = config.centralizedCritic ? () => "critic" : (i: number) => `critic_${i}`;
        registerCritics(trainer.components, trainer.critics, name, name);
      },
    });
  }
}

/** MAPPO's rollouts and updates, in MAPPOTrainer's host (or any other stage host). */
export class MAPPOLearner extends ActorCriticLearner<MAPPOConfig> {
  constructor(config: MAPPOConfig, agents: Agent[], critics: Critic[], options: MAPPOTrainerOptions, environment: RolloutEnvironment, host: StageHost) {
    super(config, agents, critics, options, environment, host);
  }

  protected override get concurrentUpdates(): boolean {
    return !this.config.centralizedCritic && super.concurrentUpdates;
  }

  protected override get gaeLambda(): number {
    return this.config.gaeLambda;
  }

  // The joint text (MAAC's, read at its last token) or the agent's own prompt (and completion, for a Q critic).
  protected readonly criticView: CriticView = this.config.centralizedCritic
    ? {
        shared: true,
        row: (node, _agent, g) => ({ prompt: this.agents[0].tokenizer.encode(jointCriticText(node.prompts, this.config.criticType === "q" ? node.texts.map((t) => t[g]) : null)), completion: NO_TOKENS }),
        values: (_agent, rows) => headValues(this.critics[0].valueHead, rows, "v"),
      }
    : {
        shared: false,
        row: (node, agent, g) => ({ prompt: node.promptIds[agent], completion: this.config.criticType === "q" ? node.completionIds[agent][g] : NO_TOKENS }),
        values: (agent, rows) => headValues(this.critics[agent].valueHead, rows, this.config.criticType),
      };

  protected async step(agent: Agent, { minibatch, advantages }: ActorCriticMinibatch, step: StepFunction): Promise<void> {
    await this.actorStep(step, agent, minibatch, advantages);
    const c = this.config;
    const [critic, component, readout] = c.centralizedCritic ? [this.critics[0], "critic", "v" as const] : [this.critics[agent.index], `critic_${agent.index}`, c.criticType];
    await this.criticStep(step, agent, minibatch, critic, component, readout, c.valueClipRange);
  }
}
