// MARLHFIter (COMLRL-SPEC §6.5): numIterations rounds on the shared lifecycle, each three stages — collect (the
// shared iterative round: current vs comparator candidates, index-aligned pairs, the replay shard and this
// iteration's training pairs), reward_model (a fresh joint reward model, built at the iteration's first reward step
// and trained with Bradley–Terry on those pairs) and rl (MARLHF's RL phase, numTrainEpochs over the train items,
// against that reward model) — then the iteration's policy checkpoint when they are kept. With
// preferenceScoringReward "reward_model" the pairs are labelled by the previous iteration's reward model (the task
// reward until one was trained); evaluation always uses the task reward.
import { marlhfIterConfig, type MAGRPOConfig, type MAGRPOConfigInput, type MARLHFConfig, type MARLHFIterConfig, type MARLHFIterConfigInput } from "../../../config/index.js";
import { RewardProcessors } from "../../../rollout/rewards.js";
import { runtimeInfo } from "../../../runtime.js";
import { checkOptionKeys } from "../../options.js";
import type { MAGRPOTrainer, TrainerClass } from "../../reinforce/magrpo.js";
import type { TrainingStage } from "../../trainer.js";
import { MARLHF_OPTION_KEYS, MARLHFTrainer, type MARLHFTrainerOptions } from "../marlhf.js";
import { scoreCandidates, type Candidates } from "./candidates.js";
import { liveStage } from "./madpo-iter.js";
import { ITERATIVE_OPTION_KEYS, IterativeRound, roundHost, type IterativeConfig, type IterativeOptions } from "./round.js";

export interface MARLHFIterTrainerOptions extends Omit<MARLHFTrainerOptions, "config">, IterativeOptions {
  config?: MARLHFIterConfigInput | MARLHFIterConfig;
}

const MARLHF_ITER_OPTION_KEYS = { ...MARLHF_OPTION_KEYS, ...ITERATIVE_OPTION_KEYS } as const satisfies Record<keyof MARLHFIterTrainerOptions, true>;

export class MARLHFIterTrainer extends MARLHFTrainer {
  override readonly algorithm: string = "MARLHFIter";
  declare readonly config: MAGRPOConfig & MARLHFConfig & MARLHFIterConfig;
  /** Set by create(). */
  round!: IterativeRound;
  /** Whether the current reward model has been stepped (so the next iteration starts a fresh one and may score with it). */
  private rewardModelTrained = false;

  static override buildConfig(input: MAGRPOConfigInput | MAGRPOConfig | undefined): MAGRPOConfig {
    return marlhfIterConfig(input as MARLHFIterConfigInput) as unknown as MAGRPOConfig;
  }

  static override async create<T extends MAGRPOTrainer>(this: TrainerClass<T>, options: MARLHFIterTrainerOptions): Promise<T> {
    checkOptionKeys(options, MARLHF_ITER_OPTION_KEYS, `${this.name}.create()`);
    const { centralizedComparatorAdapter, comparatorAgents, ...marlhfOptions } = options;
    const trainer = (await MARLHFTrainer.create.call(this, marlhfOptions as MARLHFTrainerOptions)) as T & MARLHFIterTrainer;
    try {
      const info = runtimeInfo();
      trainer.round = new IterativeRound({
        host: roundHost(trainer.stageHost, {
          config: trainer.config as unknown as IterativeConfig,
          agents: trainer.agents,
          environment: trainer.environment,
          items: options.trainDataset,
          score: (candidates, context) => trainer.scorePairs(candidates, context),
        }),
        options: { centralizedComparatorAdapter, comparatorAgents },
        agentDevices: trainer.agentDevices,
        facts: { cudaAvailable: info.cudaAvailable, deviceCount: info.cudaDeviceCount },
        wandb: options.wandbConfig,
        outputDir: trainer.outputDir,
      });
    } catch (error) {
      await trainer.close();
      throw error;
    }
    return trainer;
  }

  /** The task reward, or — when asked for and one was trained — the previous iteration's reward model, as it scores RL. */
  private scorePairs(candidates: Candidates, context: Parameters<typeof scoreCandidates>[3]) {
    if (this.config.preferenceScoringReward === "reward_model" && this.rewardModelTrained) {
      return scoreCandidates(candidates, this.rewardEnvironment.rewardFunc, RewardProcessors.identity(), context);
    }
    return scoreCandidates(candidates, this.environment.rewardFunc, this.environment.rewardProcessor, context);
  }

  protected override iterations(): number {
    return this.config.numIterations;
  }

  /** collect, a fresh reward model on the iteration's training pairs, RL against it, then the policy checkpoint. */
  protected override stages(): TrainingStage[] {
    const collect = this.round.collectStage((pairs) => {
      this.preferences.pairs.length = 0;
      this.preferences.pairs.push(...pairs);
    });
    const [, rewardModel, rl] = super.stages();
    const freshRewardModel = liveStage(rewardModel, {
      runStep: async (i) => {
        if (i === 0 && this.progress.epoch === 0 && this.rewardModelTrained) {
          await this.loadRewardModel((spec) => this.components.replace(spec));
          this.rewardModelTrained = false;
        }
        const fields = await rewardModel.runStep(i);
        this.rewardModelTrained = true;
        return fields;
      },
    });
    const trained = liveStage(rl, {
      endEpoch: async () => {
        await rl.endEpoch?.();
        if (this.progress.epoch + 1 >= this.config.numTrainEpochs) await this.round.endIteration(this.progress.iteration);
      },
    });
    return [collect, freshRewardModel, trained];
  }

  protected override checkpointState(): Record<string, unknown> {
    return { ...super.checkpointState(), round: this.round.state(), rewardModelTrained: this.rewardModelTrained };
  }

  protected override restoreCheckpointState(state: Record<string, unknown>, dir: string): void {
    super.restoreCheckpointState(state, dir);
    this.round.restore(state.round as Record<string, unknown>, `resume-${this.progress.unitsDone}-${Date.now()}`);
    this.rewardModelTrained = state.rewardModelTrained === true;
  }

  override async close(): Promise<void> {
    this.round?.dispose();
    await super.close();
  }
}
