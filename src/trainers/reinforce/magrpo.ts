// MAGRPO: multi-agent REINFORCE with group baselines on one shared reward (COMLRL-SPEC §3.1–§3.4). The rollout tree,
// agents, logging and saving are shared machinery; this file holds the training loop and the update rule.
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { magrpoConfig, planPlacement, type MAGRPOConfig, type MAGRPOConfigInput } from "../../config/index.js";
import { CheckpointError, loadCheckpoint, pruneCheckpoints, resolveCheckpoint, saveCheckpoint } from "../../checkpoint/checkpoint.js";
import { MetricsLogger, type MetricsLoggerState, type SampleRow } from "../../logging/metrics-logger.js";
import { ProgressBar } from "../../logging/progress.js";
import type { WandbConfig } from "../../logging/wandb.js";
import type { CausalLM } from "../../models/causal-lm.js";
import type { ComlrlTokenizer } from "../../models/tokenizer.js";
import { runtimeInfo } from "../../runtime.js";
import { advantages, shapeReturns } from "../../rollout/advantages.js";
import { buildFormatters, formatPrompt } from "../../rollout/formatters.js";
import { RewardProcessors } from "../../rollout/rewards.js";
import { rolloutItem, type RolloutEnvironment, type RolloutSettings, type RolloutTimings } from "../../rollout/tree.js";
import type { ExternalTransition, Formatter, Item, NodeSample, RewardFunction, RewardProcessor } from "../../rollout/types.js";
import { SeededRandom } from "../../util/random.js";
import { buildAgents, resolveModelSources, resolveTokenizers, type Agent, type ModelSource } from "../agents.js";

export interface EvalLoggerInput {
  /** [agent][sample][turn] */
  agentCompletionsTurns: string[][][];
  items: Item[];
}

export interface MAGRPOTrainerOptions {
  agentModel?: ModelSource | null;
  agents?: ModelSource[] | null;
  /** The agent count; must agree with config.numAgents when both are given. */
  numAgents?: number;
  tokenizer?: ComlrlTokenizer | ComlrlTokenizer[] | null;
  rewardFunc: RewardFunction;
  rewardProcessor?: RewardProcessor;
  /** "node": one reward call per node with all its joint actions (default); "jointAction": one call each. */
  rewardBatching?: "node" | "jointAction";
  formatters?: Formatter | Formatter[] | null;
  externalTransition?: ExternalTransition | null;
  trainDataset: Item[];
  evalDataset?: Item[] | null;
  config?: MAGRPOConfigInput | MAGRPOConfig;
  /** Where metrics, plots and saved models go (default runs/<algorithm>-<timestamp>). */
  outputDir?: string;
  tensorboard?: boolean;
  wandbConfig?: WandbConfig | null;
  /** No progress bar or console lines. */
  quiet?: boolean;
  /**
   * "batched" (default): one forward/backward over all of a minibatch's completions. "perCompletion": one per
   * completion, as CoMLRL does — kept as the bench suite's baseline.
   */
  scoring?: "batched" | "perCompletion";
  /** Log a table of sample completions every this many items (0: never). */
  sampleLogInterval?: number;
  evalLogger?: (input: EvalLoggerInput) => unknown | Promise<unknown>;
  evalAggregator?: (result: unknown, numTurns: number) => Record<string, number>;
  /** Objects whose stateDict() checkpoints save and loadStateDict() resume restores, in this order. */
  stateful?: Stateful[];
}

/** Something whose state a checkpoint saves and restores (a stateful dataset, a curriculum, a callback). */
export interface Stateful {
  stateDict(): unknown;
  loadStateDict(state: unknown): void;
}

export interface TrainOptions {
  /** Where checkpoint-<completed epochs>/ directories go; checkpoints are off without it. */
  checkpointDir?: string;
  /** Save every this many completed epochs (default 1), and always at the end. */
  checkpointInterval?: number;
  /** A checkpoint directory, or "latest" for the newest complete one in checkpointDir. */
  resumeFromCheckpoint?: string;
  /** Keep only the newest N checkpoints (older ones are removed after a new one is complete). */
  keepLast?: number;
}

/** Training progress: where train() is and what it has done. Checkpoints save exactly this. */
export interface TrainProgress {
  epoch: number;
  itemIndex: number;
  envStep: number;
}

/** Seconds spent per phase since the trainer was made. */
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

export class MAGRPOTrainer {
  readonly algorithm: string = "MAGRPO";
  readonly progress: TrainProgress = { epoch: 0, itemIndex: 0, envStep: 0 };
  readonly timings: TrainerTimings = { generation: 0, referenceKl: 0, reward: 0, update: 0 };
  protected readonly buffers: NodeSample[][];
  protected readonly random: SeededRandom;
  protected logger: MetricsLogger | null = null;
  /** Where metrics go: outputDir, or a resume-* subdirectory when resuming over an earlier run's files. */
  protected logDir: string;
  private resumedLoggerState: MetricsLoggerState | null = null;

  /** Use the static create(), which loads the agents. */
  constructor(
    readonly config: MAGRPOConfig,
    readonly agents: Agent[],
    protected readonly options: MAGRPOTrainerOptions,
    protected readonly environment: RolloutEnvironment,
    readonly outputDir: string,
  ) {
    this.buffers = agents.map(() => []);
    this.random = new SeededRandom(config.seed);
    environment.timings = this.timings;
    this.logDir = outputDir;
  }

  /** The config builder of this algorithm (baselines override the advantage mode's default). */
  static buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig {
    return magrpoConfig(input as MAGRPOConfigInput);
  }

  static async create<T extends MAGRPOTrainer>(this: TrainerClass<T>, options: MAGRPOTrainerOptions): Promise<T> {
    if (typeof options.rewardFunc !== "function") throw new TypeError("rewardFunc must be a function.");
    const config = this.buildConfig({ ...(options.config ?? {}), ...(options.numAgents !== undefined && !options.config?.numAgents ? { numAgents: options.numAgents } : {}) });
    if (options.numAgents !== undefined && options.numAgents !== config.numAgents) {
      throw new RangeError(`numAgents (${options.numAgents}) must match config.numAgents (${config.numAgents})`);
    }
    if (config.numTurns > 1 && !options.externalTransition) throw new Error("Multi-turn MAGRPO requires an externalTransition");
    if (!Array.isArray(options.trainDataset) || options.trainDataset.length === 0) throw new TypeError("trainDataset must be a non-empty array of items");
    const n = config.numAgents;
    const sources = resolveModelSources(options.agentModel, options.agents, n);
    const tokenizers = await resolveTokenizers(options.agentModel, options.agents, options.tokenizer, sources);
    const info = runtimeInfo();
    const placement = planPlacement(config, { cudaAvailable: info.cudaAvailable, deviceCount: info.cudaDeviceCount }, n);
    const agents = await buildAgents({
      sources,
      tokenizers,
      devices: placement.agentDevices,
      referenceDevices: config.referenceKlEnabled ? placement.referenceDevices : null,
      dtype: config.dtype,
      seed: config.seed,
      learningRate: config.agentLearningRate,
      sampling: { maxNewTokens: config.maxNewTokens, temperature: config.temperature, topP: config.topP, topK: config.topK },
    });
    const environment: RolloutEnvironment = {
      policies: agents,
      formatters: buildFormatters(options.formatters, n),
      rewardFunc: options.rewardFunc,
      rewardProcessor: options.rewardProcessor ?? RewardProcessors.identity(),
      externalTransition: options.externalTransition ?? null,
      concurrent: placement.concurrent,
    };
    const outputDir = options.outputDir ?? path.join("runs", `${this.name.replace(/Trainer$/, "").toLowerCase()}-${new Date().toISOString().replace(/[:.]/g, "-")}`);
    return new this(config, agents, options, environment, outputDir);
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

  /** Rolls out each item's tree and returns every agent's node samples, advancing the env-step counter. */
  async collect(items: Item[], firstItemIndex = 0): Promise<NodeSample[]> {
    const samples: NodeSample[] = [];
    for (let i = 0; i < items.length; i++) {
      const rollout = await rolloutItem(items[i], firstItemIndex + i, this.environment, this.rolloutSettings, this.progress.envStep);
      this.progress.envStep += rollout.envSteps;
      samples.push(...rollout.samples);
      if (this.shouldLogSamples(firstItemIndex + i)) this.logSamples(rollout.root);
    }
    return samples;
  }

  /**
   * One pass of updates (COMLRL-SPEC §3.3): per agent, per turn (ascending), shuffled minibatches of trainBatchSize
   * samples; each minibatch is one batched backward over all its completions and one AdamW step.
   */
  async update(samples: NodeSample[]): Promise<UpdateMetrics[]> {
    const started = performance.now();
    const results: UpdateMetrics[] = [];
    const c = this.config;
    const perAgent = this.agents.map((agent) => samples.filter((s) => s.agent === agent.index));
    const run = async (agent: Agent) => {
      const mine = perAgent[agent.index];
      const turns = [...new Set(mine.map((s) => s.turn))].sort((a, b) => a - b);
      for (const turn of turns) {
        const group = this.random.shuffle(mine.filter((s) => s.turn === turn));
        for (let start = 0; start < group.length; start += c.trainBatchSize) {
          results.push(await this.step(agent, group.slice(start, start + c.trainBatchSize)));
        }
      }
    };
    if (this.environment.concurrent) await Promise.all(this.agents.map(run));
    else for (const agent of this.agents) await run(agent);
    this.timings.update += (performance.now() - started) / 1000;
    this.logTrainMetrics(samples);
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
    } else {
      loss = (await agent.model.policyGradientBackward(prompts, completions, weights, 1)).loss;
    }
    if (!Number.isFinite(loss)) {
      // A non-finite loss would poison the weights: drop this minibatch's gradient and say so.
      agent.model.zeroGrad();
      this.console(`agent ${agent.index}: non-finite loss (${loss}); minibatch of ${minibatch.length} skipped`);
      return { agent: agent.index, loss, gradNorm: NaN, samples: minibatch.length };
    }
    const { gradNorm } = await agent.optimizer.step({ maxGradNorm: c.maxGradNorm ?? undefined });
    return { agent: agent.index, loss, gradNorm, samples: minibatch.length };
  }

  /** Held-out evaluation (COMLRL-SPEC §3.4): one sample per agent per turn along a single path. */
  async evaluate(numSamples = this.config.evalNumSamples): Promise<Record<string, number>> {
    const items = (this.options.evalDataset ?? []).slice(0, numSamples);
    if (items.length === 0) return {};
    const c = this.config;
    const settings: RolloutSettings = { ...this.rolloutSettings, numGenerations: 1, jointMode: "aligned" };
    const rewardsByTurn: number[][] = Array.from({ length: c.numTurns }, () => []);
    const returnsByTurn: number[][] = Array.from({ length: c.numTurns }, () => []);
    const completionsTurns: string[][][] = this.agents.map(() => []);
    for (let i = 0; i < items.length; i++) {
      const { root } = await rolloutItem(items[i], i, this.environment, settings, 0);
      const path: number[] = [];
      const texts: string[][] = this.agents.map(() => []);
      for (let node: typeof root | null = root; node; node = node.children[0]) {
        path.push(node.rewards[0]);
        node.texts.forEach((t, agent) => texts[agent].push(t[0]));
      }
      path.forEach((r, t) => {
        rewardsByTurn[t].push(r);
        returnsByTurn[t].push(path.slice(t).reduce((a, b) => a + b, 0));
      });
      texts.forEach((t, agent) => completionsTurns[agent].push(t));
    }
    const metrics: Record<string, number> = {};
    rewardsByTurn.forEach((rs, t) => {
      if (rs.length === 0) return;
      metrics[`turn_${t + 1}/reward_mean`] = mean(rs);
      metrics[`turn_${t + 1}/expected_return`] = mean(returnsByTurn[t]);
    });
    if (this.options.evalLogger && this.options.evalAggregator) {
      const result = await this.options.evalLogger({ agentCompletionsTurns: completionsTurns, items });
      Object.assign(metrics, this.options.evalAggregator(result, c.numTurns));
    }
    this.logger?.logEval(metrics, this.progress.envStep);
    return Object.fromEntries(Object.entries(metrics).map(([key, value]) => [`eval/${key}`, value]));
  }

  /**
   * The whole run: epochs over the train items, periodic eval, buffer drains, a final drain per epoch, and (with
   * checkpointDir) a checkpoint after every checkpointInterval epochs and at the end. With resumeFromCheckpoint the
   * run continues exactly where that checkpoint left off; numTrainEpochs counts all epochs, before and after.
   */
  async train(options: TrainOptions = {}): Promise<void> {
    const c = this.config;
    const items = this.options.trainDataset;
    const interval = options.checkpointInterval ?? 1;
    if (!Number.isInteger(interval) || interval < 1) throw new RangeError(`checkpointInterval must be a positive integer, got ${interval}`);
    if (options.resumeFromCheckpoint) await this.resume(await resolveCheckpoint(options.resumeFromCheckpoint, options.checkpointDir));
    mkdirSync(this.logDir, { recursive: true });
    this.logger ??= await this.openLogger();
    const total = c.numTrainEpochs * items.length;
    const bar = new ProgressBar({ total, label: this.algorithm, quiet: this.options.quiet ?? false, start: this.progress.epoch * items.length });
    const rewardWindow: number[] = [];
    try {
      while (this.progress.epoch < c.numTrainEpochs) {
        for (; this.progress.itemIndex < items.length; this.progress.itemIndex++) {
          const b = this.progress.itemIndex;
          if (c.evalInterval > 0 && b % c.evalInterval === 0 && this.options.evalDataset?.length) {
            const evalMetrics = await this.evaluate();
            const first = evalMetrics["eval/turn_1/reward_mean"];
            if (first !== undefined) bar.log(`eval @ step ${this.progress.envStep}: turn 1 reward ${first.toFixed(3)}`);
          }
          const samples = await this.collect([items[b]], b);
          rewardWindow.push(...samples.filter((s) => s.agent === 0 && s.turn === 0).map((s) => s.nodeMeanReward));
          rewardWindow.splice(0, Math.max(0, rewardWindow.length - 50));
          for (const sample of samples) this.buffers[sample.agent].push(sample);
          if (this.buffers.some((buffer) => buffer.length >= c.rolloutBufferSize)) await this.drainBuffers(c.rolloutBufferSize);
          bar.update(this.progress.epoch * items.length + b + 1, { epoch: this.progress.epoch + 1, "reward (last 50)": mean(rewardWindow) });
        }
        await this.drainBuffers(1);
        this.progress.epoch++;
        this.progress.itemIndex = 0;
        const last = this.progress.epoch === c.numTrainEpochs;
        if (options.checkpointDir && (last || this.progress.epoch % interval === 0)) {
          const started = performance.now();
          const dir = await this.saveCheckpoint(options.checkpointDir);
          if (options.keepLast) await pruneCheckpoints(options.checkpointDir, options.keepLast);
          bar.log(`checkpoint ${dir} (${((performance.now() - started) / 1000).toFixed(1)} s)`);
        }
      }
    } finally {
      bar.finish();
    }
  }

  /** Saves checkpoint-<completed epochs> under root; buffers are empty at epoch ends, so nothing is in flight. */
  async saveCheckpoint(root: string): Promise<string> {
    if (this.buffers.some((b) => b.length > 0)) throw new Error("saveCheckpoint: rollout buffers must be drained first (checkpoints are taken at epoch ends)");
    return saveCheckpoint(root, this.progress.epoch, this.agents, {
      kind: this.algorithm,
      progress: { ...this.progress },
      wandb: this.logger?.wandbRunIdentity() ?? null,
      state: this.checkpointState(),
    });
  }

  /** The trainer's own state beyond agents and progress; subclasses extend it. */
  protected checkpointState(): Record<string, unknown> {
    return {
      random: this.random.getState(),
      logger: this.logger?.state() ?? null,
      config: this.config,
      stateful: (this.options.stateful ?? []).map((s) => s.stateDict()),
    };
  }

  protected restoreCheckpointState(state: Record<string, unknown>): void {
    this.random.setState(state.random as number);
    this.resumedLoggerState = (state.logger as MetricsLoggerState | null) ?? null;
    const saved = (state.stateful as unknown[]) ?? [];
    const targets = this.options.stateful ?? [];
    if (saved.length !== targets.length) throw new CheckpointError(`the checkpoint holds ${saved.length} stateful objects, this trainer was given ${targets.length}`);
    targets.forEach((target, i) => target.loadStateDict(saved[i]));
  }

  private async resume(dir: string): Promise<void> {
    const restored = await loadCheckpoint(dir, this.algorithm, this.agents);
    Object.assign(this.progress, restored.progress);
    this.restoreCheckpointState(restored.state);
    // Metrics after the checkpoint go beside the first run's, not over them.
    if (existsSync(path.join(this.outputDir, "metrics.jsonl"))) this.logDir = path.join(this.outputDir, `resume-${this.progress.epoch}-${Date.now()}`);
    this.console(`resumed from ${dir}: epoch ${this.progress.epoch}, env step ${this.progress.envStep}`);
  }

  /** Updates every agent whose buffer holds at least `minimum` samples, and empties those buffers. */
  protected async drainBuffers(minimum: number): Promise<void> {
    const ready = this.buffers.flatMap((buffer, agent) => (buffer.length >= minimum ? [agent] : []));
    if (ready.length === 0) return;
    const samples = ready.flatMap((agent) => this.buffers[agent].splice(0).sort((a, b) => a.envStep - b.envStep));
    await this.update(samples);
  }

  protected async openLogger(): Promise<MetricsLogger> {
    const logger = await MetricsLogger.create({
      outputDir: this.logDir,
      algorithm: this.algorithm,
      tensorboard: this.options.tensorboard ?? false,
      wandb: this.options.wandbConfig ?? null,
      runConfig: this.runConfig(),
      loggingSteps: this.config.loggingSteps,
      quiet: this.options.quiet ?? false,
    });
    if (this.resumedLoggerState) logger.loadState(this.resumedLoggerState);
    return logger;
  }

  /** What W&B records about the run. */
  protected runConfig(): Record<string, unknown> {
    return { algorithm: this.algorithm, ...this.config };
  }

  protected logTrainMetrics(samples: NodeSample[]): void {
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

  private logSamples(root: import("../../rollout/tree.js").RolloutNode): void {
    const rows: SampleRow[] = [];
    root.jointActions.forEach((ja, j) =>
      ja.forEach((k, agent) => rows.push({ turn: root.turn + 1, agent, prompt: root.prompts[agent], completion: root.texts[agent][k], reward: root.rewards[j] })),
    );
    this.logger!.logSamples(rows, this.progress.envStep);
  }

  protected console(message: string): void {
    if (!this.options.quiet) console.error(`[${this.algorithm}] ${message}`);
  }

  /** Writes agent_i/ in Hugging Face layout (weights, config, tokenizer) for every agent. */
  async saveModel(dir: string): Promise<void> {
    for (const agent of this.agents) {
      await agent.model.save(path.join(dir, `agent_${agent.index}`), { tokenizer: agent.tokenizer });
    }
    this.logger?.logTrain({ final_model_saved: 1 }, this.progress.envStep);
  }

  /** Frees every agent's model, reference and optimizer, and closes the logs. */
  async close(): Promise<void> {
    await this.logger?.close();
    this.logger = null;
    const seen = new Set<CausalLM>();
    for (const agent of this.agents) {
      agent.optimizer.dispose();
      agent.reference?.dispose();
      if (!seen.has(agent.model)) agent.model.dispose();
      seen.add(agent.model);
    }
  }
}

export type TrainerClass<T> = {
  new (config: MAGRPOConfig, agents: Agent[], options: MAGRPOTrainerOptions, environment: RolloutEnvironment, outputDir: string): T;
  buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig;
  name: string;
};
