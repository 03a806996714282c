// MAGRPO: multi-agent REINFORCE with group baselines on one shared reward (COMLRL-SPEC §3.1–§3.4). MAGRPOTrainer is
// the shared lifecycle around MAGRPOLearner, which MARLHF's RL phase also runs in its own host. The rollout plumbing
// (buffers, drains, minibatch planning, per-turn metrics, evaluation) is RolloutLearner's; this file holds MAGRPO's
// rollout settings, its advantages and its update rule.
import { magrpoConfig, type CentralizedMAGRPOConfig, type MAGRPOConfig, type MAGRPOConfigInput } from "../../config/index.js";
import { comlrlModelName, magrpoFamilyRunConfig } from "../../logging/run-config.js";
import { advantages, shapeReturns } from "../../rollout/advantages.js";
import { comlrlScoredCompletions } from "../../rollout/token-accounting.js";
import { sampleRows, type RolloutEnvironment, type RolloutSettings, type rolloutItem } from "../../rollout/tree.js";
import type { NodeSample } from "../../rollout/types.js";
import { defaultOutputDir, setUpActors } from "../actors.js";
import { construct } from "../construction.js";
import { registerAgents, resolveAgentCount, type Agent } from "../agents.js";
import type { EvalLoggerInput } from "../evaluation.js";
import type { StageHost, StepFunction, UpdateRecord } from "../lifecycle/stage-host.js";
import { checkOneOf, checkOptionKeys } from "../options.js";
import { RolloutLearner } from "../learner.js";
import { RolloutTrainer } from "../rollout-trainer.js";
import { TASK_OPTION_KEYS, type TaskOptions } from "../task-options.js";
import { ObjectiveSteps } from "./objectives.js";
import { meanOrZero } from "../../util/mean.js";

export type { EvalLoggerInput };
export type { Stateful, TrainOptions, TrainProgress } from "../lifecycle/trainer.js";

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

type MetricFields = Pick<NodeSample, "agent" | "turn" | "nodeMeanReward" | "nodeMeanReturn" | "referenceKl" | "envStep">;

/** MAGRPO: N agents trained on one shared reward by REINFORCE with group baselines over a rollout tree (docs/magrpo.md). */
export class MAGRPOTrainer extends RolloutTrainer<NodeSample, MAGRPOConfig, MAGRPOLearner> {
  readonly algorithm: string = "MAGRPO";

  /** Use the static create(), which loads the agents. */
  constructor(config: MAGRPOConfig, agents: Agent[], protected readonly options: MAGRPOTrainerOptions, environment: RolloutEnvironment, outputDir: string) {
    super(config, options, outputDir, (host) => new MAGRPOLearner(config, agents, options, environment, host));
  }

  protected comlrlRunConfig(): Record<string, unknown> {
    return magrpoFamilyRunConfig({ algorithm: this.algorithm, modelName: comlrlModelName(this.options), numAgents: this.agents.length, config: this.config });
  }

  /** The config builder of this algorithm (baselines override the advantage mode's default). */
  static buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig {
    return magrpoConfig(input as MAGRPOConfigInput);
  }

  /** Builds the trainer: validates options and config, loads the agents (and references), and registers them; a failure frees what was built. */
  static async create<T extends MAGRPOTrainer>(this: TrainerClass<T>, options: MAGRPOTrainerOptions): Promise<T> {
    checkOptionKeys(options, MAGRPO_OPTION_KEYS, `${this.name}.create()`);
    checkOneOf(options.rewardBatching, ["node", "jointAction"], "rewardBatching");
    checkOneOf(options.scoring, ["batched", "perCompletion"], "scoring");
    const config = this.buildConfig(resolveAgentCount(options.config, options.numAgents, options.agents));
    return construct({
      algorithm: "MAGRPO",
      options,
      config,
      load: () => setUpActors(options, config),
      make: (actors) => new this(config, actors.agents, options, actors.environment, defaultOutputDir(this.name, options.outputDir)),
      register: (trainer, actors) => registerAgents(trainer.components, actors.agents, actors.sources),
    });
  }
}

/** A MAGRPO trainer class (MAGRPOTrainer or a subclass), as the `this` of its static create(). */
export type TrainerClass<T> = {
  /** Builds the trainer from resolved parts; create() calls this. */
  new (config: MAGRPOConfig, agents: Agent[], options: MAGRPOTrainerOptions, environment: RolloutEnvironment, outputDir: string): T;
  /** The class's config from user input, with its defaults and checks. */
  buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig;
  /** The class name, used in error messages. */
  name: string;
};

/** The policy-gradient rows of a minibatch: every completion with its prompt and its weight in the loss. */
export interface PolicyRows {
  prompts: number[][];
  completions: Int32Array[];
  weights: number[];
}

/** MAGRPO's rollouts and updates, in the host of MAGRPOTrainer or of MARLHF's RL phase. */
export class MAGRPOLearner extends RolloutLearner<NodeSample, NodeSample[], MetricFields, MAGRPOConfig> {
  /** The agents' objectives beyond CoMLRL's default path (docs/objectives.md). */
  protected readonly objectiveSteps: ObjectiveSteps;

  constructor(config: MAGRPOConfig, agents: Agent[], protected override readonly options: MAGRPOTrainerOptions, environment: RolloutEnvironment, host: StageHost) {
    super(config, agents, options, environment, host);
    this.objectiveSteps = new ObjectiveSteps(config, agents, options.scoring ?? "batched");
    // CoMLRL's MAGRPO trains its agents in train mode: their dropout acts in the policy-gradient forwards.
    for (const agent of agents) agent.model.train();
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

  /**
   * Single-turn, an item gives each agent one sample, so its buffer fills (and the agent updates) after exactly
   * rolloutBufferSize items: the items of one buffer are sampled in one generation call per agent.
   */
  protected override get itemsPerUpdate(): number {
    return this.config.numTurns === 1 ? this.config.rolloutBufferSize : 1;
  }

  protected async samplesOf(rollout: Awaited<ReturnType<typeof rolloutItem>>, itemIndex: number): Promise<NodeSample[]> {
    const interval = this.options.sampleLogInterval ?? 0;
    if (this.host.logger && interval > 0 && itemIndex % interval === 0) this.host.logger.logSamples(sampleRows(rollout.root), this.progress.envStep);
    return rollout.samples;
  }

  /**
   * CoMLRL's MAGRPO buffers an item's samples node by node in env-step order and updates an agent as soon as its
   * buffer is full, also within an item. Under data parallelism every rank takes as many steps as the rank with the
   * most nodes, so that the drains (collective operations) line up.
   */
  protected override async bufferSamples(samples: NodeSample[]): Promise<void> {
    const steps = [...new Set(samples.map((s) => s.envStep))].sort((a, b) => a - b);
    const [count] = await this.host.agreeMax([steps.length]);
    for (let n = 0; n < count; n++) {
      for (const sample of samples) if (sample.envStep === steps[n]) this.buffers[sample.agent].push(sample);
      await this.drainBuffers(this.config.rolloutBufferSize);
    }
  }

  protected override drainOrder(samples: NodeSample[]): NodeSample[] {
    return samples.sort((a, b) => a.envStep - b.envStep);
  }

  /** COMLRL-SPEC §3.3: the turn's samples shuffled, in minibatches of trainBatchSize (numIterations passes of them). */
  protected minibatchesOf(group: NodeSample[]): NodeSample[][] {
    const trained = this.objectiveSteps.trained(group);
    return this.objectiveSteps.passes(trained, RolloutLearner.chunks(this.host.random.shuffle(trained), this.config.trainBatchSize));
  }

  override async update(samples: NodeSample[]): Promise<UpdateRecord[]> {
    for (const [agent, fraction] of this.objectiveSteps.prepare(samples)) {
      this.host.logger?.log("update", { [`agent_${agent}/objective/zero_variance_filtered`]: fraction }, this.progress.envStep);
    }
    return super.update(samples);
  }

  protected emptyMinibatch(): NodeSample[] {
    return [];
  }

  /** Loss = (1/|mb|) Σ_samples (1/K) Σ_k −A_k · log π(completion_k), every completion token scored; one AdamW step. */
  protected async step(agent: Agent, minibatch: NodeSample[], step: StepFunction): Promise<void> {
    let objective: Record<string, number> | undefined;
    const backward = this.objectiveSteps.handles(agent.index)
      ? async () => {
          const result = await this.objectiveSteps.backward(agent, minibatch);
          objective = result.objective;
          return result.loss;
        }
      : () => this.backward(agent, this.policyRows(minibatch, agent));
    await step({
      ...agent.policyStep(),
      samples: minibatch.length,
      backward,
      subject: `agent ${agent.index}`,
      batch: `a minibatch of ${minibatch.length}`,
      maxGradNorm: this.config.maxGradNorm,
      // Agents sharing a model step it one after the other, each after its own backward.
      stepInBackward: this.config.stepInBackward && this.options.scoring !== "perCompletion" && !this.agents.some((other) => other !== agent && other.model === agent.model),
    });
    agent.updates++;
    if (objective && Object.keys(objective).length > 0) {
      this.host.logger?.log("update", Object.fromEntries(Object.entries(objective).map(([k, v]) => [`agent_${agent.index}/${k}`, v])), this.progress.envStep);
    }
  }

  /**
   * Each completion's weight −A_k / (K · |mb|), A from the (KL-shaped) returns by the advantage mode; with
   * tokenAccounting "comlrl" each completion is the row CoMLRL scores (a row left empty scores nothing there either).
   * Centralized MAGRPO there scores every joint token up to EOS, as "exact" does.
   */
  protected policyRows(minibatch: NodeSample[], agent: Agent): PolicyRows {
    const c = this.config;
    const comlrlRows = c.tokenAccounting === "comlrl" && (c as Partial<CentralizedMAGRPOConfig>).collaborationMode !== "centralized";
    const rows: PolicyRows = { prompts: [], completions: [], weights: [] };
    for (const sample of minibatch) {
      const shaped = c.referenceKlEnabled ? shapeReturns(sample.returns, sample.referenceKl, c.referenceKlCoef) : sample.returns;
      const a = advantages(shaped, c.advantageMode, c.advantageNormalization);
      const completions = comlrlRows ? comlrlScoredCompletions(sample.completionIds, agent.tokenizer.padTokenId) : sample.completionIds;
      completions.forEach((ids, k) => {
        if (ids.length === 0) return;
        rows.prompts.push(sample.promptIds);
        rows.completions.push(ids);
        rows.weights.push(a[k] / (sample.completionIds.length * minibatch.length));
      });
    }
    return rows;
  }

  /** Accumulates the rows' policy gradient; returns the loss. */
  protected async backward(agent: Agent, { prompts, completions, weights }: PolicyRows): Promise<number> {
    if (this.options.scoring === "perCompletion") {
      let loss = 0;
      for (let i = 0; i < completions.length; i++) loss += (await agent.model.policyGradientBackward([prompts[i]], [completions[i]], [weights[i]], 1)).loss;
      return loss;
    }
    return completions.length > 0 ? (await agent.model.policyGradientBackward(prompts, completions, weights, 1)).loss : 0;
  }

  protected metricFields({ agent, turn, nodeMeanReward, nodeMeanReturn, referenceKl, envStep }: NodeSample): MetricFields {
    return { agent, turn, nodeMeanReward, nodeMeanReturn, referenceKl, envStep };
  }

  protected turnMetrics(group: MetricFields[]): Record<string, number> {
    const c = this.config;
    const metrics: Record<string, number> = { reward_mean: meanOrZero(group.map((s) => s.nodeMeanReward)), expected_return: meanOrZero(group.map((s) => s.nodeMeanReturn)) };
    if (c.referenceKlEnabled) {
      const kl = meanOrZero(group.flatMap((s) => s.referenceKl));
      metrics.reference_kl_mean = kl;
      metrics.reference_kl_penalty_mean = kl * c.referenceKlCoef;
    }
    return metrics;
  }

  protected shownRewards(samples: NodeSample[]): number[] {
    return samples.filter((s) => s.agent === 0 && s.turn === 0).map((s) => s.nodeMeanReward);
  }
}
