// MADPOIter (COMLRL-SPEC §6.5): numIterations rounds, each two stages on the shared lifecycle — collect (one step per
// train item: current vs comparator candidates, index-aligned pairs, the replay shard and this iteration's training
// pairs) and dpo (numTrainEpochs passes of MADPO's joint DPO step over those pairs; update and env-step counters
// continue across iterations) — then the iteration's policy checkpoint when they are kept.
import { madpoIterConfig, type MADPOConfig, type MADPOIterConfig, type MADPOIterConfigInput } from "../../../config/index.js";
import { runtimeInfo } from "../../../runtime.js";
import { checkTask, defaultOutputDir } from "../../actors.js";
import { registerAgents, resolveAgentCount } from "../../agents.js";
import { checkOptionKeys } from "../../options.js";
import { TASK_OPTION_KEYS, type TaskOptions } from "../../task-options.js";
import type { TrainingStage } from "../../trainer.js";
import { MADPOTrainer } from "../madpo.js";
import { PREFERENCE_OPTION_KEYS, setUpPreferenceActors, type PreferenceOptions } from "../setup.js";
import { scoreCandidates } from "./candidates.js";
import { ITERATIVE_OPTION_KEYS, IterativeRound, roundHost, type IterativeOptions } from "./round.js";

export interface MADPOIterTrainerOptions extends TaskOptions<MADPOIterConfigInput | MADPOIterConfig>, PreferenceOptions, IterativeOptions {}

const MADPO_ITER_OPTION_KEYS = { ...TASK_OPTION_KEYS, ...PREFERENCE_OPTION_KEYS, ...ITERATIVE_OPTION_KEYS } as const satisfies Record<keyof MADPOIterTrainerOptions, true>;

/** Wraps a stage so that its epochs and steps are read when the schedule asks (they change per iteration). */
export function liveStage(stage: TrainingStage, overrides: Partial<Pick<TrainingStage, "endEpoch" | "runStep">>): TrainingStage {
  return {
    name: stage.name,
    get epochs() {
      return stage.epochs;
    },
    get steps() {
      return stage.steps;
    },
    runStep: overrides.runStep ?? ((i) => stage.runStep(i)),
    endEpoch: overrides.endEpoch ?? (stage.endEpoch ? () => stage.endEpoch!() : undefined),
    evaluateBefore: stage.evaluateBefore ? (i) => stage.evaluateBefore!(i) : undefined,
  };
}

export class MADPOIterTrainer extends MADPOTrainer {
  override readonly algorithm: string = "MADPOIter";
  declare readonly config: MADPOConfig & MADPOIterConfig;
  /** Set by create(). */
  round!: IterativeRound;

  static override async create(options: MADPOIterTrainerOptions): Promise<MADPOIterTrainer> {
    checkOptionKeys(options, MADPO_ITER_OPTION_KEYS, "MADPOIterTrainer.create()");
    const input = options.config as MADPOIterConfigInput | undefined;
    const centralized = madpoIterConfig(input).collaborationMode === "centralized";
    const config = madpoIterConfig(resolveAgentCount(input, options.numAgents, centralized ? undefined : options.agents));
    checkTask(options, config, "MADPOIter");
    const { centralizedComparatorAdapter: _adapter, comparatorAgents: _comparators, ...actorOptions } = options;
    const actors = await setUpPreferenceActors(actorOptions, config as unknown as MADPOConfig, "MADPOIter");
    const trainer = new MADPOIterTrainer(config as unknown as MADPOConfig, actors.agents, options as never, actors.environment, defaultOutputDir("MADPOIterTrainer", options.outputDir), actors.numRoles);
    registerAgents(trainer.components, actors.agents, actors.sources);
    try {
      const info = runtimeInfo();
      trainer.round = new IterativeRound({
        host: roundHost(trainer.stageHost, {
          config,
          agents: actors.agents,
          environment: actors.environment,
          items: options.trainDataset,
          score: (candidates, context) => scoreCandidates(candidates, actors.environment.rewardFunc, actors.environment.rewardProcessor, context),
        }),
        options,
        agentDevices: actors.placement.agentDevices,
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

  protected override iterations(): number {
    return this.config.numIterations;
  }

  /** collect, then DPO on the iteration's training pairs (MADPO's stage over this.preferences), then the policy checkpoint. */
  protected override stages(): TrainingStage[] {
    const collect = this.round.collectStage((pairs) => {
      this.preferences.pairs.length = 0;
      this.preferences.pairs.push(...pairs);
    });
    const [, dpo] = super.stages();
    const trained = liveStage(dpo, {
      endEpoch: async () => {
        if (this.progress.epoch + 1 >= this.config.numTrainEpochs) await this.round.endIteration(this.progress.iteration);
      },
    });
    return [collect, trained];
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
