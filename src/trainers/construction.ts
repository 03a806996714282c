// The one way every trainer is built: options → config → agent count → task checks → environment checks, all before
// anything is loaded; then the actors, the trainer around them, its components registered, and what it loads beside
// them (critics, a reward model, an iterative round). A failure at any step frees everything built so far: the
// actors while no trainer holds them, the trainer's registry (and so everything registered) after.
import { DistributedEnvironmentError, readDistributedEnvironment } from "../distributed/environment.js";
import { checkTask } from "./actors.js";
import type { Agent } from "./agents.js";
import type { LifecycleConfig, Trainer } from "./lifecycle/trainer.js";
import type { TaskOptions } from "./task-options.js";

/** What construction needs of the loaded actors to free them. */
export interface LoadedActors {
  agents: Agent[];
}

export interface Construction<T extends Trainer, A extends LoadedActors> {
  algorithm: string;
  options: TaskOptions<unknown>;
  /** The validated config with its agent count. */
  config: LifecycleConfig & { numTurns: number };
  /** Checks of the algorithm's own beside the task's and the environment's, before anything is loaded. */
  check?(): void;
  /** Plans the placement, checks the memory and loads the actors (setUpActors; freeing what it loaded when it fails). */
  load(): Promise<A>;
  /** The trainer around the actors; may load what the constructor takes (critics), freeing it when it fails. */
  make(actors: A): T | Promise<T>;
  /** Registers the actors (and what make loaded) so that close() frees them. */
  register(trainer: T, actors: A): void;
  /** Loads and registers the rest. */
  attach?(trainer: T, actors: A): Promise<void>;
}

/** A "ddp" run needs its job: the torchrun environment or a given context (checked before any model is loaded). */
function checkEnvironment(options: TaskOptions<unknown>, config: LifecycleConfig): void {
  if (config.parallelTraining === "ddp" && !options.distributed && !readDistributedEnvironment()) {
    throw new DistributedEnvironmentError(
      'parallelTraining "ddp" needs a data-parallel job: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are unset (start the script with comlrl launch --nproc N)',
    );
  }
}

export async function construct<T extends Trainer, A extends LoadedActors>(steps: Construction<T, A>): Promise<T> {
  checkTask(steps.options, steps.config, steps.algorithm);
  steps.check?.();
  checkEnvironment(steps.options, steps.config);
  const actors = await steps.load();
  let trainer: T;
  try {
    trainer = await steps.make(actors);
  } catch (error) {
    for (const agent of actors.agents) agent.dispose();
    throw error;
  }
  try {
    steps.register(trainer, actors);
    await steps.attach?.(trainer, actors);
  } catch (error) {
    await trainer.close();
    throw error;
  }
  return trainer;
}
