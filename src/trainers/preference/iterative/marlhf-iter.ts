// MARLHFIter (COMLRL-SPEC §6.5): numIterations rounds on the shared lifecycle, each three stages — collect (the
// shared iterative round: current vs comparator candidates, index-aligned pairs, the replay shard and this
// iteration's training pairs), reward_model (a fresh joint reward model, put in place at the iteration's first reward
// step and trained with Bradley–Terry on those pairs) and rl (MARLHF's RL phase, numTrainEpochs over the train
// items, against that reward model) — then the iteration's policy checkpoint when they are kept. The reward model
// and the RL phase are MARLHF's (rlhf-phases.ts), composed here with the round, all in this trainer's host. With
// preferenceScoringReward "reward_model" the pairs are labelled by the previous iteration's reward model (the task
// reward until one was trained); evaluation always uses the task reward.
import { marlhfIterConfig, type MARLHFIterConfig, type MARLHFIterConfigInput } from "../../../config/index.js";
import { RewardProcessors } from "../../../rollout/rewards.js";
import type { TrainingStage } from "../../lifecycle/trainer.js";
import { checkOptionKeys } from "../../options.js";
import { MARLHF_OPTION_KEYS, marlhfTrainerConfig, rlhfSetUp, type MARLHFTrainerOptions } from "../marlhf.js";
import type { PreferencePair } from "../pairs.js";
import { constructPreferenceTrainer, PreferenceTrainer } from "../preference-trainer.js";
import type { RewardModelStepMetrics } from "../reward-model-stage.js";
import { RlhfPhases } from "../rlhf-phases.js";
import { rlhfActorExtras, type RLPhaseLearner } from "../rl-phase.js";
import { scoreCandidates, type Candidates } from "./candidates.js";
import { iterationStages, IterativeRound } from "./round.js";
import { ITERATIVE_OPTION_KEYS, roundSetUp, type IterativeOptions } from "./round-setup.js";

/** MARLHFIterTrainer.create()'s options: MARLHF's, plus the comparator's. */
export interface MARLHFIterTrainerOptions extends Omit<MARLHFTrainerOptions, "config">, IterativeOptions {
  /** Training settings: MARLHF's, plus the iteration count and the comparator's. */
  config?: MARLHFIterConfigInput | MARLHFIterConfig;
}

const MARLHF_ITER_OPTION_KEYS = { ...MARLHF_OPTION_KEYS, ...ITERATIVE_OPTION_KEYS } as const satisfies Record<keyof MARLHFIterTrainerOptions, true>;

/** Iterative MARLHF: every iteration collects pairs, trains a fresh reward model on them, then RL against it (docs/iterative.md). */
export class MARLHFIterTrainer extends PreferenceTrainer<MARLHFIterConfig, MARLHFIterTrainerOptions> {
  readonly algorithm = "MARLHFIter";
  private phases!: RlhfPhases;
  private round!: IterativeRound;
  /** Whether the current reward model has been stepped (so the next iteration starts a fresh one and may score with it). */
  private rewardModelTrained = false;

  /** Builds the trainer: validates options and config, loads the agents and the comparator, and registers them. */
  static async create(options: MARLHFIterTrainerOptions): Promise<MARLHFIterTrainer> {
    checkOptionKeys(options, MARLHF_ITER_OPTION_KEYS, "MARLHFIterTrainer.create()");
    const config = marlhfTrainerConfig(options, "MARLHFIterConfig", (input) => marlhfIterConfig(input));
    const { centralizedComparatorAdapter: _adapter, comparatorAgents: _comparators, ...marlhfOptions } = options;
    return constructPreferenceTrainer({
      algorithm: "MARLHFIter",
      options,
      config,
      actorOptions: marlhfOptions,
      actorExtras: rlhfActorExtras(config, options),
      make: (actors, outputDir) => new MARLHFIterTrainer(config, actors, options, outputDir),
      attach: async (trainer, actors) => {
        trainer.phases = await RlhfPhases.build(rlhfSetUp(trainer, config, actors, marlhfOptions));
        trainer.round = new IterativeRound(roundSetUp(trainer, actors, options, (candidates, context) => trainer.scorePairs(candidates, context)));
      },
    });
  }

  /** The RL phase's learner (that of the trainer rlAlgorithm names), running in this trainer's host. */
  get rl(): RLPhaseLearner {
    return this.phases.rl;
  }

  /** The current iteration's joint reward model (a fresh one each iteration). */
  get rewardModel() {
    return this.phases.rewardModel.model;
  }

  /** The current iteration's pairs the reward model trains on. */
  get rewardTrainingPairs(): PreferencePair[] {
    return this.phases.rewardModel.trainingPairs;
  }

  /** One Bradley–Terry step of the reward model on a batch of pairs. */
  rewardModelStep(batch: PreferencePair[]): Promise<RewardModelStepMetrics> {
    return this.phases.rewardModel.step(batch);
  }

  /** The task reward, or — when asked for and one was trained — the previous iteration's reward model, as it scores RL. */
  private scorePairs(candidates: Candidates, context: Parameters<typeof scoreCandidates>[3]) {
    if (this.config.preferenceScoringReward === "reward_model" && this.rewardModelTrained) {
      return scoreCandidates(candidates, this.phases.rewardEnvironment.rewardFunc, RewardProcessors.identity(), context);
    }
    return scoreCandidates(candidates, this.actors.environment.rewardFunc, this.actors.environment.rewardProcessor, context);
  }

  protected override iterations(): number {
    return this.config.numIterations;
  }

  /** collect, a fresh reward model on the iteration's training pairs, RL against it, then the policy checkpoint. */
  protected stages(): TrainingStage[] {
    const rewardModel = this.phases.rewardModel.stage((batch) => this.rewardModelStep(batch));
    const freshRewardModel: TrainingStage = {
      name: rewardModel.name,
      epochs: rewardModel.epochs,
      get steps() {
        return rewardModel.steps;
      },
      beginEpoch: async () => {
        if (this.progress.epoch === 0 && this.rewardModelTrained) {
          await this.phases.rewardModel.load((spec) => this.replaceComponent(spec));
          this.rewardModelTrained = false;
        }
        await rewardModel.beginEpoch?.();
      },
      runStep: async (i) => {
        const fields = await rewardModel.runStep(i);
        this.rewardModelTrained = true;
        return fields;
      },
      endEpoch: rewardModel.endEpoch,
    };
    return iterationStages(this.progress, this.round, this.preferences, [freshRewardModel, this.phases.rlStage()]);
  }

  protected override assertCheckpointable(): void {
    this.phases.rl.assertDrained();
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
