// An online trainer: the shared lifecycle (lifecycle/trainer.ts) around one learner (learner.ts) built in the
// trainer's host. Its one stage is the learner's train stage; collect, update, generate and evaluation are the
// learner's, so a loop of one's own drives the learner as train() does.
import type { Item } from "../rollout/types.js";
import type { Agent } from "./agents.js";
import type { StageHost, TrainingStage, UpdateRecord } from "./lifecycle/stage-host.js";
import { Trainer, type LifecycleOptions } from "./lifecycle/trainer.js";
import type { RolloutLearnerConfig, RolloutLearner, RolloutSample } from "./learner.js";

export abstract class RolloutTrainer<S extends RolloutSample, C extends RolloutLearnerConfig, L extends RolloutLearner<S, unknown, RolloutSample, C>> extends Trainer<C> {
  /** The rollout/update half of the algorithm, running in this trainer's host. */
  readonly learner: L;

  protected constructor(config: C, lifecycle: LifecycleOptions, outputDir: string, learner: (host: StageHost) => L) {
    super(config, lifecycle, outputDir);
    this.learner = learner(this.host);
  }

  /** The trained agents, in agent order. */
  get agents(): Agent[] {
    return this.learner.agents;
  }

  /** Agent's formatted turn-1 prompt for an item. */
  promptFor(agent: number, item: Item): string {
    return this.learner.promptFor(agent, item);
  }

  /** K sampled completions per prompt for each agent: prompts[agent] → texts[agent][prompt][k]. */
  generate(prompts: string[][], k = this.config.numGenerations): Promise<string[][][]> {
    return this.learner.generate(prompts, k);
  }

  /** Rolls out each item and returns its samples, advancing the env-step counter. */
  collect(items: Item[], firstItemIndex = 0): Promise<S[]> {
    return this.learner.collect(items, firstItemIndex);
  }

  /** One pass of updates over the samples (see RolloutLearner.update); the steps taken, in agent order. */
  update(samples: S[]): Promise<UpdateRecord[]> {
    return this.learner.update(samples);
  }

  /** Held-out evaluation (COMLRL-SPEC §3.4) on the agents' evaluation streams. */
  evaluate(numSamples = this.config.evalNumSamples): Promise<Record<string, number>> {
    return this.learner.evaluate(numSamples);
  }

  protected stages(): TrainingStage[] {
    return [this.learner.trainStage()];
  }

  protected override assertCheckpointable(): void {
    this.learner.assertDrained();
  }
}
