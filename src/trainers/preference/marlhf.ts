// MARLHF: preference-based RL (COMLRL-SPEC §6.1, §6.3, §6.4, §6.6), composed of three stages on the shared
// lifecycle: MADPO's pair collection, Bradley–Terry training of a joint reward model on those pairs
// (rewardNumTrainEpochs), then the RL phase — the learner of the trainer rlAlgorithm names (rl-phase.ts) —
// over the train items (numTrainEpochs) with the frozen reward model scoring every node's joint actions in one
// pass. Both learned phases run inside this trainer's host (rlhf-phases.ts). Evaluation always uses the task reward.
import { fieldValue } from "../../config/fields.js";
import { MADPO_FIELDS, marlhfConfig, type MARLHFConfig, type MARLHFConfigInput } from "../../config/index.js";
import { resolveAgentCount, type ModelSource } from "../agents.js";
import type { Trainer, TrainingStage } from "../lifecycle/trainer.js";
import { checkOptionKeys } from "../options.js";
import { MAGRPO_OPTION_KEYS, type MAGRPOTrainerOptions } from "../reinforce/magrpo.js";
import { pairSettings } from "./madpo.js";
import type { PreferencePair, PreferencePairs } from "./pairs.js";
import { constructPreferenceTrainer, PreferenceTrainer } from "./preference-trainer.js";
import type { JointRewardModel } from "./reward-model.js";
import type { RewardModelStepMetrics } from "./reward-model-stage.js";
import { RlhfPhases } from "./rlhf-phases.js";
import { ActorCriticLearner } from "../actor-critic/learner.js";
import { rlhfActorExtras, checkRLPhase, type RlhfConfig, type RLPhaseLearner } from "./rl-phase.js";
import { collectionEnvironment, pairStage, PREFERENCE_OPTION_KEYS, type PreferenceActors, type PreferenceOptions } from "./setup.js";

export type { RewardModelStepMetrics };

/** MARLHFTrainer.create()'s options: the task and agents, the critics of an actor-critic RL phase, and the reward model. */
export interface MARLHFTrainerOptions extends Omit<MAGRPOTrainerOptions, "config">, PreferenceOptions {
  /** Training settings: pair collection, the reward model and the RL phase (docs/preference.md). */
  config?: MARLHFConfigInput | MARLHFConfig;
  /** Critic source for the actor-critic RL phases (rlAlgorithm "maac" / "iac"). */
  criticModel?: ModelSource | null;
  /** One critic model per agent (MAAC: one), instead of criticModel. */
  critics?: ModelSource[] | null;
}

export const MARLHF_OPTION_KEYS = { ...MAGRPO_OPTION_KEYS, ...PREFERENCE_OPTION_KEYS, criticModel: true, critics: true } as const satisfies Record<keyof MARLHFTrainerOptions, true>;

/** MARLHF's config with its agent count settled and its RL phase checked (options.criticModel / critics only with one that has critics). */
export function marlhfTrainerConfig<C extends RlhfConfig, I>(
  options: { config?: I; numAgents?: number; agents?: ModelSource[] | null; criticModel?: ModelSource | null; critics?: ModelSource[] | null },
  configName: string,
  build: (input: I | undefined) => C,
): C {
  const centralized = fieldValue(MADPO_FIELDS, options.config, "collaborationMode") === "centralized";
  const config = build(resolveAgentCount(options.config as object | undefined, options.numAgents, centralized ? undefined : options.agents) as I);
  return checkRLPhase(config, configName, options);
}

/** MARLHF: a joint Bradley–Terry reward model learned from preference pairs, then online RL against it (docs/preference.md). */
export class MARLHFTrainer extends PreferenceTrainer<MARLHFConfig, MARLHFTrainerOptions> {
  readonly algorithm = "MARLHF";
  private phases!: RlhfPhases;

  /** Builds the trainer: validates options and config, loads the agents, the reward model and the RL phase's parts. */
  static async create(options: MARLHFTrainerOptions): Promise<MARLHFTrainer> {
    checkOptionKeys(options, MARLHF_OPTION_KEYS, "MARLHFTrainer.create()");
    const config = marlhfTrainerConfig(options, "MARLHFConfig", (input) => marlhfConfig(input));
    return constructPreferenceTrainer({
      algorithm: "MARLHF",
      options,
      config,
      actorExtras: rlhfActorExtras(config, options),
      make: (actors, outputDir) => new MARLHFTrainer(config, actors, options, outputDir),
      attach: async (trainer, actors) => {
        trainer.phases = await RlhfPhases.build(rlhfSetUp(trainer, config, actors, options));
      },
    });
  }

  /** The RL phase's learner (that of the trainer rlAlgorithm names), running in this trainer's host. */
  get rl(): RLPhaseLearner {
    return this.phases.rl;
  }

  /** The RL phase's learner when it has critics (rlAlgorithm "iac", "maac", …); null for the MAGRPO family. */
  get actorCritic(): ActorCriticLearner | null {
    const rl = this.phases.rl;
    return rl instanceof ActorCriticLearner ? rl : null;
  }

  /** The joint reward model trained on the collected pairs and then used as the RL reward. */
  get rewardModel(): JointRewardModel {
    return this.phases.rewardModel.model;
  }

  /** The collected pairs the reward model trains on. */
  get rewardTrainingPairs(): PreferencePair[] {
    return this.phases.rewardModel.trainingPairs;
  }

  /** The collected pairs held out from reward-model training, on which its accuracy is evaluated. */
  get rewardHeldOutPairs(): PreferencePair[] {
    return this.phases.rewardModel.heldOutPairs;
  }

  /** One Bradley–Terry step of the reward model on a batch of pairs. */
  rewardModelStep(batch: PreferencePair[]): Promise<RewardModelStepMetrics> {
    return this.phases.rewardModel.step(batch);
  }

  /** K sampled completions per prompt for each agent: prompts[agent] → texts[agent][prompt][k]. */
  generate(prompts: string[][], k = this.config.numGenerations): Promise<string[][][]> {
    return this.phases.rl.generate(prompts, k);
  }

  /** Pairs once, the reward model on them, then the RL phase against the reward model. */
  protected stages(): TrainingStage[] {
    const pairs = pairStage(this.host, this.options.trainDataset, collectionEnvironment(this.agents, this.actors.environment, this.timings), pairSettings(this.config), this.preferences);
    return [pairs, this.phases.rewardModel.stage((batch) => this.rewardModelStep(batch)), this.phases.rlStage()];
  }

  protected override assertCheckpointable(): void {
    this.phases.rl.assertDrained();
  }
}

/** What RlhfPhases.build needs of a MARLHF-family trainer. */
export function rlhfSetUp(
  trainer: Trainer<RlhfConfig> & { preferences: PreferencePairs },
  config: RlhfConfig,
  actors: PreferenceActors,
  options: Omit<MARLHFTrainerOptions, "config">,
): Parameters<typeof RlhfPhases.build>[0] {
  return {
    config,
    actors,
    preferences: trainer.preferences,
    critics: { criticModel: options.criticModel, critics: options.critics },
    options: {
      rewardBatching: options.rewardBatching,
      sampleLogInterval: options.sampleLogInterval,
      trainDataset: options.trainDataset,
      evalDataset: options.evalDataset ?? null,
    },
    host: trainer.host,
    registry: trainer.components,
  };
}
