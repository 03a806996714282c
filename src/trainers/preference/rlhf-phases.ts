// The two learned phases MARLHF and MARLHFIter share, composed inside their trainer's host: the reward-model stage
// (reward-model-stage.ts) and the RL phase (rl-phase.ts), whose rollouts run in an environment scored by the
// current reward model. The host's trainer holds the agents, the pairs and its schedule; this holds what learns.
import { RewardProcessors } from "../../rollout/rewards.js";
import type { RolloutEnvironment } from "../../rollout/tree.js";
import type { RewardFunction } from "../../rollout/types.js";
import type { ComponentRegistry } from "../../components/registry.js";
import type { StageHost, TrainingStage, TrainProgress } from "../lifecycle/stage-host.js";
import type { PreferencePairs } from "./pairs.js";
import { RewardModelTraining } from "./reward-model-stage.js";
import { backEndRenewal, buildRLLearner, type RLPhaseCritics, type RLPhaseLearner, type RLPhaseSetUp, type RlhfConfig } from "./rl-phase.js";
import type { PreferenceActors } from "./setup.js";

export interface RlhfSetUp {
  config: RlhfConfig;
  actors: PreferenceActors;
  preferences: PreferencePairs;
  critics: RLPhaseCritics;
  options: RLPhaseSetUp["options"];
  host: StageHost;
  registry: ComponentRegistry;
}

export class RlhfPhases {
  private constructor(
    readonly rewardModel: RewardModelTraining,
    readonly rl: RLPhaseLearner,
    /** The task's environment with the reward model as its reward: where the RL phase's rollouts run. */
    readonly rewardEnvironment: RolloutEnvironment,
    private readonly progress: TrainProgress,
    /** Renews the actor-critic back-end when an RL phase begins (null for the MAGRPO family). */
    private readonly renewBackEnd: (() => Promise<void>) | null,
  ) {}

  /** Loads the reward model, registers it (after the agents), then builds the RL learner and registers its critics. */
  static async build(setUp: RlhfSetUp): Promise<RlhfPhases> {
    const { actors, registry } = setUp;
    const placed = actors.placement.rewardModel;
    if (!placed) throw new TypeError("MARLHF's actors were placed without their reward model (setUpActors' modules)");
    const rewardModel = new RewardModelTraining(setUp.host, setUp.config, setUp.preferences, actors.sources[0], placed);
    await rewardModel.load((spec) => registry.register(spec));
    // Reads the reward model when called, so that a reward model put in place later (MARLHFIter's) scores.
    const rewardFunc: RewardFunction = async (completions, context) => Array.from(await rewardModel.model.scoreJoint(context.prompts, completions));
    // Reward-model scores are used as they are: the task's reward processor shaped the pairs' labels already.
    const rewardEnvironment: RolloutEnvironment = { ...actors.environment, rewardFunc, rewardProcessor: RewardProcessors.identity() };
    const rl = await buildRLLearner({ ...setUp, environment: rewardEnvironment });
    return new RlhfPhases(rewardModel, rl, rewardEnvironment, setUp.host.progress, backEndRenewal(rl));
  }

  /**
   * The RL phase's stage: the learner's train stage, the reward model (the current one) frozen as each epoch begins,
   * an actor-critic back-end renewed as the phase begins. A run resumed inside the phase has the renewed back-end's
   * state back from its checkpoint, so it renews only where the uninterrupted run did.
   */
  rlStage(): TrainingStage {
    return {
      ...this.rl.trainStage(),
      name: "rl",
      beginEpoch: async () => {
        this.rewardModel.model.freeze();
        if (this.progress.epoch === 0) await this.renewBackEnd?.();
      },
    };
  }
}
