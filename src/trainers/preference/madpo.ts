// MADPO: multi-agent, reference-free DPO (COMLRL-SPEC §6.1–§6.2, §6.6). Two stages on the shared lifecycle: the
// pairs are collected once (one step per train item), then numTrainEpochs passes over the shuffled pair set, one DPO
// step per trainBatchSize pairs, in which every agent is stepped in turn on the joint loss. The pairs are trainer
// state: checkpoints carry them, so a resumed run trains on exactly the same set.
import { madpoConfig, type MADPOConfig, type MADPOConfigInput } from "../../config/index.js";
import type { RolloutEnvironment, RolloutSettings } from "../../rollout/tree.js";
import { defaultOutputDir } from "../actors.js";
import { construct } from "../construction.js";
import { registerAgents, resolveAgentCount, type Agent } from "../agents.js";
import { evaluateAgents } from "../evaluation.js";
import { Trainer, type TrainingStage } from "../lifecycle/trainer.js";
import { checkOptionKeys } from "../options.js";
import { TASK_OPTION_KEYS, type TaskOptions } from "../task-options.js";
import { DpoTraining, type DPOStepMetrics } from "./dpo-stage.js";
import { PreferencePairs, type PairSettings, type PreferencePair } from "./pairs.js";
import { collectionEnvironment, pairStage, PREFERENCE_OPTION_KEYS, setUpPreferenceActors, type PreferenceOptions } from "./setup.js";

export interface MADPOTrainerOptions extends TaskOptions<MADPOConfigInput | MADPOConfig>, PreferenceOptions {}

const MADPO_OPTION_KEYS = { ...TASK_OPTION_KEYS, ...PREFERENCE_OPTION_KEYS } as const satisfies Record<keyof MADPOTrainerOptions, true>;

export type { DPOStepMetrics };

/** Single-turn, one sample per agent, scored by the task reward: evaluation for MADPO and MARLHF. */
export const PREFERENCE_EVAL_SETTINGS: RolloutSettings = {
  numGenerations: 1,
  numTurns: 1,
  jointMode: "aligned",
  earlyTerminationThreshold: null,
  externalPromptPassthrough: false,
  rewardBatching: "node",
};

/** How MADPO and MARLHF collect their pairs. */
export function pairSettings(c: Pick<MADPOConfig, "preferenceNumCandidates" | "pairSelection" | "preferencePairsPerSample">): PairSettings {
  return { numCandidates: c.preferenceNumCandidates, pairSelection: c.pairSelection, pairsPerSample: c.preferencePairsPerSample };
}

export class MADPOTrainer extends Trainer<MADPOConfig> {
  readonly algorithm = "MADPO";
  readonly preferences = new PreferencePairs();
  private readonly dpo: DpoTraining;

  private constructor(
    config: MADPOConfig,
    readonly agents: Agent[],
    private readonly options: MADPOTrainerOptions,
    private readonly environment: RolloutEnvironment,
    outputDir: string,
    /** The role count (numAgents); one centralized actor writes for all of them. */
    readonly numRoles: number,
  ) {
    super(config, options, outputDir);
    this.dpo = new DpoTraining(this.host, config, agents, environment.concurrent, this.preferences, Boolean(options.evalDataset?.length));
  }

  static async create(options: MADPOTrainerOptions): Promise<MADPOTrainer> {
    checkOptionKeys(options, MADPO_OPTION_KEYS, "MADPOTrainer.create()");
    const centralized = madpoConfig(options.config as MADPOConfigInput).collaborationMode === "centralized";
    const config = madpoConfig(resolveAgentCount(options.config as MADPOConfigInput, options.numAgents, centralized ? undefined : options.agents));
    return construct({
      algorithm: "MADPO",
      options,
      config,
      load: () => setUpPreferenceActors(options, config, "MADPO"),
      make: (actors) => new MADPOTrainer(config, actors.agents, options, actors.environment, defaultOutputDir("MADPOTrainer", options.outputDir), actors.numRoles),
      register: (trainer, actors) => registerAgents(trainer.components, actors.agents, actors.sources),
    });
  }

  protected override runConfig(): Record<string, unknown> {
    return { ...super.runConfig(), numRoles: this.numRoles, numActorModels: this.agents.length };
  }

  /** Pairs once, then DPO epochs over them. */
  protected stages(): TrainingStage[] {
    const pairs = pairStage(this.host, this.options.trainDataset, collectionEnvironment(this.agents, this.environment), pairSettings(this.config), this.preferences);
    return [pairs, this.dpo.stage()];
  }

  /** One DPO step on a batch of pairs (see DpoTraining.update). */
  update(batch: PreferencePair[]): Promise<DPOStepMetrics> {
    return this.dpo.update(batch);
  }

  /** Held-out evaluation with the task reward (COMLRL-SPEC §3.4), on the agents' evaluation streams. */
  evaluate(numSamples = this.config.evalNumSamples): Promise<Record<string, number>> {
    const items = (this.options.evalDataset ?? []).slice(0, numSamples);
    return evaluateAgents(this.agents, this.environment, PREFERENCE_EVAL_SETTINGS, { items, seed: this.config.seed, envStep: this.progress.envStep, logger: this.host.logger, hooks: this.options });
  }

  protected override async saveCheckpointFiles(dir: string): Promise<void> {
    await this.preferences.save(dir);
  }

  protected override restoreCheckpointState(state: Record<string, unknown>, dir: string): void {
    super.restoreCheckpointState(state, dir);
    this.preferences.load(dir);
  }
}
