// MAGRPO: multi-agent REINFORCE with group baselines on one shared reward (COMLRL-SPEC §3.1–§3.4). MAGRPOTrainer is
// the shared lifecycle around MAGRPOLearner, which MARLHF's RL phase also runs in its own host. The rollout plumbing
// (buffers, drains, minibatch planning and passes, per-turn metrics, evaluation) is RolloutLearner's, the loss
// PolicyLoss's; this file holds MAGRPO's rollout settings, its advantages and the rows its update scores.
import { magrpoConfig, type CentralizedMAGRPOConfig, type MAGRPOConfig, type MAGRPOConfigInput } from "../../config/index.js";
import { comlrlModelName, magrpoFamilyRunConfig } from "../../logging/run-config.js";
import { updateAdvantages } from "../../rollout/advantages.js";
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
import type { PolicyRow } from "../policy-loss.js";
import { meanOrZero } from "../../util/mean.js";

export type { EvalLoggerInput };
export type { Stateful, TrainOptions, TrainProgress } from "../lifecycle/trainer.js";

export interface MAGRPOTrainerOptions extends TaskOptions<MAGRPOConfigInput | MAGRPOConfig> {
  /** "node": one reward call per node with all its joint actions (default); "jointAction": one call each. */
  rewardBatching?: "node" | "jointAction";
  /** Log a table of sample completions every this many items (0: never). */
  sampleLogInterval?: number;
}

export const MAGRPO_OPTION_KEYS = { ...TASK_OPTION_KEYS, rewardBatching: true, sampleLogInterval: true } as const satisfies Record<
  keyof MAGRPOTrainerOptions,
  true
>;

type MetricFields = Pick<NodeSample, "agent" | "turn" | "nodeMeanReward" | "nodeMeanReturn" | "referenceKl" | "envStep">;

/** MAGRPO: N agents trained on one shared reward by REINFORCE with group baselines over a rollout tree (docs/magrpo.md). */
export class MAGRPOTrainer extends RolloutTrainer<NodeSample, MAGRPOConfig, MAGRPOLearner> {
  readonly algorithm: string = "MAGRPO";

  /** Use the static create(), which loads the agents. */
  constructor(config: MAGRPOConfig, agents: Agent[], protected readonly options: MAGRPOTrainerOptions, environment: RolloutEnvironment, outputDir: string) {
    const Learner = (new.target as typeof MAGRPOTrainer).Learner;
    super(config, options, outputDir, (host) => new Learner(config, agents, options, environment, host));
  }

  /** The learner this trainer runs (the bench suite's per-completion baseline runs its own). */
  protected static get Learner(): new (config: MAGRPOConfig, agents: Agent[], options: MAGRPOTrainerOptions, environment: RolloutEnvironment, host: StageHost) => MAGRPOLearner {
    return MAGRPOLearner;
  }

  protected override comlrlRunConfig(): Record<string, unknown> {
    return magrpoFamilyRunConfig({ algorithm: this.algorithm, modelName: comlrlModelName(this.options), numAgents: this.agents.length, config: this.config });
  }

  /** The config builder of this algorithm (baselines override the advantage mode's default). */
  static buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig {
    return magrpoConfig(input);
  }

  /** Builds the trainer: validates options and config, loads the agents (and references), and registers them; a failure frees what was built. */
  static async create<T extends MAGRPOTrainer>(this: TrainerClass<T>, options: MAGRPOTrainerOptions): Promise<T> {
    checkOptionKeys(options, MAGRPO_OPTION_KEYS, `${this.name}.create()`);
    checkOneOf(options.rewardBatching, ["node", "jointAction"], "rewardBatching");
    const config = this.buildConfig(resolveAgentCount(options.config, options.numAgents, options.agents));
    return construct({
      algorithm: "MAGRPO",
      options,
      config,
      load: () => setUpActors(options, config),
      make: (actors) => new this(config, actors.agents, options, actors.environment, defaultOutputDir(this.name, options.outputDir)),
      register: (trainer, actors) => registerAgents(trainer.components, actors.agents),
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

/** MAGRPO's rollouts and updates, in the host of MAGRPOTrainer or of MARLHF's RL phase. */
export class MAGRPOLearner extends RolloutLearner<NodeSample, NodeSample[], MetricFields, MAGRPOConfig> {
  /** Each trained sample's advantages (one per completion) in the update under way; filtered samples have none. */
  private readonly advantages = new Map<NodeSample, readonly number[]>();
  /** Per agent, whether its step may be taken inside its backward: agents sharing a model step it one after the other, each after its own backward. */
  private readonly ownsModel: boolean[];

  constructor(config: MAGRPOConfig, agents: Agent[], protected override readonly options: MAGRPOTrainerOptions, environment: RolloutEnvironment, host: StageHost) {
    super(config, agents, options, environment, host);
    this.ownsModel = agents.map((agent) => !agents.some((other) => other !== agent && other.model === agent.model));
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

  /**
   * COMLRL-SPEC §3.3: the turn's trained samples shuffled, in minibatches of trainBatchSize. Samples the
   * zero-variance filter skipped leave before the minibatches are planned, so a turn whose groups are all filtered
   * takes no optimizer step at all.
   */
  protected minibatchesOf(group: NodeSample[]): NodeSample[][] {
    const trained = group.filter((s) => this.advantages.has(s));
    return RolloutLearner.chunks(this.host.random.shuffle(trained), this.config.trainBatchSize);
  }

  /** Takes every agent's advantages of the update (logging the fraction of groups a zero-variance filter skipped), then updates. */
  override async update(samples: NodeSample[]): Promise<UpdateRecord[]> {
    this.advantages.clear();
    this.config.objectives.forEach((objective, agent) => {
      const update = updateAdvantages(samples.filter((s) => s.agent === agent), objective, this.config);
      for (const [sample, a] of update.of) this.advantages.set(sample, a);
      if (objective.zeroVarianceFilter !== null && update.groups > 0) {
        this.host.logger?.log("update", { [`agent_${agent}/objective/zero_variance_filtered`]: update.filtered / update.groups }, this.progress.envStep);
      }
    });
    return super.update(samples);
  }

  protected emptyMinibatch(): NodeSample[] {
    return [];
  }

  /** One AdamW step of the agent's policy loss over the minibatch's rows (CoMLRL's: (1/|mb|) Σ_samples (1/K) Σ_k −A_k · log π). */
  protected async step(agent: Agent, minibatch: NodeSample[], step: StepFunction): Promise<void> {
    await this.policyStep(agent, this.policyRows(minibatch, agent), (backward) =>
      step({
        ...agent.policyStep(),
        samples: minibatch.length,
        backward,
        subject: `agent ${agent.index}`,
        batch: `a minibatch of ${minibatch.length}`,
        maxGradNorm: this.config.maxGradNorm,
        stepInBackward: this.policyLoss.oneBackward && this.ownsModel[agent.index],
      }),
    );
  }

  /**
   * Each sample's K completions as one group of rows with their advantages; with tokenAccounting "comlrl" each
   * completion is the row CoMLRL scores (a row left empty scores nothing there either). Centralized MAGRPO there
   * scores every joint token up to EOS, as "exact" does.
   */
  private policyRows(minibatch: NodeSample[], agent: Agent): PolicyRow[] {
    const comlrlRows = this.config.tokenAccounting === "comlrl" && (this.config as Partial<CentralizedMAGRPOConfig>).collaborationMode !== "centralized";
    return minibatch.flatMap((sample, group) => {
      const a = this.advantages.get(sample)!;
      const recorded = sample.samplerLogprobs;
      const completions = comlrlRows ? comlrlScoredCompletions(sample.completionIds, agent.tokenizer.padTokenId) : sample.completionIds;
      return completions.map((completion, k) => ({
        prompt: sample.promptIds,
        completion,
        advantage: a[k],
        group,
        ...(recorded ? { sampled: { logprobs: recorded.policy[k], policySteps: recorded.updates } } : {}),
      }));
    });
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
