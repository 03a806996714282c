// MADPOIter (COMLRL-SPEC §6.5): numIterations rounds, each two stages on the shared lifecycle — collect (one step per
// train item: current vs comparator candidates, index-aligned pairs, the replay shard and this iteration's training
// pairs) and dpo (MADPO's DPO stage, numTrainEpochs over those pairs; update and env-step counters continue across
// iterations) — then the iteration's policy checkpoint when they are kept. The round and the DPO stage are composed
// here, both in this trainer's host.
import { madpoIterConfig, type MADPOIterConfig, type MADPOIterConfigInput } from "../../../config/index.js";
import { resolveAgentCount } from "../../agents.js";
import type { TrainingStage } from "../../lifecycle/trainer.js";
import { checkOptionKeys } from "../../options.js";
import { TASK_OPTION_KEYS, type TaskOptions } from "../../task-options.js";
import { DpoTraining } from "../dpo-stage.js";
import { constructPreferenceTrainer, PreferenceTrainer } from "../preference-trainer.js";
import { PREFERENCE_OPTION_KEYS, type PreferenceActors, type PreferenceOptions } from "../setup.js";
import { scoreCandidates } from "./candidates.js";
import { iterationStages, IterativeRound } from "./round.js";
import { ITERATIVE_OPTION_KEYS, roundSetUp, type IterativeOptions } from "./round-setup.js";

export interface MADPOIterTrainerOptions extends TaskOptions<MADPOIterConfigInput | MADPOIterConfig>, PreferenceOptions, IterativeOptions {}

const MADPO_ITER_OPTION_KEYS = { ...TASK_OPTION_KEYS, ...PREFERENCE_OPTION_KEYS, ...ITERATIVE_OPTION_KEYS } as const satisfies Record<keyof MADPOIterTrainerOptions, true>;

/** Iterative MADPO: every iteration collects pairs against a comparator and trains joint DPO on them (docs/iterative.md). */
export class MADPOIterTrainer extends PreferenceTrainer<MADPOIterConfig, MADPOIterTrainerOptions> {
  readonly algorithm = "MADPOIter";
  private readonly dpo: DpoTraining;
  private round!: IterativeRound;

  private constructor(config: MADPOIterConfig, actors: PreferenceActors, options: MADPOIterTrainerOptions, outputDir: string) {
    super(config, actors, options, outputDir);
    this.dpo = new DpoTraining(this.host, config, actors.agents, actors.environment.concurrent, this.preferences, Boolean(options.evalDataset?.length));
  }

  /** Builds the trainer: validates options and config, loads the agents and the comparator, and registers them. */
  static async create(options: MADPOIterTrainerOptions): Promise<MADPOIterTrainer> {
    checkOptionKeys(options, MADPO_ITER_OPTION_KEYS, "MADPOIterTrainer.create()");
    const centralized = madpoIterConfig(options.config).collaborationMode === "centralized";
    const config = madpoIterConfig(resolveAgentCount(options.config, options.numAgents, centralized ? undefined : options.agents));
    const { centralizedComparatorAdapter: _adapter, comparatorAgents: _comparators, ...actorOptions } = options;
    return constructPreferenceTrainer({
      algorithm: "MADPOIter",
      options,
      config,
      actorOptions,
      make: (actors, outputDir) => new MADPOIterTrainer(config, actors, options, outputDir),
      attach: async (trainer, actors) => {
        const { rewardFunc, rewardProcessor } = actors.environment;
        trainer.round = new IterativeRound(roundSetUp(trainer, actors, options, (candidates, context) => scoreCandidates(candidates, rewardFunc, rewardProcessor, context)));
      },
    });
  }

  protected override iterations(): number {
    return this.config.numIterations;
  }

  /** collect, then DPO on the iteration's training pairs, then the policy checkpoint. */
  protected stages(): TrainingStage[] {
    return iterationStages(this.progress, this.round, this.preferences, [this.dpo.stage()]);
  }

  protected override checkpointState(): Record<string, unknown> {
    return { ...super.checkpointState(), round: this.round.state() };
  }

  protected override restoreCheckpointState(state: Record<string, unknown>, dir: string): void {
    super.restoreCheckpointState(state, dir);
    this.round.restore(state.round as Record<string, unknown>, `resume-${this.progress.unitsDone}-${Date.now()}`);
  }

  override async close(): Promise<void> {
    this.round?.dispose();
    await super.close();
  }
}
