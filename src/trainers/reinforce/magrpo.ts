// MAGRPO: multi-agent REINFORCE with group baselines on one shared reward (COMLRL-SPEC §3.1–§3.4). The rollout
// plumbing (buffers, drains, minibatch planning, per-turn metrics, evaluation) is RolloutTrainer's and the lifecycle
// the shared Trainer's; this file holds MAGRPO's rollout settings, its advantages and its update rule.
import { magrpoConfig, type MAGRPOConfig, type MAGRPOConfigInput } from "../../config/index.js";
import { comlrlModelName, magrpoFamilyRunConfig } from "../../logging/run-config.js";
import { advantages, shapeReturns } from "../../rollout/advantages.js";
import { sampleRows, type RolloutEnvironment, type RolloutSettings, type rolloutItem } from "../../rollout/tree.js";
import type { NodeSample } from "../../rollout/types.js";
import { defaultOutputDir, setUpActors } from "../actors.js";
import { construct } from "../construction.js";
import { registerAgents, resolveAgentCount, type Agent } from "../agents.js";
import type { EvalLoggerInput } from "../evaluation.js";
import type { StageHost } from "../lifecycle/stage-host.js";
import { checkOneOf, checkOptionKeys } from "../options.js";
import { RolloutTrainer } from "../rollout-trainer.js";
import { TASK_OPTION_KEYS, type TaskOptions } from "../task-options.js";
import { ObjectiveSteps } from "./objectives.js";

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

/** Seconds spent per phase of training since the trainer was made (evaluation is not counted). */

export interface UpdateMetrics {
  agent: number;
  loss: number;
  gradNorm: number;
  samples: number;
  /** A clipped-ratio objective's metrics (docs/objectives.md), logged beside the update. */
  objective?: Record<string, number>;
}

type MetricFields = Pick<NodeSample, "agent" | "turn" | "nodeMeanReward" | "nodeMeanReturn" | "referenceKl" | "envStep">;

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

export class MAGRPOTrainer extends RolloutTrainer<NodeSample, NodeSample[], UpdateMetrics, MetricFields, MAGRPOConfig> {
  readonly algorithm: string = "MAGRPO";
  /** The agents' objectives beyond CoMLRL's default path (docs/objectives.md). */
  protected readonly objectiveSteps: ObjectiveSteps;

  /** Use the static create(), which loads the agents; `hostedBy`: the host of a trainer this one runs inside. */
  constructor(config: MAGRPOConfig, agents: Agent[], protected override readonly options: MAGRPOTrainerOptions, environment: RolloutEnvironment, outputDir: string, hostedBy: StageHost | null = null) {
    super(config, agents, options, environment, outputDir, hostedBy);
    this.objectiveSteps = new ObjectiveSteps(config, agents, options.scoring ?? "batched");
  }

  protected comlrlRunConfig(): Record<string, unknown> {
    return magrpoFamilyRunConfig({ algorithm: this.algorithm, modelName: comlrlModelName(this.options), numAgents: this.agents.length, config: this.config });
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
    return construct({
      algorithm: "MAGRPO",
      options,
      config,
      load: () => setUpActors(options, config),
      make: (actors) => new this(config, actors.agents, options, actors.environment, defaultOutputDir(this.name, options.outputDir)),
      register: (trainer, actors) => registerAgents(trainer.components, actors.agents, actors.sources),
    });
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
    return this.objectiveSteps.passes(group, RolloutTrainer.chunks(this.random.shuffle(group), this.config.trainBatchSize));
  }

  override async update(samples: NodeSample[]): Promise<UpdateMetrics[]> {
    this.objectiveSteps.prepare(samples);
    return super.update(samples);
  }

  protected emptyMinibatch(): NodeSample[] {
    return [];
  }

  /** Loss = (1/|mb|) Σ_samples (1/K) Σ_k −A_k · log π(completion_k), every completion token scored; one AdamW step. */
  protected async step(agent: Agent, minibatch: NodeSample[]): Promise<UpdateMetrics> {
    if (this.objectiveSteps.handles(agent.index)) {
      const result = await this.objectiveSteps.backward(agent, minibatch);
      return this.optimizerStep(agent, minibatch, result.loss, result.objective);
    }
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
    return this.optimizerStep(agent, minibatch, loss);
  }

  /** The AdamW step after a minibatch's backward (a non-finite loss steps nothing, in step with data-parallel peers). */
  private async optimizerStep(agent: Agent, minibatch: NodeSample[], loss: number, objective?: Record<string, number>): Promise<UpdateMetrics> {
    if (!this.host.checkLoss(loss, `agent ${agent.index}`, `a minibatch of ${minibatch.length}`)) {
      agent.model.zeroGrad();
      await agent.optimizer.step({ samples: 0, loss: 0 }); // no gradient here: a no-op, but data-parallel peers step together
      return { agent: agent.index, loss, gradNorm: NaN, samples: minibatch.length };
    }
    const step = await agent.optimizer.step({ maxGradNorm: this.config.maxGradNorm ?? undefined, samples: minibatch.length, loss });
    agent.updates++;
    return { agent: agent.index, loss: step.loss ?? loss, gradNorm: step.gradNorm, samples: step.samples, ...(objective ? { objective } : {}) };
  }

  /** Updates are logged in agent order after every agent ran, so concurrent agents ("mp") log as sequential ones. */
  protected override afterSteps(results: UpdateMetrics[]): void {
    for (const r of results) {
      this.host.recordUpdate(`agent_${r.agent}`, { loss: r.loss, gradNorm: r.gradNorm, learningRate: this.agents[r.agent].optimizer.learningRates()[0], samples: r.samples });
      if (r.objective) this.host.logger?.log("update", Object.fromEntries(Object.entries(r.objective).map(([k, v]) => [`agent_${r.agent}/${k}`, v])), this.progress.envStep);
    }
  }

  protected metricFields({ agent, turn, nodeMeanReward, nodeMeanReturn, referenceKl, envStep }: NodeSample): MetricFields {
    return { agent, turn, nodeMeanReward, nodeMeanReturn, referenceKl, envStep };
  }

  protected turnMetrics(group: MetricFields[]): Record<string, number> {
    const c = this.config;
    const metrics: Record<string, number> = { reward_mean: mean(group.map((s) => s.nodeMeanReward)), expected_return: mean(group.map((s) => s.nodeMeanReturn)) };
    if (c.referenceKlEnabled) {
      const kl = mean(group.flatMap((s) => s.referenceKl));
      metrics.reference_kl_mean = kl;
      metrics.reference_kl_penalty_mean = kl * c.referenceKlCoef;
    }
    return metrics;
  }

  protected shownRewards(samples: NodeSample[]): number[] {
    return samples.filter((s) => s.agent === 0 && s.turn === 0).map((s) => s.nodeMeanReward);
  }
}

export type TrainerClass<T> = {
  new (config: MAGRPOConfig, agents: Agent[], options: MAGRPOTrainerOptions, environment: RolloutEnvironment, outputDir: string): T;
  buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig;
  name: string;
};
