// What IAC and MAAC share (COMLRL-SPEC §3.5): episodes through the rollout tree (numGenerations completions at one
// node, or one trajectory of numTurns), actor-critic samples with TD(0) targets, per-agent buffers drained by turn,
// advantages A = y − V_old (z-scored over an update), shuffled minibatches. A2C-style: no ratio, no clipping of the
// policy, no entropy bonus, one pass. Subclasses say how their critics read an episode and take one minibatch step.
import type { ActorCriticConfig } from "../../config/index.js";
import type { Optimizer } from "../../models/optimizer.js";
import { forEachAgent, rolloutItem, type RolloutEnvironment, type RolloutSettings, type RolloutTimings } from "../../rollout/tree.js";
import type { Item } from "../../rollout/types.js";
import type { Agent, ModelSource } from "../agents.js";
import { evaluateAgents } from "../evaluation.js";
import type { MetricsLogger } from "../../logging/metrics-logger.js";
import type { SeededRandom } from "../../util/random.js";
import { bufferedItemStage } from "../item-stage.js";
import { TASK_OPTION_KEYS, type TaskOptions } from "../task-options.js";
import { Trainer, type TrainingStage, type TrainProgress } from "../trainer.js";
import { actorCriticSamples, NonFiniteError, type ActorCriticSample, type CriticView } from "./samples.js";

export interface ActorCriticOptions<ConfigInput> extends TaskOptions<ConfigInput> {
  criticModel?: ModelSource | null;
  critics?: ModelSource[] | null;
  /** Domain metrics from each item's samples, logged with the train metrics. */
  metricsCallback?: ((samples: ActorCriticSample[]) => Record<string, number>) | null;
}

export const ACTOR_CRITIC_OPTION_KEYS = { ...TASK_OPTION_KEYS, criticModel: true, critics: true, metricsCallback: true } as const;

/** Seconds per phase since the trainer was made (evaluation is not counted); `critic` is the old-value readouts. */
export interface ActorCriticTimings extends RolloutTimings {
  critic: number;
  update: number;
}

/** What a hosted actor-critic stage shares with the trainer it runs in (see stageWithin). */
export interface ActorCriticHost {
  readonly progress: TrainProgress;
  readonly random: SeededRandom;
  readonly logger: MetricsLogger | null;
}

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

export abstract class ActorCriticTrainer<C extends ActorCriticConfig = ActorCriticConfig> extends Trainer<C> {
  readonly timings: ActorCriticTimings = { generation: 0, referenceKl: 0, reward: 0, critic: 0, update: 0 };
  protected readonly buffers: ActorCriticSample[][];

  protected constructor(
    config: C,
    readonly agents: Agent[],
    protected readonly options: ActorCriticOptions<unknown>,
    protected readonly environment: RolloutEnvironment,
    outputDir: string,
  ) {
    super(config, options, outputDir);
    this.buffers = agents.map(() => []);
    environment.timings = this.timings;
  }

  /** How the critics read episodes. */
  protected abstract readonly criticView: CriticView;

  /** One optimizer step (or two, with a separate critic) on agent's minibatch with its normalised advantages. */
  protected abstract step(agent: Agent, minibatch: ActorCriticSample[], advantages: number[]): Promise<void>;

  /** Whether agents may update at the same time (only on distinct devices, and never around a shared critic). */
  protected get concurrentUpdates(): boolean {
    return this.environment.concurrent;
  }

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
    };
  }

  /** Rolls out each item and returns its actor-critic samples, advancing the env-step counter. */
  async collect(items: Item[], firstItemIndex = 0): Promise<ActorCriticSample[]> {
    const samples: ActorCriticSample[] = [];
    for (let i = 0; i < items.length; i++) {
      const rollout = await rolloutItem(items[i], firstItemIndex + i, this.environment, this.rolloutSettings, this.progress.envStep);
      this.progress.envStep += rollout.envSteps;
      const started = performance.now();
      const itemSamples = await actorCriticSamples(rollout.root, firstItemIndex + i, this.criticView, {
        numAgents: this.agents.length,
        discount: this.config.discount,
        referenceKlCoef: this.config.referenceKlEnabled ? this.config.referenceKlCoef : 0,
      });
      this.timings.critic += (performance.now() - started) / 1000;
      const domain = this.options.metricsCallback?.(itemSamples);
      if (domain && this.logger) this.logger.logTrain(domain, this.progress.envStep);
      samples.push(...itemSamples);
    }
    return samples;
  }

  /**
   * This trainer's training stage, run inside another trainer's lifecycle (MARLHF's rl stage): from now on its env
   * steps, update counts, shuffles and metrics are the host's, so the host's schedule, logs and checkpoints cover
   * them. The host registers the agents and critics; checkpointable() guards its checkpoints.
   */
  stageWithin(host: ActorCriticHost): TrainingStage {
    Object.defineProperties(this, { progress: { value: host.progress }, random: { value: host.random }, logger: { get: () => host.logger } });
    return this.stages()[0];
  }

  /** Throws when samples are buffered that a checkpoint would lose (see assertCheckpointable). */
  checkpointable(): void {
    this.assertCheckpointable();
  }

  protected stages(): TrainingStage[] {
    const c = this.config;
    return [
      bufferedItemStage({
        items: this.options.trainDataset,
        epochs: c.numTrainEpochs,
        evalInterval: c.evalInterval,
        hasEvalData: Boolean(this.options.evalDataset?.length),
        bufferSize: c.rolloutBufferSize,
        buffers: this.buffers,
        collect: (items, first) => this.collect(items, first),
        drain: (minimum) => this.drainBuffers(minimum),
        shownRewards: (samples) => samples.filter((s) => s.agent === 0).map((s) => s.environmentReward),
      }),
    ];
  }


  /**
   * Per agent, per turn (ascending): advantages A = y − V_old over the turn's samples (z-scored when enabled), then
   * shuffled minibatches of trainBatchSize, one step each. Shuffles are drawn in agent order before any agent runs.
   */
  async update(samples: ActorCriticSample[]): Promise<void> {
    const started = performance.now();
    const c = this.config;
    const plans = this.agents.map((agent) => {
      const mine = samples.filter((s) => s.agent === agent.index);
      return [...new Set(mine.map((s) => s.turn))]
        .sort((a, b) => a - b)
        .flatMap((turn) => {
          const group = mine.filter((s) => s.turn === turn);
          const normalized = normalizedAdvantages(group, c.advantageNormalization);
          const order = this.random.shuffle(group.map((_, i) => i));
          return Array.from({ length: Math.ceil(order.length / c.trainBatchSize) }, (_, m) => order.slice(m * c.trainBatchSize, (m + 1) * c.trainBatchSize)).map((indices) => ({
            minibatch: indices.map((i) => group[i]),
            advantages: indices.map((i) => normalized[i]),
          }));
        });
    });
    // Data parallel: every rank takes as many steps per agent as the rank with the most minibatches; the extra ones add nothing.
    const counts = await this.agreeMax(plans.map((plan) => plan.length));
    plans.forEach((plan, i) => plan.push(...Array.from({ length: counts[i] - plan.length }, () => ({ minibatch: [] as ActorCriticSample[], advantages: [] as number[] }))));
    await forEachAgent(this.agents.length, this.concurrentUpdates, async (i) => {
      for (const { minibatch, advantages } of plans[i]) await this.step(this.agents[i], minibatch, advantages);
    });
    this.timings.update += (performance.now() - started) / 1000;
    this.logTrainMetrics(await this.gatherFromRanks(samples.map(({ turn, environmentReward, return: r, oldValue, target, referenceKl, envStep }) => ({ turn, environmentReward, return: r, oldValue, target, referenceKl, envStep }))));
  }

  async evaluate(): Promise<Record<string, number>> {
    const items = (this.options.evalDataset ?? []).slice(0, this.config.evalNumSamples);
    const settings = { ...this.rolloutSettings, numGenerations: 1 };
    return evaluateAgents(this.agents, this.environment, settings, { items, seed: this.config.seed, envStep: this.progress.envStep, logger: this.logger, hooks: this.options });
  }

  protected override assertCheckpointable(): void {
    if (this.buffers.some((b) => b.length > 0)) throw new Error("saveCheckpoint: rollout buffers must be drained first (checkpoints are taken at epoch ends)");
  }

  protected async drainBuffers(minimum: number): Promise<void> {
    const sizes = await this.agreeMax(this.buffers.map((buffer) => buffer.length));
    const ready = this.buffers.flatMap((_, agent) => (sizes[agent] >= minimum ? [agent] : []));
    if (ready.length === 0) return;
    await this.update(ready.flatMap((agent) => this.buffers[agent].splice(0)));
  }

  /**
   * One optimizer step over a minibatch's gradients, recorded as `component`; `samples` weights this rank's gradients
   * under data parallelism (an empty minibatch contributes nothing but still steps with its peers).
   */
  protected async stepOptimizer(component: string, optimizer: Optimizer, loss: number, samples: number): Promise<void> {
    const step = await optimizer.step({ maxGradNorm: this.config.maxGradNorm ?? undefined, samples, loss });
    this.recordUpdate(component, { loss: step.loss ?? loss, gradNorm: step.gradNorm, learningRate: optimizer.learningRates()[0], samples: step.samples });
  }

  /** Throws naming the agent, items and turns of a minibatch whose loss is not finite. */
  protected checkFinite(value: number, what: string, agent: Agent, minibatch: ActorCriticSample[]): void {
    if (Number.isFinite(value)) return;
    const where = [...new Set(minibatch.map((s) => `item ${s.itemIndex} turn ${s.turn + 1}`))].join(", ");
    throw new NonFiniteError(`agent ${agent.index}: non-finite ${what} (${value}) on the minibatch of ${where}; lower the learning rates or check the rewards`);
  }

  protected logTrainMetrics(samples: readonly Pick<ActorCriticSample, "turn" | "environmentReward" | "return" | "oldValue" | "target" | "referenceKl" | "envStep">[]): void {
    if (!this.logger || samples.length === 0) return;
    const metrics: Record<string, number> = {};
    for (const turn of [...new Set(samples.map((s) => s.turn))]) {
      const group = samples.filter((s) => s.turn === turn);
      const key = (name: string) => `turn_${turn + 1}/${name}`;
      metrics[key("reward_mean")] = mean(group.map((s) => s.environmentReward));
      metrics[key("expected_return")] = mean(group.map((s) => s.return));
      metrics[key("value_mean")] = mean(group.map((s) => s.oldValue));
      metrics[key("target_mean")] = mean(group.map((s) => s.target));
      if (this.config.referenceKlEnabled) {
        metrics[key("reference_kl_mean")] = mean(group.map((s) => s.referenceKl));
        metrics[key("reference_kl_penalty_mean")] = mean(group.map((s) => s.referenceKl * this.config.referenceKlCoef));
      }
    }
    this.logger.logTrain(metrics, Math.max(...samples.map((s) => s.envStep)));
  }
}

/** A = y − V_old; z-scored (population std, floored at 1e-6) over the samples when enabled and more than one. */
export function normalizedAdvantages(samples: readonly ActorCriticSample[], normalize: boolean): number[] {
  const a = samples.map((s) => s.target - s.oldValue);
  if (!normalize || a.length < 2) return a;
  const m = mean(a);
  const std = Math.max(Math.sqrt(mean(a.map((x) => (x - m) ** 2))), 1e-6);
  return a.map((x) => (x - m) / std);
}
