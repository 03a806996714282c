// MADPO: multi-agent, reference-free DPO (COMLRL-SPEC §6.1–§6.2, §6.6). Two stages on the shared lifecycle: the
// pairs are collected once (one step per train item), then numTrainEpochs passes over the shuffled pair set, one DPO
// step per trainBatchSize pairs, in which every agent is stepped in turn on the joint loss. The pairs are trainer
// state: checkpoints carry them, so a resumed run trains on exactly the same set.
import { fieldValue } from "../../config/fields.js";
import { MADPO_FIELDS, madpoConfig, type MADPOConfig, type MADPOConfigInput } from "../../config/index.js";
import { resolveAgentCount } from "../agents.js";
import type { TrainingStage } from "../lifecycle/trainer.js";
import { checkOptionKeys } from "../options.js";
import { TASK_OPTION_KEYS, type TaskOptions } from "../task-options.js";
import { DpoTraining, type DPOStepMetrics } from "./dpo-stage.js";
import type { PairSettings, PreferencePair } from "./pairs.js";
import { constructPreferenceTrainer, PreferenceTrainer } from "./preference-trainer.js";
import { collectionEnvironment, pairStage, PREFERENCE_OPTION_KEYS, type PreferenceActors, type PreferenceOptions } from "./setup.js";

export interface MADPOTrainerOptions extends TaskOptions<MADPOConfigInput | MADPOConfig>, PreferenceOptions {}

const MADPO_OPTION_KEYS = { ...TASK_OPTION_KEYS, ...PREFERENCE_OPTION_KEYS } as const satisfies Record<keyof MADPOTrainerOptions, true>;

export type { DPOStepMetrics };

/** How MADPO and MARLHF collect their pairs. */
export function pairSettings(c: Pick<MADPOConfig, "preferenceNumCandidates" | "pairSelection" | "preferencePairsPerSample">): PairSettings {
  return { numCandidates: c.preferenceNumCandidates, pairSelection: c.pairSelection, pairsPerSample: c.preferencePairsPerSample };
}

/** MADPO: reference-free joint DPO on preference pairs collected once from the agents (docs/preference.md). */
export class MADPOTrainer extends PreferenceTrainer<MADPOConfig, MADPOTrainerOptions> {
  readonly algorithm = "MADPO";
  private readonly dpo: DpoTraining;

  private constructor(config: MADPOConfig, actors: PreferenceActors, options: MADPOTrainerOptions, outputDir: string) {
    super(config, actors, options, outputDir);
    this.dpo = new DpoTraining(this.host, config, actors.agents, actors.environment.concurrent, this.preferences, Boolean(options.evalDataset?.length));
  }

  /** Builds the trainer: validates options and config, loads the agents, and registers them. */
  static async create(options: MADPOTrainerOptions): Promise<MADPOTrainer> {
    checkOptionKeys(options, MADPO_OPTION_KEYS, "MADPOTrainer.create()");
    const centralized = fieldValue(MADPO_FIELDS, options.config, "collaborationMode") === "centralized";
    const config = madpoConfig(resolveAgentCount(options.config, options.numAgents, centralized ? undefined : options.agents));
    return constructPreferenceTrainer({ algorithm: "MADPO", options, config, make: (actors, outputDir) => new MADPOTrainer(config, actors, options, outputDir) });
  }

  /** Pairs once, then DPO epochs over them. */
  protected stages(): TrainingStage[] {
    const pairs = pairStage(this.host, this.options.trainDataset, collectionEnvironment(this.agents, this.actors.environment, this.timings), pairSettings(this.config), this.preferences);
    return [pairs, this.dpo.stage()];
  }

  /** One DPO step on a batch of pairs (see DpoTraining.update). */
  update(batch: PreferencePair[]): Promise<DPOStepMetrics> {
    return this.dpo.update(batch);
  }
}
