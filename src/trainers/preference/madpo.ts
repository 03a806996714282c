// MADPO: multi-agent, reference-free DPO (COMLRL-SPEC §6.1–§6.2, §6.6). Two stages on the shared lifecycle: the
// pairs are collected once (one step per train item), then numTrainEpochs passes over the shuffled pair set, one DPO
// step per trainBatchSize pairs, in which every agent is stepped in turn on the joint loss. The pairs are trainer
// state: checkpoints carry them, so a resumed run trains on exactly the same set.
import { madpoConfig, type MADPOConfig, type MADPOConfigInput } from "../../config/index.js";
import { forEachAgent, type RolloutEnvironment, type RolloutSettings } from "../../rollout/tree.js";
import { checkTask, defaultOutputDir } from "../actors.js";
import { registerAgents, resolveAgentCount, EVAL_STREAM, type Agent } from "../agents.js";
import { evaluateItems } from "../evaluation.js";
import { checkOptionKeys } from "../options.js";
import { TASK_OPTION_KEYS, type TaskOptions } from "../task-options.js";
import { Trainer, type TrainingStage } from "../trainer.js";
import { agentDeltas, dpoBackward, dpoObjective } from "./dpo.js";
import { PreferencePairs, type PairSettings, type PreferencePair } from "./pairs.js";
import { collectionEnvironment, pairStage, PREFERENCE_OPTION_KEYS, setUpPreferenceActors, type PreferenceOptions } from "./setup.js";

export interface MADPOTrainerOptions extends TaskOptions<MADPOConfigInput | MADPOConfig>, PreferenceOptions {}

const MADPO_OPTION_KEYS = { ...TASK_OPTION_KEYS, ...PREFERENCE_OPTION_KEYS } as const satisfies Record<keyof MADPOTrainerOptions, true>;

export interface DPOStepMetrics {
  /** mean_p −log σ(β Δ_p), the same joint loss every agent descends. */
  loss: number;
  /** mean_p β Δ_p: the implicit reward margin of winners over losers. */
  rewardMargin: number;
  /** Share of pairs with Δ_p > 0. */
  accuracy: number;
  /** Per agent, mean_p Δ_i. */
  agentDeltas: number[];
  gradNorms: number[];
}

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

/** Single-turn, one sample per agent, scored by the task reward: evaluation for MADPO and MARLHF. */
export const PREFERENCE_EVAL_SETTINGS: RolloutSettings = {
  numGenerations: 1,
  numTurns: 1,
  jointMode: "aligned",
  earlyTerminationThreshold: null,
  externalPromptPassthrough: false,
  rewardBatching: "node",
};

export class MADPOTrainer extends Trainer<MADPOConfig> {
  readonly algorithm: string = "MADPO";
  readonly preferences = new PreferencePairs();
  /** The current DPO epoch's order of the pairs. */
  private order: number[] = [];

  /** Use the static create(), which loads the agents. */
  constructor(
    config: MADPOConfig,
    readonly agents: Agent[],
    protected readonly options: MADPOTrainerOptions,
    protected readonly environment: RolloutEnvironment,
    outputDir: string,
    /** The role count (numAgents); one centralized actor writes for all of them. */
    readonly numRoles: number,
  ) {
    super(config, options, outputDir);
  }

  static async create(options: MADPOTrainerOptions): Promise<MADPOTrainer> {
    checkOptionKeys(options, MADPO_OPTION_KEYS, "MADPOTrainer.create()");
    const centralized = madpoConfig(options.config as MADPOConfigInput).collaborationMode === "centralized";
    const config = madpoConfig(resolveAgentCount(options.config as MADPOConfigInput, options.numAgents, centralized ? undefined : options.agents));
    checkTask(options, config, "MADPO");
    const actors = await setUpPreferenceActors(options, config, "MADPO");
    const trainer = new MADPOTrainer(config, actors.agents, options, actors.environment, defaultOutputDir("MADPOTrainer", options.outputDir), actors.numRoles);
    registerAgents(trainer.components, actors.agents, actors.sources);
    return trainer;
  }

  protected override runConfig(): Record<string, unknown> {
    return { ...super.runConfig(), numRoles: this.numRoles, numActorModels: this.agents.length };
  }

  protected get pairSettings(): PairSettings {
    const c = this.config;
    return { numCandidates: c.preferenceNumCandidates, pairSelection: c.pairSelection, pairsPerSample: c.preferencePairsPerSample };
  }

  /** Pairs once, then DPO epochs over them. */
  protected stages(): TrainingStage[] {
    const c = this.config;
    const trainer = this;
    const pairs = pairStage(this.stageHost, this.options.trainDataset, collectionEnvironment(this.agents, this.environment), this.pairSettings, this.preferences);
    const dpo: TrainingStage = {
      name: "dpo",
      epochs: c.numTrainEpochs,
      get steps() {
        return Math.ceil(trainer.preferences.pairs.length / c.trainBatchSize);
      },
      // Evaluation is counted in DPO steps (each steps every agent once): before step s when s % evalInterval is 0.
      evaluateBefore: (i) => c.evalInterval > 0 && (this.progress.epoch * dpo.steps + i) % c.evalInterval === 0 && Boolean(this.options.evalDataset?.length),
      runStep: async (i) => {
        // Drawn at each epoch's first step from the checkpointed generator, so a resumed epoch has the same order.
        if (i === 0) this.order = this.random.shuffle(this.preferences.pairs.map((_, j) => j));
        const batch = this.order.slice(i * c.trainBatchSize, (i + 1) * c.trainBatchSize).map((j) => this.preferences.pairs[j]);
        const metrics = await this.update(batch);
        return { "dpo loss": metrics.loss };
      },
    };
    return [pairs, dpo];
  }

  /**
   * One DPO step on a batch of pairs: every agent's Δ_i from one scoring pass, then each agent's backward and AdamW
   * step on the joint loss (all Δ are taken before any agent steps, as in the spec's sequential update).
   */
  async update(batch: PreferencePair[]): Promise<DPOStepMetrics> {
    const c = this.config;
    const concurrent = this.environment.concurrent;
    const deltas = await agentDeltas(this.agents, batch, concurrent);
    const joint = batch.map((_, p) => deltas.reduce((sum, d) => sum + d[p], 0));
    const { loss, winnerWeights } = dpoObjective(joint, c.dpoBeta);
    const metrics: DPOStepMetrics = {
      loss,
      rewardMargin: mean(joint.map((d) => c.dpoBeta * d)),
      accuracy: mean(joint.map((d) => (d > 0 ? 1 : 0))),
      agentDeltas: deltas.map((d) => mean(d)),
      gradNorms: this.agents.map(() => NaN),
    };
    if (Number.isFinite(loss)) {
      metrics.gradNorms = await forEachAgent(this.agents.length, concurrent, async (i) => {
        const agent = this.agents[i];
        agent.model.zeroGrad();
        await dpoBackward(agent, batch, winnerWeights);
        return (await agent.optimizer.step({ maxGradNorm: c.maxGradNorm ?? undefined })).gradNorm;
      });
    } else {
      // A non-finite loss would poison the weights: no agent steps on this batch, and the run says so.
      this.console(`non-finite DPO loss (${loss}); batch of ${batch.length} pairs skipped`);
    }
    if (c.useEnvironmentStep) this.progress.envStep += c.environmentStepsPerPair * batch.length;
    this.agents.forEach((agent, i) =>
      this.recordUpdate(`agent_${agent.index}`, { loss, gradNorm: metrics.gradNorms[i], learningRate: agent.optimizer.learningRates()[0], samples: batch.length }),
    );
    this.logger?.logTrain(
      {
        "dpo/loss": loss,
        "dpo/reward_margin": metrics.rewardMargin,
        "dpo/accuracy": metrics.accuracy,
        ...Object.fromEntries(metrics.agentDeltas.map((d, i) => [`dpo/agent_${i}/delta_mean`, d])),
      },
      this.progress.envStep,
    );
    return metrics;
  }

  /** Held-out evaluation with the task reward (COMLRL-SPEC §3.4), on the agents' evaluation streams. */
  async evaluate(numSamples = this.config.evalNumSamples): Promise<Record<string, number>> {
    const items = (this.options.evalDataset ?? []).slice(0, numSamples);
    if (items.length === 0) return {};
    this.agents.forEach((agent) => agent.model.setSeed(this.config.seed + agent.index, EVAL_STREAM));
    const environment: RolloutEnvironment = { ...this.environment, policies: this.agents.map((a) => a.evalPolicy()), timings: undefined };
    const metrics = await evaluateItems(items, environment, PREFERENCE_EVAL_SETTINGS, this.options);
    this.logger?.logEval(metrics, this.progress.envStep);
    return Object.fromEntries(Object.entries(metrics).map(([key, value]) => [`eval/${key}`, value]));
  }

  protected override async saveCheckpointFiles(dir: string): Promise<void> {
    await this.preferences.save(dir);
  }

  protected override restoreCheckpointState(state: Record<string, unknown>, dir: string): void {
    super.restoreCheckpointState(state, dir);
    this.preferences.load(dir);
  }
}
