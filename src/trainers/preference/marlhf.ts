// MARLHF: preference-based RL (COMLRL-SPEC §6.1, §6.3, §6.4, §6.6), composed of three stages on the shared
// lifecycle: MADPO's pair collection, Bradley–Terry training of a joint reward model on those pairs
// (rewardNumTrainEpochs), then the RL phase — MAGRPO's learner, or IAC's / MAAC's with rlAlgorithm "iac" / "maac" —
// over the train items (numTrainEpochs) with the frozen reward model scoring every node's joint actions in one
// pass. Both learned phases run inside this trainer's host (rlhf-phases.ts). Evaluation always uses the task reward.
import { marlhfConfig, type MARLHFConfig, type MARLHFConfigInput } from "../../config/index.js";
import { runtimeInfo } from "../../runtime.js";
import { defaultOutputDir } from "../actors.js";
import { construct } from "../construction.js";
import { registerAgents, resolveAgentCount, type Agent, type ModelSource } from "../agents.js";
import { evaluateAgents } from "../evaluation.js";
import { Trainer, type TrainingStage } from "../lifecycle/trainer.js";
import { checkOptionKeys } from "../options.js";
import { MAGRPO_OPTION_KEYS, type MAGRPOTrainerOptions } from "../reinforce/magrpo.js";
import { pairSettings, PREFERENCE_EVAL_SETTINGS } from "./madpo.js";
import { PreferencePairs, type PreferencePair } from "./pairs.js";
import type { JointRewardModel } from "./reward-model.js";
import type { RewardModelStepMetrics } from "./reward-model-stage.js";
import { RlhfPhases } from "./rlhf-phases.js";
import { actorExtras, type ActorCriticLearner, type RlhfConfig, type RLLearner } from "./rl-phase.js";
import { collectionEnvironment, pairStage, PREFERENCE_OPTION_KEYS, setUpPreferenceActors, type PreferenceActors, type PreferenceOptions } from "./setup.js";

export type { RewardModelStepMetrics };

export interface MARLHFTrainerOptions extends Omit<MAGRPOTrainerOptions, "config">, PreferenceOptions {
  config?: MARLHFConfigInput | MARLHFConfig;
  /** Critic source for the actor-critic RL phases (rlAlgorithm "maac" / "iac"). */
  criticModel?: ModelSource | null;
  critics?: ModelSource[] | null;
}

export const MARLHF_OPTION_KEYS = { ...MAGRPO_OPTION_KEYS, ...PREFERENCE_OPTION_KEYS, criticModel: true, critics: true } as const satisfies Record<keyof MARLHFTrainerOptions, true>;

/** MARLHF's config with its agent count settled; options.criticModel / critics only with an actor-critic RL phase. */
export function marlhfTrainerConfig<C extends RlhfConfig, I>(options: { config?: I; numAgents?: number; agents?: ModelSource[] | null; criticModel?: unknown; critics?: unknown }, build: (input: I | undefined) => C): C {
  const centralized = build(options.config).collaborationMode === "centralized";
  const config = build(resolveAgentCount(options.config as object | undefined, options.numAgents, centralized ? undefined : options.agents) as I);
  const actorCritic = config.rlAlgorithm === "iac" || config.rlAlgorithm === "maac";
  if (!actorCritic && (options.criticModel != null || options.critics != null)) throw new TypeError(`MARLHF: criticModel and critics are only used with rlAlgorithm "maac" or "iac"`);
  return config;
}

export class MARLHFTrainer extends Trainer<MARLHFConfig> {
  readonly algorithm = "MARLHF";
  readonly preferences = new PreferencePairs();
  private phases!: RlhfPhases;

  private constructor(
    config: MARLHFConfig,
    private readonly actors: PreferenceActors,
    private readonly options: MARLHFTrainerOptions,
    outputDir: string,
  ) {
    super(config, options, outputDir);
  }

  static async create(options: MARLHFTrainerOptions): Promise<MARLHFTrainer> {
    checkOptionKeys(options, MARLHF_OPTION_KEYS, "MARLHFTrainer.create()");
    const config = marlhfTrainerConfig(options, (input) => marlhfConfig(input));
    return construct({
      algorithm: "MARLHF",
      options,
      config,
      load: () => setUpPreferenceActors(options, config, "MARLHF", actorExtras(config)),
      make: (actors) => new MARLHFTrainer(config, actors, options, defaultOutputDir("MARLHFTrainer", options.outputDir)),
      register: (trainer, actors) => registerAgents(trainer.components, actors.agents, actors.sources),
      attach: async (trainer, actors) => {
        trainer.phases = await RlhfPhases.build(rlhfSetUp(trainer, config, actors, options));
      },
    });
  }

  get agents(): Agent[] {
    return this.actors.agents;
  }

  /** The role count (numAgents); one centralized actor writes for all of them. */
  get numRoles(): number {
    return this.actors.numRoles;
  }

  /** The RL phase's learner (MAGRPO's, IAC's or MAAC's), running in this trainer's host. */
  get rl(): RLLearner {
    return this.phases.rl;
  }

  /** The IAC / MAAC learner of the RL phase (rlAlgorithm "iac" / "maac"); null for the MAGRPO family. */
  get actorCritic(): ActorCriticLearner | null {
    const rl = this.phases.rl;
    return "critics" in rl ? rl : null;
  }

  get rewardModel(): JointRewardModel {
    return this.phases.rewardModel.model;
  }

  get timings(): RLLearner["timings"] {
    return this.phases.rl.timings;
  }

  get rewardTrainingPairs(): PreferencePair[] {
    return this.phases.rewardModel.trainingPairs;
  }

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

  protected override runConfig(): Record<string, unknown> {
    return { ...super.runConfig(), numRoles: this.numRoles, numActorModels: this.agents.length };
  }

  /** Pairs once, the reward model on them, then the RL phase against the reward model. */
  protected stages(): TrainingStage[] {
    const pairs = pairStage(this.host, this.options.trainDataset, collectionEnvironment(this.agents, this.actors.environment), pairSettings(this.config), this.preferences);
    return [pairs, this.phases.rewardModel.stage((batch) => this.rewardModelStep(batch)), this.phases.rlStage()];
  }

  /** Held-out evaluation with the task reward (COMLRL-SPEC §3.4), on the agents' evaluation streams. */
  evaluate(numSamples = this.config.evalNumSamples): Promise<Record<string, number>> {
    const items = (this.options.evalDataset ?? []).slice(0, numSamples);
    return evaluateAgents(this.agents, this.actors.environment, PREFERENCE_EVAL_SETTINGS, { items, seed: this.config.seed, envStep: this.progress.envStep, logger: this.host.logger, hooks: this.options });
  }

  protected override assertCheckpointable(): void {
    this.phases.rl.checkpointable();
  }

  protected override async saveCheckpointFiles(dir: string): Promise<void> {
    await this.preferences.save(dir);
  }

  protected override restoreCheckpointState(state: Record<string, unknown>, dir: string): void {
    super.restoreCheckpointState(state, dir);
    this.preferences.load(dir);
  }
}

/** What RlhfPhases.build needs of a MARLHF-family trainer. */
export function rlhfSetUp(
  trainer: Trainer<RlhfConfig> & { preferences: PreferencePairs },
  config: RlhfConfig,
  actors: PreferenceActors,
  options: Omit<MARLHFTrainerOptions, "config">,
): Parameters<typeof RlhfPhases.build>[0] {
  const info = runtimeInfo();
  return {
    config,
    actors,
    preferences: trainer.preferences,
    critics: { criticModel: options.criticModel, critics: options.critics },
    options: {
      rewardBatching: options.rewardBatching,
      scoring: options.scoring,
      sampleLogInterval: options.sampleLogInterval,
      trainDataset: options.trainDataset,
      evalDataset: options.evalDataset ?? null,
      outputDir: trainer.outputDir,
    },
    host: trainer.host,
    registry: trainer.components,
    facts: { cudaAvailable: info.cudaAvailable, deviceCount: info.cudaDeviceCount },
  };
}
