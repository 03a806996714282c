// MARLHF: preference-based RL (COMLRL-SPEC §6.1, §6.3, §6.4, §6.6). Three stages on the shared lifecycle: MADPO's
// pair collection, Bradley–Terry training of a joint reward model on those pairs (rewardNumTrainEpochs), then the
// MAGRPO family's training loop (numTrainEpochs over the train items) with the frozen reward model scoring every
// node's joint actions in one pass. Evaluation always uses the task reward. The RL phase is MAGRPOTrainer's own
// stage and update, run in an environment whose reward is the reward model — or, with rlAlgorithm "iac" / "maac",
// the stage of an actor-critic trainer built around the same agents in that environment (marlhf-actor-critic.ts).
import { marlhfConfig, type CudaFacts, type MAGRPOConfig, type MAGRPOConfigInput, type MARLHFConfig, type MARLHFConfigInput } from "../../config/index.js";
import { Optimizer } from "../../models/optimizer.js";
import { RewardProcessors } from "../../rollout/rewards.js";
import type { RolloutEnvironment } from "../../rollout/tree.js";
import type { RewardFunction } from "../../rollout/types.js";
import { runtimeInfo } from "../../runtime.js";
import { checkTask, defaultOutputDir } from "../actors.js";
import { registerAgents, resolveAgentCount, type ModelSource } from "../agents.js";
import { causalLMModule, valueHeadModule, type ComponentSpec } from "../components.js";
import { checkOptionKeys } from "../options.js";
import { MAGRPO_OPTION_KEYS, MAGRPOTrainer, type MAGRPOTrainerOptions, type TrainerClass } from "../reinforce/magrpo.js";
import type { TrainingStage } from "../trainer.js";
import { actorExtras, buildActorCriticBackend, isActorCriticBackend, type ActorCriticBackend } from "./marlhf-actor-critic.js";
import { PreferencePairs, type PreferencePair } from "./pairs.js";
import { jointText, JointRewardModel, resolveRewardModelDevice } from "./reward-model.js";
import { collectionEnvironment, pairStage, PREFERENCE_OPTION_KEYS, setUpPreferenceActors, type PreferenceOptions } from "./setup.js";

export interface MARLHFTrainerOptions extends Omit<MAGRPOTrainerOptions, "config">, PreferenceOptions {
  config?: MARLHFConfigInput | MARLHFConfig;
  /** Critic source for the actor-critic back-ends (rlAlgorithm "maac" / "iac"). */
  criticModel?: ModelSource | null;
  critics?: ModelSource[] | null;
}

export const MARLHF_OPTION_KEYS = { ...MAGRPO_OPTION_KEYS, ...PREFERENCE_OPTION_KEYS, criticModel: true, critics: true } as const satisfies Record<keyof MARLHFTrainerOptions, true>;

export interface RewardModelStepMetrics {
  loss: number;
  /** Share of the batch's pairs the model ranked right before the step. */
  accuracy: number;
  gradNorm: number;
}

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
const texts = (pairs: readonly PreferencePair[], side: "winnerTexts" | "loserTexts") => pairs.map((p) => jointText(p.prompts, p[side]));

export class MARLHFTrainer extends MAGRPOTrainer {
  override readonly algorithm: string = "MARLHF";
  declare readonly config: MAGRPOConfig & MARLHFConfig;
  readonly preferences = new PreferencePairs();
  /** Set by create(). */
  rewardModel!: JointRewardModel;
  numRoles = 0;
  /** Where the actors are placed, one device each. */
  agentDevices: readonly string[] = [];
  /** The IAC / MAAC trainer of the RL phase (rlAlgorithm "iac" / "maac"), hosted by this one; null for the MAGRPO family. */
  actorCritic: ActorCriticBackend | null = null;
  protected rewardOptimizer!: Optimizer;
  protected rewardEnvironment!: RolloutEnvironment;
  /** The current reward-model epoch's order of the training pairs. */
  private rewardOrder: number[] = [];
  /** Where reward models are loaded from and placed: the backbone from rewardModelName, else the first actor's id. */
  private rewardModelSource!: { source: string; device: string };

  static override buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig {
    return marlhfConfig(input as MARLHFConfigInput) as MAGRPOConfig & MARLHFConfig;
  }

  static override async create<T extends MAGRPOTrainer>(this: TrainerClass<T>, options: MARLHFTrainerOptions): Promise<T> {
    checkOptionKeys(options, MARLHF_OPTION_KEYS, `${this.name}.create()`);
    const input = options.config as MARLHFConfigInput | undefined;
    const centralized = (this.buildConfig(input as MAGRPOConfigInput) as MAGRPOConfig & MARLHFConfig).collaborationMode === "centralized";
    const config = this.buildConfig(resolveAgentCount(input, options.numAgents, centralized ? undefined : options.agents) as MAGRPOConfigInput) as MAGRPOConfig & MARLHFConfig;
    const actorCritic = isActorCriticBackend(config);
    if (!actorCritic && (options.criticModel != null || options.critics != null)) throw new TypeError(`MARLHF: criticModel and critics are only used with rlAlgorithm "maac" or "iac"`);
    checkTask(options, config, "MARLHF");
    const actors = await setUpPreferenceActors(options, config, "MARLHF", actorExtras(config));
    const trainer = new this(config, actors.agents, options as MAGRPOTrainerOptions, actors.environment, defaultOutputDir(this.name, options.outputDir)) as T & MARLHFTrainer;
    registerAgents(trainer.components, actors.agents, actors.sources);
    trainer.numRoles = actors.numRoles;
    trainer.agentDevices = actors.placement.agentDevices;
    try {
      await trainer.attachRewardModel(actors.sources[0], actors.placement.agentDevices[0], runtimeInfo());
      if (actorCritic) {
        const setUp = {
          config,
          actors,
          environment: trainer.rewardEnvironment,
          critics: { criticModel: options.criticModel, critics: options.critics },
          trainDataset: options.trainDataset,
          evalDataset: options.evalDataset ?? null,
          outputDir: trainer.outputDir,
          quiet: options.quiet ?? false,
        };
        trainer.actorCritic = await buildActorCriticBackend(setUp, trainer.components);
      }
    } catch (error) {
      await trainer.close();
      throw error;
    }
    return trainer;
  }

  /** Loads the reward model and registers it. */
  private async attachRewardModel(firstActor: ModelSource, trainerDevice: string, info: { cudaAvailable: boolean; cudaDeviceCount: number }): Promise<void> {
    const c = this.config;
    const source = c.rewardModelName ?? (typeof firstActor === "string" ? firstActor : null);
    if (source === null) throw new TypeError("MARLHF: rewardModelName must be set when the actors are loaded model objects (there is no model id to load the reward model's backbone from)");
    const facts: CudaFacts = { cudaAvailable: info.cudaAvailable, deviceCount: info.cudaDeviceCount };
    this.rewardModelSource = { source, device: resolveRewardModelDevice(c, trainerDevice, facts, (message) => this.console(message)) };
    await this.loadRewardModel((spec) => this.components.register(spec));
    // Reads this.rewardModel when called, so that a reward model built later (MARLHFIter's, per iteration) scores.
    const rewardFunc: RewardFunction = async (completions, context) => Array.from(await this.rewardModel.scoreJoint(context.prompts, completions));
    // Reward-model scores are used as they are: the task's reward processor shaped the pairs' labels already.
    this.rewardEnvironment = { ...this.environment, rewardFunc, rewardProcessor: RewardProcessors.identity() };
  }

  /** A fresh (untrained) reward model and its optimizer, put into the registry by `place` (register or replace). */
  protected async loadRewardModel(place: (spec: ComponentSpec) => void): Promise<void> {
    const c = this.config;
    const { source, device } = this.rewardModelSource;
    const rm = await JointRewardModel.load(source, { device, dtype: c.dtype, seed: c.seed, maxLength: c.rewardMaxLength, freezeBackbone: c.rewardFreezeBackbone });
    const adam = { lr: c.rewardLearningRate, betas: [c.adamBetas[0], c.adamBetas[1]] as [number, number], eps: c.adamEps, weightDecay: c.weightDecay };
    this.rewardOptimizer = new Optimizer(c.rewardFreezeBackbone ? rm.head : [{ module: rm.model }, { module: rm.head }], adam);
    this.rewardModel = rm;
    place({ name: "reward_model", module: causalLMModule(rm.model, rm.tokenizer), trains: true, optimizer: this.rewardOptimizer, ownsModule: true, exportDir: "reward_model" });
    place({ name: "reward_model/head", module: valueHeadModule(rm.head), trains: true, ownsModule: true, exportDir: "reward_model" });
  }

  protected override get trainingEnvironment(): RolloutEnvironment {
    return this.rewardEnvironment;
  }

  protected override runConfig(): Record<string, unknown> {
    return { ...super.runConfig(), numRoles: this.numRoles, numActorModels: this.agents.length };
  }

  /** Pairs of the items held out of reward-model training: the last ⌊rewardHeldOutFraction × items with pairs⌋. */
  private get heldOutItems(): Set<number> {
    const items = [...new Set(this.preferences.pairs.map((p) => p.itemIndex))].sort((a, b) => a - b);
    const count = Math.floor(this.config.rewardHeldOutFraction * items.length);
    return new Set(count > 0 ? items.slice(-count) : []);
  }

  get rewardTrainingPairs(): PreferencePair[] {
    const held = this.heldOutItems;
    return this.preferences.pairs.filter((p) => !held.has(p.itemIndex));
  }

  get rewardHeldOutPairs(): PreferencePair[] {
    const held = this.heldOutItems;
    return this.preferences.pairs.filter((p) => held.has(p.itemIndex));
  }

  /** Pairs once, the reward model on them, then the MAGRPO family's loop against the reward model. */
  protected override stages(): TrainingStage[] {
    const c = this.config;
    const trainer = this;
    const host = this.stageHost;
    const pairSettings = { numCandidates: c.preferenceNumCandidates, pairSelection: c.pairSelection, pairsPerSample: c.preferencePairsPerSample };
    const pairs = pairStage(host, this.options.trainDataset, collectionEnvironment(this.agents, this.environment), pairSettings, this.preferences);
    let trainingPairs: PreferencePair[] = [];
    const rewardModel: TrainingStage = {
      name: "reward_model",
      epochs: c.rewardNumTrainEpochs,
      get steps() {
        return Math.ceil(trainer.rewardTrainingPairs.length / c.rewardTrainBatchSize);
      },
      runStep: async (i) => {
        if (i === 0) {
          trainingPairs = this.rewardTrainingPairs;
          // Drawn at each epoch's first step from the checkpointed generator, so a resumed epoch has the same order.
          this.rewardOrder = this.random.shuffle(trainingPairs.map((_, j) => j));
        }
        const batch = this.rewardOrder.slice(i * c.rewardTrainBatchSize, (i + 1) * c.rewardTrainBatchSize).map((j) => trainingPairs[j]);
        const metrics = await this.rewardModelStep(batch);
        return { "rm loss": metrics.loss };
      },
      endEpoch: async () => {
        const heldOut = this.rewardHeldOutPairs;
        if (heldOut.length === 0) return;
        const accuracy = await this.rewardModel.pairwiseAccuracy(texts(heldOut, "winnerTexts"), texts(heldOut, "loserTexts"));
        this.logger?.logTrain({ "reward_model/heldout_accuracy": accuracy, "reward_model/heldout_pairs": heldOut.length }, this.progress.envStep);
      },
    };
    // The RL phase: MAGRPO's own stage, or the hosted actor-critic trainer's, whose env steps, updates, shuffles and
    // metrics are this trainer's.
    const [online] = this.actorCritic ? [this.actorCritic.stageWithin(host)] : super.stages();
    const rl: TrainingStage = {
      ...online,
      name: "rl",
      runStep: (b) => {
        this.rewardModel.freeze();
        return online.runStep(b);
      },
    };
    return [pairs, rewardModel, rl];
  }

  protected override assertCheckpointable(): void {
    super.assertCheckpointable();
    this.actorCritic?.checkpointable();
  }

  /** One Bradley–Terry step of the reward model on a batch of pairs. */
  async rewardModelStep(batch: PreferencePair[]): Promise<RewardModelStepMetrics> {
    const rm = this.rewardModel;
    rm.zeroGrad();
    const out = await rm.bradleyTerryBackward(texts(batch, "winnerTexts"), texts(batch, "loserTexts"));
    const accuracy = mean(Array.from(out.winnerScores, (s, i) => (s > out.loserScores[i] ? 1 : 0)));
    let gradNorm = NaN;
    if (Number.isFinite(out.loss)) gradNorm = (await this.rewardOptimizer.step({ maxGradNorm: this.config.maxGradNorm ?? undefined })).gradNorm;
    else this.console(`reward model: non-finite loss (${out.loss}); batch of ${batch.length} pairs skipped`);
    this.recordUpdate("reward_model", { loss: out.loss, gradNorm, learningRate: this.rewardOptimizer.learningRates()[0], samples: batch.length });
    this.logger?.logTrain({ "reward_model/loss": out.loss, "reward_model/accuracy": accuracy }, this.progress.envStep);
    return { loss: out.loss, accuracy, gradNorm };
  }

  protected override async saveCheckpointFiles(dir: string): Promise<void> {
    await this.preferences.save(dir);
  }

  protected override restoreCheckpointState(state: Record<string, unknown>, dir: string): void {
    super.restoreCheckpointState(state, dir);
    this.preferences.load(dir);
  }
}
