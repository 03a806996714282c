// What IAC, MAAC and MAPPO share (COMLRL-SPEC §3.5): episodes through the rollout tree (numGenerations completions
// at one node, or one trajectory of numTurns), actor-critic samples with TD(0) targets (MAPPO's: GAE(λ)'s λ-returns),
// advantages A = y − V_old (z-scored over a turn's samples), shuffled minibatches. By default A2C-style, as CoMLRL:
// no ratio, no clipping of the policy, no entropy bonus, one pass; an objective of the MAGRPO family
// (docs/objectives.md) makes the actor's loss a clipped-ratio one over several passes. The rollout plumbing is
// RolloutLearner's, the actor's loss PolicyLoss's; subclasses say how their critics read an episode and take one step.
import type { ActorCriticConfig } from "../../config/index.js";
import type { Readout } from "../../native/binding.js";
import type { RolloutEnvironment, RolloutSettings, rolloutItem } from "../../rollout/tree.js";
import { AgentResolutionError, type Agent, type ModelSource } from "../agents.js";
import type { StageHost, StepFunction, StepRequest } from "../lifecycle/stage-host.js";
import { RolloutLearner } from "../learner.js";
import { RolloutTrainer } from "../rollout-trainer.js";
import { TASK_OPTION_KEYS, type TaskOptions } from "../task-options.js";
import type { Critic } from "./critics.js";
import { actorCriticSamples, type ActorCriticSample, type CriticView } from "./samples.js";
import { meanOrZero } from "../../util/mean.js";

export interface ActorCriticOptions<ConfigInput> extends TaskOptions<ConfigInput> {
  /** The critics' base model (one critic per agent with useSeparateCritic; MAAC's one critic). */
  criticModel?: ModelSource | null;
  /** One critic model per agent (MAAC: one), instead of criticModel. */
  critics?: ModelSource[] | null;
  /** Domain metrics from each item's samples, logged with the train metrics. */
  metricsCallback?: ((samples: ActorCriticSample[]) => Record<string, number>) | null;
}

export const ACTOR_CRITIC_OPTION_KEYS = { ...TASK_OPTION_KEYS, criticModel: true, critics: true, metricsCallback: true } as const;

/** IAC and MAAC load tokenizers for agentModel only; with `agents`, even ids, the tokenizer is given (REQUIREMENTS). */
export function requireTokenizerWithAgents(options: ActorCriticOptions<unknown>): void {
  if (options.agents !== null && options.agents !== undefined && !options.tokenizer) throw new AgentResolutionError("Tokenizer must be provided when using agents.");
}

/** One step's minibatch with its normalised advantages. */
export interface ActorCriticMinibatch {
  minibatch: ActorCriticSample[];
  advantages: number[];
}

type MetricFields = Pick<ActorCriticSample, "agent" | "turn" | "environmentReward" | "return" | "oldValue" | "target" | "referenceKl" | "envStep">;

export abstract class ActorCriticLearner<C extends ActorCriticConfig = ActorCriticConfig> extends RolloutLearner<ActorCriticSample, ActorCriticMinibatch, MetricFields, C> {
  protected constructor(
    config: C,
    agents: Agent[],
    /**
     * IAC: one per agent with separate critics, else none (the heads sit on the actors); MAAC: the one centralized
     * critic. critics[i].valueHead.loadStateDict(…) restores a saved head.
     */
    readonly critics: Critic[],
    protected override readonly options: ActorCriticOptions<unknown>,
    environment: RolloutEnvironment,
    host: StageHost,
  ) {
    super(config, agents, options, environment, host);
  }

  /** How the critics read episodes. */
  protected abstract readonly criticView: CriticView;

  protected get rolloutSettings(): RolloutSettings {
    const c = this.config;
    return {
      numGenerations: c.numGenerations,
      numTurns: c.numTurns,
      jointMode: "aligned",
      earlyTerminationThreshold: c.earlyTerminationThreshold,
      externalPromptPassthrough: c.externalPromptPassthrough,
      rewardBatching: "node",
      perAgentRewards: true,
      formattedPromptHistory: true,
    };
  }

  /** CoMLRL's actor-critic evaluation rolls out as training does, early termination included. */
  protected override get evaluationSettings(): RolloutSettings {
    return this.rolloutSettings;
  }

  /** λ of the samples' λ-return targets: 0, CoMLRL's TD(0) targets; a PPO learner's GAE(λ) sets its own. */
  protected get gaeLambda(): number {
    return 0;
  }

  protected async samplesOf(rollout: Awaited<ReturnType<typeof rolloutItem>>, itemIndex: number): Promise<ActorCriticSample[]> {
    const samples = await this.host.timings.time("critic", () =>
      actorCriticSamples(rollout.root, itemIndex, this.criticView, {
        numAgents: this.agents.length,
        discount: this.config.discount,
        referenceKlCoef: this.config.referenceKlEnabled ? this.config.referenceKlCoef : 0,
        gaeLambda: this.gaeLambda,
      }),
    );
    const domain = this.options.metricsCallback?.(samples);
    if (domain && this.host.logger) this.host.logger.logTrain(domain, this.progress.envStep);
    return samples;
  }

  /** A = y − V_old over the turn's samples (z-scored when enabled), then shuffled minibatches of trainBatchSize. */
  protected minibatchesOf(group: ActorCriticSample[]): ActorCriticMinibatch[] {
    const normalized = normalizedAdvantages(group, this.config.advantageNormalization);
    const order = this.host.random.shuffle(group.map((_, i) => i));
    return RolloutLearner.chunks(order, this.config.trainBatchSize).map((indices) => ({ minibatch: indices.map((i) => group[i]), advantages: indices.map((i) => normalized[i]) }));
  }

  protected emptyMinibatch(): ActorCriticMinibatch {
    return { minibatch: [], advantages: [] };
  }

  /**
   * One optimizer step of `component` (an actor or a critic) over a minibatch: `samples` weights this rank's
   * gradients under data parallelism (an empty minibatch contributes nothing but still steps with its peers).
   */
  protected stepOn(step: StepFunction, agent: Agent, minibatch: ActorCriticSample[], request: Pick<StepRequest, "component" | "optimizer" | "zeroGrad" | "backward">): Promise<unknown> {
    const where = [...new Set(minibatch.map((s) => `item ${s.itemIndex} turn ${s.turn + 1}`))].join(", ");
    return step({ ...request, samples: minibatch.length, subject: `agent ${agent.index} (${request.component})`, batch: `the minibatch of ${where}`, maxGradNorm: this.config.maxGradNorm });
  }

  /** The actor's step: its policy loss over the minibatch, each sample a row (a group of its own) with its advantage. */
  protected actorStep(step: StepFunction, agent: Agent, minibatch: ActorCriticSample[], advantages: readonly number[]): Promise<void> {
    const rows = minibatch.map((s, i) => ({ prompt: s.promptIds, completion: s.completionIds, advantage: advantages[i], group: i, ...(s.sampled ? { sampled: s.sampled } : {}) }));
    return this.policyStep(agent, rows, (backward) => this.stepOn(step, agent, minibatch, { ...agent.policyStep(), backward }));
  }

  /**
   * A critic's step (logged as `component`): valueLossCoef · its value loss at `readout` over the minibatch's critic
   * rows, toward their targets; with clipRange, PPO's clipped value loss around their old values.
   */
  protected criticStep(step: StepFunction, agent: Agent, minibatch: ActorCriticSample[], critic: Critic, component: string, readout: Readout, clipRange: number | null = null): Promise<unknown> {
    const coef = this.config.valueLossCoef;
    const targets = minibatch.map((s) => s.target);
    const clip = clipRange === null ? {} : { oldValues: minibatch.map((s) => s.oldValue), clipRange };
    const backward = async () =>
      minibatch.length > 0
        ? coef * (await critic.valueHead.valueLossBackward(minibatch.map((s) => s.critic.prompt), minibatch.map((s) => s.critic.completion), { readout, targets, scale: coef, ...clip })).loss
        : 0;
    return this.stepOn(step, agent, minibatch, { component, optimizer: critic.optimizer, zeroGrad: () => Promise.all([critic.model.zeroGrad(), critic.valueHead.zeroGrad()]), backward });
  }

  protected metricFields({ agent, turn, environmentReward, return: r, oldValue, target, referenceKl, envStep }: ActorCriticSample): MetricFields {
    return { agent, turn, environmentReward, return: r, oldValue, target, referenceKl, envStep };
  }

  protected turnMetrics(group: MetricFields[]): Record<string, number> {
    const metrics: Record<string, number> = {
      reward_mean: meanOrZero(group.map((s) => s.environmentReward)),
      expected_return: meanOrZero(group.map((s) => s.return)),
      value_mean: meanOrZero(group.map((s) => s.oldValue)),
      target_mean: meanOrZero(group.map((s) => s.target)),
    };
    if (this.config.referenceKlEnabled) {
      metrics.reference_kl_mean = meanOrZero(group.map((s) => s.referenceKl));
      metrics.reference_kl_penalty_mean = meanOrZero(group.map((s) => s.referenceKl * this.config.referenceKlCoef));
    }
    return metrics;
  }

  protected shownRewards(samples: ActorCriticSample[]): number[] {
    return samples.filter((s) => s.agent === 0).map((s) => s.environmentReward);
  }
}

/** IACTrainer and MAACTrainer: the lifecycle around their learner, whose critics they show. */
export abstract class ActorCriticTrainer<C extends ActorCriticConfig, L extends ActorCriticLearner<C>> extends RolloutTrainer<ActorCriticSample, C, L> {
  /**
   * IAC: one per agent with separate critics, else none (the heads sit on the actors); MAAC: the one centralized
   * critic. critics[i].valueHead.loadStateDict(…) restores a saved head.
   */
  get critics(): Critic[] {
    return this.learner.critics;
  }
}

/** A = y − V_old; z-scored (population std, floored at 1e-6) over the samples when enabled and more than one. */
export function normalizedAdvantages(samples: readonly Pick<ActorCriticSample, "target" | "oldValue">[], normalize: boolean): number[] {
  const a = samples.map((s) => s.target - s.oldValue);
  if (!normalize || a.length < 2) return a;
  const m = meanOrZero(a);
  const std = Math.max(Math.sqrt(meanOrZero(a.map((x) => (x - m) ** 2))), 1e-6);
  return a.map((x) => (x - m) / std);
}
