// What every preference trainer (MADPO, MARLHF and their iterative forms) holds around the stages it composes: its
// actors (with the role count, which centralized collaboration keeps apart from the one actor), the training pairs,
// which every checkpoint carries, and evaluation with the task reward; and how each is constructed (construction.ts
// with the preference actors). The stages — pair collection, DPO, the reward model, the RL phase, the iterative
// round — are each trainer's own.
import type { PreferenceBaseConfig } from "./base-config.js";
import { centralizedRunConfig, comlrlModelName, magrpoFamilyRunConfig } from "../../logging/run-config.js";
import type { RolloutSettings } from "../../rollout/tree.js";
import { defaultOutputDir, type ActorExtras } from "../actors.js";
import { registerAgents, type Agent } from "../agents.js";
import { construct } from "../construction.js";
import { evaluateAgents } from "../evaluation.js";
import { Trainer } from "../lifecycle/trainer.js";
import type { TaskOptions } from "../task-options.js";
import { PreferencePairs } from "./pairs.js";
import { setUpPreferenceActors, type PreferenceActors, type PreferenceOptions } from "./setup.js";


/** Single-turn, one sample per agent, scored by the task reward. */
const PREFERENCE_EVAL_SETTINGS: RolloutSettings = {
  numGenerations: 1,
  numTurns: 1,
  jointMode: "aligned",
  earlyTerminationThreshold: null,
  externalPromptPassthrough: false,
  rewardBatching: "node",
};

/**
 * A preference trainer built by the one construction pipeline: its actors loaded from `actorOptions` (default: the
 * trainer's options) and registered, then what `attach` loads beside them (a reward model, the RL phase, a round).
 */
export function constructPreferenceTrainer<T extends Trainer>(steps: {
  algorithm: string;
  options: TaskOptions<unknown> & PreferenceOptions;
  config: PreferenceBaseConfig;
  actorOptions?: TaskOptions<unknown> & PreferenceOptions;
  /** What the algorithm declares beside the actors and asks of them (MARLHF: its reward model and RL phase, see setUpPreferenceActors). */
  actorExtras?: ActorExtras;
  make(actors: PreferenceActors, outputDir: string): T;
  attach?(trainer: T, actors: PreferenceActors): Promise<void>;
}): Promise<T> {
  const { algorithm, options, config } = steps;
  return construct({
    algorithm,
    options,
    config,
    load: () => setUpPreferenceActors(steps.actorOptions ?? options, config, algorithm, steps.actorExtras),
    make: (actors) => steps.make(actors, defaultOutputDir(`${algorithm}Trainer`, options.outputDir)),
    register: (trainer, actors) => registerAgents(trainer.components, actors.agents),
    ...(steps.attach ? { attach: steps.attach } : {}),
  });
}

export abstract class PreferenceTrainer<C extends PreferenceBaseConfig, O extends TaskOptions<unknown>> extends Trainer<C> {
  /** The pairs being trained on: the run's (MADPO, MARLHF) or the current iteration's (the iterative trainers). */
  readonly preferences = new PreferencePairs();

  protected constructor(
    config: C,
    protected readonly actors: PreferenceActors,
    protected readonly options: O,
    outputDir: string,
  ) {
    super(config, options, outputDir);
  }

  /** The trained agents, in agent order. */
  get agents(): Agent[] {
    return this.actors.agents;
  }

  /** Whether the agents sample and step at the same time (on devices or CPU agent lanes of their own). */
  get concurrent(): boolean {
    return this.actors.environment.concurrent;
  }

  /** The role count (numAgents); one centralized actor writes for all of them. */
  get numRoles(): number {
    return this.actors.numRoles;
  }

  /** Held-out evaluation with the task reward (COMLRL-SPEC §3.4), on the agents' evaluation streams. */
  evaluate(numSamples = this.config.evalNumSamples): Promise<Record<string, number>> {
    const items = (this.options.evalDataset ?? []).slice(0, numSamples);
    return evaluateAgents(this.agents, this.actors.environment, PREFERENCE_EVAL_SETTINGS, { items, seed: this.config.seed, envStep: this.progress.envStep, logger: this.host.logger, hooks: this.options });
  }

  // CoMLRL's preference trainers inherit MAGRPO's _init_wandb; its actor count is theirs (one when centralized). MADPO's
  // config has no advantage fields, as it computes no advantage; CoMLRL's MADPOConfig logs its unused defaults.
  protected override comlrlRunConfig(): Record<string, unknown> {
    const c = { advantageMode: "mean", advantageNormalization: true, ...this.config };
    return {
      ...magrpoFamilyRunConfig({ algorithm: this.algorithm, modelName: comlrlModelName(this.options), numAgents: this.agents.length, config: c }),
      ...(c.collaborationMode === "centralized" ? centralizedRunConfig(this.numRoles, this.agents.length, "comparatorGenerationMode" in c) : {}),
    };
  }

  protected override async saveCheckpointFiles(dir: string): Promise<void> {
    await this.preferences.save(dir);
  }

  protected override restoreCheckpointState(state: Record<string, unknown>, dir: string): void {
    super.restoreCheckpointState(state, dir);
    this.preferences.load(dir);
  }
}
