// The contract between the lifecycle and the work it schedules. A trainer's stages receive their host: the one
// object through which a stage (or a learner hosted by another trainer: MARLHF's RL phase, an iterative round)
// reads the run's counters and generator, logs, records optimizer steps, and agrees with the other ranks of a
// data-parallel job. Whatever runs inside a host is counted, logged, checkpointed and synchronised by the trainer
// that owns the host, and by no other.
import type { ProgressFields } from "../../logging/progress.js";
import type { Optimizer } from "../../models/optimizer.js";
import type { MetricsLogger } from "../../logging/metrics-logger.js";
import type { SeededRandom } from "../../util/random.js";
import type { StageTimings } from "./timings.js";

/**
 * Where train() is and what it has done; checkpoints save exactly this. The current iteration, its stage, the epoch
 * within the stage and the step within the epoch, plus running totals.
 */
export interface TrainProgress {
  /** The current iteration (iterative trainers; 0 otherwise). */
  iteration: number;
  /** The current stage of the iteration's schedule. */
  stage: number;
  /** Completed epochs of the current stage. */
  epoch: number;
  /** The next step (item, pair batch, …) of the current epoch. */
  itemIndex: number;
  /** Env steps so far (joint actions sampled). */
  envStep: number;
  /** Optimizer steps taken, over every component. */
  update: number;
  /** Completed epochs over all stages and iterations: the number in checkpoint-<n>. */
  unitsDone: number;
}

/** One part of an iteration: `epochs` passes over `steps` steps. */
export interface TrainingStage {
  /** The stage's name in timings and logs ("train", "pairs", "rl", …). */
  readonly name: string;
  /** Read when the stage runs, so that a raised epoch count on resume continues the stage. */
  readonly epochs: number;
  /** Steps per epoch: runStep is called with 0 … steps − 1. */
  readonly steps: number;
  /**
   * Runs before an epoch's first step (after the evaluation before it), never for an epoch of no steps: where an
   * epoch draws its order. Checkpoints are taken at epoch ends, so a resumed epoch begins here too.
   */
  beginEpoch?(): Promise<void>;
  /** Runs one step; what it returns is shown on the progress bar. */
  runStep(index: number): Promise<ProgressFields | void>;
  /** Runs after an epoch's last step (drain buffers), before the epoch counts as complete. */
  endEpoch?(): Promise<void>;
  /** Whether to evaluate before step `index`. */
  evaluateBefore?(index: number): boolean;
}

/** One optimizer step of one component, as logged: what every trainer's update returns. */
export interface UpdateRecord {
  /** What the step trained: "agent_0", "agent_0/critic", "critic", "reward_model". */
  component: string;
  /** The loss descended (over every rank under data parallelism); not finite for a skipped step. */
  loss: number;
  /** The gradients' total norm before clipping; NaN for a skipped step. */
  gradNorm: number;
  /** The optimizer's learning rate at this step. */
  learningRate: number;
  /** The samples stepped on (over every rank); 0 for a skipped step. */
  samples: number;
}

/** One optimizer step as a stage asks its host for it (see StageHost.step). */
export interface StepRequest {
  /** The component being stepped, as logged in UpdateRecord.component. */
  component: string;
  /** The optimizer that takes the step. */
  optimizer: Optimizer;
  /** This rank's samples, which weigh its gradients against the other ranks'; 0 for an empty minibatch. */
  samples: number;
  /** Drops the gradients of every module the optimizer steps. */
  zeroGrad(): Promise<unknown>;
  /**
   * Accumulates the gradients and returns the loss they descend. With `loss` given (a loss known before the
   * backward, as DPO's joint one) it returns nothing and runs only when that loss is finite.
   */
  backward(): Promise<number | void>;
  /** A loss known before the backward; when given, the backward runs only if it is finite. */
  loss?: number;
  /** Who was scored on what, for the non-finite message: "agent 0", "a minibatch of 4". */
  subject: string;
  /** What the loss was scored on, for the non-finite message ("a minibatch of 4", "a batch of 8 pairs"). */
  batch: string;
  /** Clips the gradients' total norm to this before stepping; null: no clipping. */
  maxGradNorm: number | null;
  /**
   * The backward is one native backward of the whole loss over modules no other optimizer steps, so the step may be
   * taken inside it (Optimizer armStepInBackward); the host takes it there when its config's stepInBackward asks,
   * maxGradNorm is null and the optimizer synchronises no gradients.
   */
  stepInBackward?: boolean;
}

/** Takes one optimizer step (see StageHost.step). */
export type StepFunction = (request: StepRequest) => Promise<UpdateRecord>;

/** A non-finite loss or value the trainer cannot step over (onNonFinite "error", or a critic's value); the message names the agent and batch. */
export class NonFiniteError extends Error {
  /** Always "NonFiniteError". */
  override name = "NonFiniteError";
}

/** What a batch with a non-finite loss does: "skip" drops its gradient (the default), "error" stops the run. */
export type NonFinitePolicy = "skip" | "error";

/** What every stage and hosted learner runs inside: the progress counters, the shuffle generator, logging, optimizer steps and the non-finite policy. */
export interface StageHost {
  /** The run's counters, which the host advances as steps and updates are taken. */
  readonly progress: TrainProgress;
  /** The run's shuffle generator (checkpointed, per rank under data parallelism). */
  readonly random: SeededRandom;
  /** Read when used: train() opens the logger after the stages may have been built; null on ranks other than 0. */
  readonly logger: MetricsLogger | null;
  /** Whether the stages run sharded across data-parallel ranks: each rank then runs every worldSize-th step. */
  readonly sharded: boolean;
  /** A line on the console (rank 0 only, never when quiet). */
  console(message: string): void;
  /**
   * The element-wise maximum over the ranks (the values themselves in one process): how decisions that depend on
   * local data — whether to update, how many minibatches — are taken alike on every rank.
   */
  agreeMax(values: readonly number[]): Promise<number[]>;
  /** Every rank's items in rank order (this process's in one process): what rank 0 logs for the whole job. */
  gather<T>(local: readonly T[]): Promise<T[]>;
  /**
   * The run's one policy for a non-finite loss (LifecycleOptions.onNonFinite): true when the loss is finite and its
   * batch may step; false when it is skipped (said on the console); a NonFiniteError under "error". `subject`
   * names what was scored ("agent 0", "reward model"), `batch` what it was scored on.
   */
  checkLoss(loss: number, subject: string, batch: string): boolean;
  /**
   * Every optimizer step of every trainer: clears the gradients, runs the backward, checks the loss (checkLoss) and
   * steps; a skipped batch steps with no samples and no gradient, which changes nothing here but issues the
   * gradient reduction every data-parallel peer issues. The step is timed as "update", counted and logged.
   */
  step: StepFunction;
  /**
   * Runs `work` for each of `count` agents (all at once when `concurrent`), timed as "update"; the steps each takes
   * through the `step` it is given are counted and logged in agent order once all are done, so agents that update
   * at once log as agents in turn do. Returns those steps in that order.
   */
  stepAgents(count: number, concurrent: boolean, work: (agent: number, step: StepFunction) => Promise<void>): Promise<UpdateRecord[]>;
  /** Seconds per stage and phase; the stage that runs is the one phases count into. */
  readonly timings: StageTimings;
}
