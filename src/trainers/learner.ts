// The rollout/update half of every online algorithm (MAGRPO and its family, IAC, MAAC), with no lifecycle of its
// own: it runs inside a stage host — its trainer's (rollout-trainer.ts), or MARLHF's for the RL phase — which
// counts, logs, checkpoints and synchronises it. It rolls the train items out through the rollout tree, buffers
// per-agent samples and drains them into updates once they hold rolloutBufferSize (the rest at an epoch's end),
// plans updates per agent and per turn (ascending) as shuffled minibatches, padded under data parallelism to the
// ranks' most and repeated for each pass the agent's objective asks, gathers per-turn train metrics from every rank,
// and evaluates on the agents' own streams. It holds the agents' policy loss (policy-loss.ts) and what that loss needs
// of the rollouts: the sampler's log-probs where an objective takes ratios to them, stamped with the agent's policy
// steps so far. An algorithm file says how an episode becomes samples, how a turn's samples become minibatches, what
// one minibatch step does (its policy rows go through policyStep), and which per-turn metrics it logs.
import { formatPrompt } from "../rollout/formatters.js";
import { presampleRoots, rolloutItem, type RolloutEnvironment, type RolloutPolicy, type RolloutSettings } from "../rollout/tree.js";
import type { Item } from "../rollout/types.js";
import { TRAINING_STREAM, type Agent } from "./agents.js";
import { evaluateAgents } from "./evaluation.js";
import type { LifecycleConfig } from "./lifecycle/trainer.js";
import type { StageHost, StepFunction, TrainingStage, TrainProgress, UpdateRecord } from "./lifecycle/stage-host.js";
import { PolicyLoss, type PolicyLossConfig, type PolicyRow } from "./policy-loss.js";
import type { TaskOptions } from "./task-options.js";
import { meanOrZero } from "../util/mean.js";

/** The config fields the rollout plumbing reads. */
export interface RolloutLearnerConfig extends LifecycleConfig, PolicyLossConfig {
  readonly numGenerations: number;
  readonly numTurns: number;
  readonly numTrainEpochs: number;
  readonly rolloutBufferSize: number;
  readonly trainBatchSize: number;
  readonly earlyTerminationThreshold: number | null;
  readonly externalPromptPassthrough: boolean;
  readonly evalInterval: number;
  readonly evalNumSamples: number;
}

/** What the plumbing reads of a sample: whose it is, its turn, and when it was collected. */
export interface RolloutSample {
  agent: number;
  turn: number;
  envStep: number;
}

/** The progress bar's reward is the mean over this many of the latest samples. */
const SHOWN_REWARDS = 50;

/**
 * S: the algorithm's sample; M: one minibatch as its step takes it; P: what of a sample every rank sends rank 0 for
 * the train metrics.
 */
export abstract class RolloutLearner<S extends RolloutSample, M, P extends RolloutSample, C extends RolloutLearnerConfig> {
  protected readonly buffers: S[][];
  /** Where rollouts run, their phases timed into the host's stage timings. */
  readonly environment: RolloutEnvironment;
  /** The agents' policy loss: the one path every actor's gradient takes (docs/objectives.md). */
  protected readonly policyLoss: PolicyLoss;
  /** Each agent's policy optimizer steps so far; recorded log-probs carry the count they were sampled at. */
  readonly policySteps: number[];
  /** Each agent's objective metrics of the steps taken in the update under way, logged when it ends. */
  private readonly policyMetrics: Record<string, number>[][];
  /** Train items whose first turn was sampled ahead (presampleRoots), by index: the environment that answers it. */
  private readonly presampled = new Map<number, RolloutEnvironment>();

  protected constructor(
    /** The algorithm's config. */
    readonly config: C,
    /** The agents it rolls out and trains, in index order. */
    readonly agents: Agent[],
    protected readonly options: TaskOptions<unknown>,
    /** The task's environment, or (MARLHF's RL phase) one whose reward is a reward model. */
    environment: RolloutEnvironment,
    /** What the learner runs inside: its trainer's host, or MARLHF's. */
    protected readonly host: StageHost,
  ) {
    this.buffers = agents.map(() => []);
    this.policyLoss = this.createPolicyLoss(config);
    this.policySteps = agents.map(() => 0);
    this.policyMetrics = agents.map(() => []);
    const policies = environment.policies.map((policy, i) => (this.policyLoss.recordsLogprobs(i) ? this.recordingPolicy(agents[i], policy) : policy));
    this.environment = { ...environment, policies, timings: host.timings };
  }

  /** The agents' policy loss (a learner with a loss of its own overrides this). */
  protected createPolicyLoss(config: PolicyLossConfig): PolicyLoss {
    return new PolicyLoss(config);
  }

  /** The agent's training policy, recording the sampler's log-probs stamped with the agent's policy steps at sampling. */
  private recordingPolicy(agent: Agent, policy: RolloutPolicy): RolloutPolicy {
    return {
      sample: (prompts, k) => agent.sample(prompts, k, TRAINING_STREAM, agent.sampling, this.policySteps[agent.index]),
      ...(policy.referenceKl ? { referenceKl: (promptIds, completions) => policy.referenceKl!(promptIds, completions) } : {}),
    };
  }

  protected get progress(): TrainProgress {
    return this.host.progress;
  }

  protected abstract get rolloutSettings(): RolloutSettings;

  /**
   * How many consecutive train items (from an index divisible by it) no update separates, so that their first turns
   * can be sampled in one call per agent; 1 (the default) samples each item on its own.
   */
  protected get itemsPerUpdate(): number {
    return 1;
  }

  /** How evaluation rolls out: CoMLRL's MAGRPO evaluation plays every turn, whatever the early-termination threshold. */
  protected get evaluationSettings(): RolloutSettings {
    return { ...this.rolloutSettings, earlyTerminationThreshold: null };
  }

  /** One rolled-out item's samples (the episode's tree is `root`). */
  protected abstract samplesOf(rollout: Awaited<ReturnType<typeof rolloutItem>>, itemIndex: number): Promise<S[]>;

  /** One agent's samples of one turn, as the minibatches of its update (shuffled with host.random). */
  protected abstract minibatchesOf(group: S[]): M[];

  /** A minibatch with no samples: a rank with fewer minibatches still steps with its peers. */
  protected abstract emptyMinibatch(): M;

  /**
   * One minibatch's optimizer steps, each taken through `step` (the host's, which checks, counts and logs them), the
   * policy's one through policyStep.
   */
  protected abstract step(agent: Agent, minibatch: M, step: StepFunction): Promise<void>;

  /**
   * The agent's policy step: `take` runs a step request with the given backward, which accumulates the policy loss
   * of `rows`; the loss's metrics are logged under agent_i/ after the step.
   */
  protected async policyStep(agent: Agent, rows: readonly PolicyRow[], take: (backward: () => Promise<number>) => Promise<unknown>): Promise<void> {
    let metrics: Record<string, number> = {};
    await take(async () => {
      const result = await this.policyLoss.backward(agent, rows, this.policySteps[agent.index]);
      metrics = result.metrics;
      return result.loss;
    });
    if (Object.keys(metrics).length > 0) this.policyMetrics[agent.index].push(Object.fromEntries(Object.entries(metrics).map(([k, v]) => [`agent_${agent.index}/${k}`, v])));
  }

  /** What of a sample the train metrics need, sent from every rank to rank 0. */
  protected abstract metricFields(sample: S): P;

  /** The train metrics of one turn's samples (over every rank), unprefixed. */
  protected abstract turnMetrics(group: P[]): Record<string, number>;

  /** The rewards the progress bar averages. */
  protected abstract shownRewards(samples: S[]): number[];

  /** The order of an agent's drained samples before the update plans them. */
  protected drainOrder(samples: S[]): S[] {
    return samples;
  }

  /** Whether agents may update at the same time (only on distinct devices). */
  protected get concurrentUpdates(): boolean {
    return this.environment.concurrent;
  }

  /** Agent's formatted turn-1 prompt for an item. */
  promptFor(agent: number, item: Item): string {
    return formatPrompt(this.environment.formatters[agent], item, agent);
  }

  /** K sampled completions per prompt for each agent: prompts[agent] → texts[agent][prompt][k]. */
  async generate(prompts: string[][], k = this.config.numGenerations): Promise<string[][][]> {
    if (prompts.length !== this.agents.length) throw new RangeError(`generate: ${prompts.length} prompt lists for ${this.agents.length} agents`);
    return Promise.all(this.agents.map(async (agent, i) => (await agent.sample(prompts[i], k)).texts));
  }

  /** Rolls out each item and returns its samples, advancing the env-step counter. */
  async collect(items: Item[], firstItemIndex = 0): Promise<S[]> {
    const samples: S[] = [];
    for (let i = 0; i < items.length; i++) {
      const environment = this.presampled.get(firstItemIndex + i) ?? this.environment;
      this.presampled.delete(firstItemIndex + i);
      const rollout = await rolloutItem(items[i], firstItemIndex + i, environment, this.rolloutSettings, this.progress.envStep);
      this.progress.envStep += rollout.envSteps;
      samples.push(...(await this.samplesOf(rollout, firstItemIndex + i)));
    }
    return samples;
  }

  /**
   * One update: per agent, per turn (ascending), the turn's minibatches, once per pass of the agent's objective
   * (numIterations), one step each. Minibatches are planned (and shuffled) in agent order before any agent runs, so
   * concurrent agents train as sequential ones do.
   */
  async update(samples: S[]): Promise<UpdateRecord[]> {
    const plans = this.agents.map((agent) => {
      const mine = samples.filter((s) => s.agent === agent.index);
      const passes = this.policyLoss.passes(agent.index);
      return [...new Set(mine.map((s) => s.turn))]
        .sort((a, b) => a - b)
        .flatMap((turn) => {
          const minibatches = this.minibatchesOf(mine.filter((s) => s.turn === turn));
          return Array.from({ length: passes }, () => minibatches).flat();
        });
    });
    // Data parallel: every rank takes as many steps per agent as the rank with the most minibatches; the extra ones add nothing.
    const counts = await this.host.agreeMax(plans.map((plan) => plan.length));
    plans.forEach((plan, i) => plan.push(...Array.from({ length: counts[i] - plan.length }, () => this.emptyMinibatch())));
    const results = await this.host.stepAgents(this.agents.length, this.concurrentUpdates, async (i, step) => {
      for (const minibatch of plans[i]) {
        await this.step(this.agents[i], minibatch, step);
        this.policySteps[i]++;
      }
    });
    // Logged once every agent has stepped, in agent order, so that agents on lanes of their own log as agents in turn.
    for (const records of this.policyMetrics) for (const record of records.splice(0)) this.host.logger?.log("update", record, this.progress.envStep);
    this.logTrainMetrics(await this.host.gather(samples.map((s) => this.metricFields(s))));
    return results;
  }

  private logTrainMetrics(samples: readonly P[]): void {
    const logger = this.host.logger;
    if (!logger || samples.length === 0) return;
    const metrics: Record<string, number> = {};
    for (const turn of [...new Set(samples.map((s) => s.turn))]) {
      for (const [name, value] of Object.entries(this.turnMetrics(samples.filter((s) => s.turn === turn)))) metrics[`turn_${turn + 1}/${name}`] = value;
    }
    logger.logTrain(metrics, Math.max(...samples.map((s) => s.envStep)));
  }

  /** Updates every agent whose buffer holds at least `minimum` samples (on any rank), and empties those buffers. */
  protected async drainBuffers(minimum: number): Promise<void> {
    const sizes = await this.host.agreeMax(this.buffers.map((buffer) => buffer.length));
    const ready = this.buffers.flatMap((_, agent) => (sizes[agent] >= minimum ? [agent] : []));
    if (ready.length === 0) return;
    await this.update(ready.flatMap((agent) => this.drainOrder(this.buffers[agent].splice(0))));
  }

  /** Buffers an item's samples, then updates the agents whose buffers are full (CoMLRL's IAC and MAAC do so per item). */
  protected async bufferSamples(samples: S[]): Promise<void> {
    for (const sample of samples) this.buffers[sample.agent].push(sample);
    await this.drainBuffers(this.config.rolloutBufferSize);
  }

  /** Throws when samples are buffered that a checkpoint would lose. */
  assertDrained(): void {
    if (this.buffers.some((b) => b.length > 0)) throw new Error("saveCheckpoint: rollout buffers must be drained first (checkpoints are taken at epoch ends)");
  }

  /**
   * Epochs over the train items: roll out each, buffer its samples, update the agents whose buffers are full, the
   * rest at the epoch's end; evaluation every evalInterval items; the progress bar shows the latest rewards.
   */
  trainStage(): TrainingStage {
    const c = this.config;
    const items = this.options.trainDataset;
    const recent: number[] = [];
    return {
      name: "train",
      epochs: c.numTrainEpochs,
      steps: items.length,
      evaluateBefore: (b) => c.evalInterval > 0 && b % c.evalInterval === 0 && Boolean(this.options.evalDataset?.length),
      runStep: async (b) => {
        const group = this.itemsPerUpdate;
        // Sharded, a rank runs every worldSize-th item: a block of consecutive items is not its own to sample ahead.
        if (group > 1 && !this.host.sharded && b % group === 0) {
          this.presampled.clear();
          const ahead = items.slice(b, b + group);
          (await presampleRoots(ahead, b, this.environment, this.rolloutSettings)).forEach((environment, i) => this.presampled.set(b + i, environment));
        }
        const samples = await this.collect([items[b]], b);
        recent.push(...this.shownRewards(samples));
        recent.splice(0, Math.max(0, recent.length - SHOWN_REWARDS));
        await this.bufferSamples(samples);
        return { [`reward (last ${SHOWN_REWARDS})`]: meanOrZero(recent) };
      },
      endEpoch: () => this.drainBuffers(1),
    };
  }

  /** Held-out evaluation (COMLRL-SPEC §3.4) on the agents' evaluation streams, re-seeded so every eval draws alike. */
  async evaluate(numSamples = this.config.evalNumSamples): Promise<Record<string, number>> {
    const items = (this.options.evalDataset ?? []).slice(0, numSamples);
    return evaluateAgents(this.agents, this.environment, this.evaluationSettings, { items, seed: this.config.seed, envStep: this.progress.envStep, logger: this.host.logger, hooks: this.options });
  }

  /** Chunks of `size` in order. */
  protected static chunks<T>(list: readonly T[], size: number): T[][] {
    return Array.from({ length: Math.ceil(list.length / size) }, (_, m) => list.slice(m * size, (m + 1) * size));
  }
}
