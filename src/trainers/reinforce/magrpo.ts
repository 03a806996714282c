// MAGRPO: multi-agent REINFORCE with group baselines on one shared reward (COMLRL-SPEC §3.1–§3.4). The lifecycle
// (schedule, eval cadence, checkpoints, saving, disposal) is the shared Trainer's; this file holds MAGRPO's rollout
// settings, its buffers, the advantages and the update rule.
import { magrpoConfig, type MAGRPOConfig, type MAGRPOConfigInput } from "../../config/index.js";
import { advantages, shapeReturns } from "../../rollout/advantages.js";
import { formatPrompt } from "../../rollout/formatters.js";
import { forEachAgent, rolloutItem, sampleRows, type RolloutEnvironment, type RolloutSettings, type RolloutTimings } from "../../rollout/tree.js";
import type { Item, NodeSample } from "../../rollout/types.js";
import { checkTask, defaultOutputDir, setUpActors } from "../actors.js";
import { registerAgents, resolveAgentCount, type Agent } from "../agents.js";
import { evaluateAgents, type EvalLoggerInput } from "../evaluation.js";
import { checkOneOf, checkOptionKeys } from "../options.js";
import { TASK_OPTION_KEYS, type TaskOptions } from "../task-options.js";
import { bufferedItemStage } from "../item-stage.js";
import { Trainer, type TrainingStage } from "../trainer.js";

export type { EvalLoggerInput };
export type { Stateful, TrainOptions, TrainProgress } from "../trainer.js";

export interface MAGRPOTrainerOptions extends TaskOptions<MAGRPOConfigInput | MAGRPOConfig> {
  /** "node": one reward call per node with all its joint actions (default); "jointAction": one call each. */
  rewardBatching?: "node" | "jointAction";
  /**
   * "batched" (default): one forward/backward over all of a minibatch's completions. "perCompletion": one per
   * completion, as CoMLRL does — kept as the bench suite's baseline.
   */
  scoring?: "batched" | "perCompletion";
  /** Log a table of sample completions every this many items (0: never). */
  sampleLogInterval?: number;
}

export const MAGRPO_OPTION_KEYS = { ...TASK_OPTION_KEYS, rewardBatching: true, scoring: true, sampleLogInterval: true } as const satisfies Record<
  keyof MAGRPOTrainerOptions,
  true
>;

/** Seconds spent per phase of training since the trainer was made (evaluation is not counted). */
export interface TrainerTimings extends RolloutTimings {
  update: number;
}

export interface UpdateMetrics {
  agent: number;
  loss: number;
  gradNorm: number;
  samples: number;
}

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

export class MAGRPOTrainer extends Trainer<MAGRPOConfig> {
  readonly algorithm: string = "MAGRPO";
  readonly timings: TrainerTimings = { generation: 0, referenceKl: 0, reward: 0, update: 0 };
  protected readonly buffers: NodeSample[][];

  /** Use the static create(), which loads the agents. */
  constructor(
    config: MAGRPOConfig,
    readonly agents: Agent[],
    protected readonly options: MAGRPOTrainerOptions,
    protected readonly environment: RolloutEnvironment,
    outputDir: string,
  ) {
    super(config, options, outputDir);
    this.buffers = agents.map(() => []);
    environment.timings = this.timings;
  }

  /** The config builder of this algorithm (baselines override the advantage mode's default). */
  static buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig {
    return magrpoConfig(input as MAGRPOConfigInput);
  }

  static async create<T extends MAGRPOTrainer>(this: TrainerClass<T>, options: MAGRPOTrainerOptions): Promise<T> {
    checkOptionKeys(options, MAGRPO_OPTION_KEYS, `${this.name}.create()`);
    checkOneOf(options.rewardBatching, ["node", "jointAction"], "rewardBatching");
    checkOneOf(options.scoring, ["batched", "perCompletion"], "scoring");
    const config = this.buildConfig(resolveAgentCount(options.config, options.numAgents, options.agents));
    checkTask(options, config, "MAGRPO");
    const { agents, sources, environment } = await setUpActors(options, config);
    const trainer = new this(config, agents, options, environment, defaultOutputDir(this.name, options.outputDir));
    registerAgents(trainer.components, agents, sources);
    return trainer;
  }

  protected get rolloutSettings(): RolloutSettings {
    const c = this.config;
    return {
      numGenerations: c.numGenerations,
      numTurns: c.numTurns,
      jointMode: c.jointMode,
      earlyTerminationThreshold: c.earlyTerminationThreshold,
      externalPromptPassthrough: c.externalPromptPassthrough,
      rewardBatching: this.options.rewardBatching ?? "node",
    };
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

  /** The environment training rollouts run in; evaluation always uses the task's (MARLHF scores with its reward model). */
  protected get trainingEnvironment(): RolloutEnvironment {
    return this.environment;
  }

  /** Rolls out each item's tree and returns every agent's node samples, advancing the env-step counter. */
  async collect(items: Item[], firstItemIndex = 0): Promise<NodeSample[]> {
    const samples: NodeSample[] = [];
    for (let i = 0; i < items.length; i++) {
      const rollout = await rolloutItem(items[i], firstItemIndex + i, this.trainingEnvironment, this.rolloutSettings, this.progress.envStep);
      this.progress.envStep += rollout.envSteps;
      samples.push(...rollout.samples);
      if (this.shouldLogSamples(firstItemIndex + i)) this.logger!.logSamples(sampleRows(rollout.root), this.progress.envStep);
    }
    return samples;
  }

  /** Epochs over the train items: roll out each, buffer its samples, update agents whose buffers are full. */
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
        shownRewards: (samples) => samples.filter((s) => s.agent === 0 && s.turn === 0).map((s) => s.nodeMeanReward),
      }),
    ];
  }


  /**
   * One pass of updates (COMLRL-SPEC §3.3): per agent, per turn (ascending), shuffled minibatches of trainBatchSize
   * samples; each minibatch is one batched backward over all its completions and one AdamW step. The shuffles are
   * drawn in agent order before any agent runs, and updates are logged in agent order, so concurrent agents ("mp")
   * train and log exactly as sequential ones do.
   */
  async update(samples: NodeSample[]): Promise<UpdateMetrics[]> {
    const started = performance.now();
    const c = this.config;
    const plans = this.agents.map((agent) => {
      const mine = samples.filter((s) => s.agent === agent.index);
      const turns = [...new Set(mine.map((s) => s.turn))].sort((a, b) => a - b);
      return turns.flatMap((turn) => {
        const group = this.random.shuffle(mine.filter((s) => s.turn === turn));
        return Array.from({ length: Math.ceil(group.length / c.trainBatchSize) }, (_, m) => group.slice(m * c.trainBatchSize, (m + 1) * c.trainBatchSize));
      });
    });
    // Data parallel: every rank takes as many steps per agent as the rank with the most minibatches; the extra ones add nothing.
    const counts = await this.agreeMax(plans.map((plan) => plan.length));
    plans.forEach((plan, i) => plan.push(...Array.from({ length: counts[i] - plan.length }, (): NodeSample[] => [])));
    const run = async (agent: Agent) => {
      const results: UpdateMetrics[] = [];
      for (const minibatch of plans[agent.index]) results.push(await this.step(agent, minibatch));
      return results;
    };
    const perAgent = await forEachAgent(this.agents.length, this.environment.concurrent, (i) => run(this.agents[i]));
    this.timings.update += (performance.now() - started) / 1000;
    const results = perAgent.flat();
    for (const r of results) {
      this.recordUpdate(`agent_${r.agent}`, { loss: r.loss, gradNorm: r.gradNorm, learningRate: this.agents[r.agent].optimizer.learningRates()[0], samples: r.samples });
    }
    this.logTrainMetrics(await this.gatherFromRanks(samples.map(({ turn, nodeMeanReward, nodeMeanReturn, referenceKl, envStep }) => ({ turn, nodeMeanReward, nodeMeanReturn, referenceKl, envStep }))));
    return results;
  }

  /** Loss = (1/|mb|) Σ_samples (1/K) Σ_k −A_k · log π(completion_k), every completion token scored. */
  protected async step(agent: Agent, minibatch: NodeSample[]): Promise<UpdateMetrics> {
    const c = this.config;
    const prompts: number[][] = [];
    const completions: Int32Array[] = [];
    const weights: number[] = [];
    for (const sample of minibatch) {
      const shaped = c.referenceKlEnabled ? shapeReturns(sample.returns, sample.referenceKl, c.referenceKlCoef) : sample.returns;
      const a = advantages(shaped, c.advantageMode, c.advantageNormalization);
      sample.completionIds.forEach((ids, k) => {
        prompts.push(sample.promptIds);
        completions.push(ids);
        weights.push(a[k] / (sample.completionIds.length * minibatch.length));
      });
    }
    agent.model.zeroGrad();
    let loss = 0;
    if (this.options.scoring === "perCompletion") {
      for (let i = 0; i < completions.length; i++) loss += (await agent.model.policyGradientBackward([prompts[i]], [completions[i]], [weights[i]], 1)).loss;
    } else if (completions.length > 0) {
      loss = (await agent.model.policyGradientBackward(prompts, completions, weights, 1)).loss;
    }
    if (!Number.isFinite(loss)) {
      // A non-finite loss would poison the weights: drop this minibatch's gradient and say so.
      agent.model.zeroGrad();
      this.console(`agent ${agent.index}: non-finite loss (${loss}); minibatch of ${minibatch.length} skipped`);
      await agent.optimizer.step({ samples: 0, loss: 0 }); // no gradient here: a no-op, but data-parallel peers step together
      return { agent: agent.index, loss, gradNorm: NaN, samples: minibatch.length };
    }
    const step = await agent.optimizer.step({ maxGradNorm: c.maxGradNorm ?? undefined, samples: minibatch.length, loss });
    return { agent: agent.index, loss: step.loss ?? loss, gradNorm: step.gradNorm, samples: step.samples };
  }

  /** Held-out evaluation (COMLRL-SPEC §3.4) on the agents' evaluation streams, re-seeded so every eval draws alike. */
  async evaluate(numSamples = this.config.evalNumSamples): Promise<Record<string, number>> {
    const items = (this.options.evalDataset ?? []).slice(0, numSamples);
    return evaluateAgents(this.agents, this.environment, this.rolloutSettings, { items, seed: this.config.seed, envStep: this.progress.envStep, logger: this.logger, hooks: this.options });
  }

  protected override assertCheckpointable(): void {
    if (this.buffers.some((b) => b.length > 0)) throw new Error("saveCheckpoint: rollout buffers must be drained first (checkpoints are taken at epoch ends)");
  }

  /** Updates every agent whose buffer holds at least `minimum` samples, and empties those buffers. */
  protected async drainBuffers(minimum: number): Promise<void> {
    const sizes = await this.agreeMax(this.buffers.map((buffer) => buffer.length));
    const ready = this.buffers.flatMap((_, agent) => (sizes[agent] >= minimum ? [agent] : []));
    if (ready.length === 0) return;
    const samples = ready.flatMap((agent) => this.buffers[agent].splice(0).sort((a, b) => a.envStep - b.envStep));
    await this.update(samples);
  }

  protected logTrainMetrics(samples: readonly Pick<NodeSample, "turn" | "nodeMeanReward" | "nodeMeanReturn" | "referenceKl" | "envStep">[]): void {
    if (!this.logger || samples.length === 0) return;
    const metrics: Record<string, number> = {};
    const c = this.config;
    for (const turn of [...new Set(samples.map((s) => s.turn))]) {
      const group = samples.filter((s) => s.turn === turn);
      metrics[`turn_${turn + 1}/reward_mean`] = mean(group.map((s) => s.nodeMeanReward));
      metrics[`turn_${turn + 1}/expected_return`] = mean(group.map((s) => s.nodeMeanReturn));
      if (c.referenceKlEnabled) {
        const kl = mean(group.flatMap((s) => s.referenceKl));
        metrics[`turn_${turn + 1}/reference_kl_mean`] = kl;
        metrics[`turn_${turn + 1}/reference_kl_penalty_mean`] = kl * c.referenceKlCoef;
      }
    }
    this.logger.logTrain(metrics, Math.max(...samples.map((s) => s.envStep)));
  }

  private shouldLogSamples(itemIndex: number): boolean {
    const interval = this.options.sampleLogInterval ?? 0;
    return this.logger !== null && interval > 0 && itemIndex % interval === 0;
  }
}

export type TrainerClass<T> = {
  new (config: MAGRPOConfig, agents: Agent[], options: MAGRPOTrainerOptions, environment: RolloutEnvironment, outputDir: string): T;
  buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig;
  name: string;
};
