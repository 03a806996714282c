// Where a trainer's time goes: seconds per stage of its schedule and, within each stage, per phase of work. The
// lifecycle times every stage's steps; rollouts, critics and updates time their phases into the stage running them,
// so MARLHF's sampling shows apart in its pair collection ("pairs") and its RL phase ("rl"). The bench reports these.
// Given a StageMemory, the same phases measure their peak memory too (memory.ts).
import type { MemoryPhase, StageMemory } from "./memory.js";

/**
 * generation: sampling; reward: the reward function (in an RL phase against a reward model, its scoring);
 * referenceKl: scoring against the reference model; critic: old-value readouts; update: forward, backward and
 * optimizer steps of whatever the stage trains.
 */
export const PHASES = ["generation", "reward", "referenceKl", "critic", "update"] as const;
/** A phase of a stage's time in trainer.timings: generation, reward, referenceKl, critic, update, …. */
export type Phase = (typeof PHASES)[number];

/** One stage's seconds in all, and of each phase within them; the rest is bookkeeping (tokenizing, logging, …). */
export type StageTime = {
  /** Wall-clock seconds of the stage in all, phases and bookkeeping together. */
  seconds: number;
} & Record<Phase, number>;

const zero = (): StageTime => ({ seconds: 0, generation: 0, reward: 0, referenceKl: 0, critic: 0, update: 0 });

/**
 * Seconds since the trainer was made, evaluation not counted. Work done outside train() (a loop of its own calling
 * collect/update) counts into the stage that ran last, "train" before any.
 */
export class StageTimings {
  private readonly byStage = new Map<string, StageTime>();
  private current = "train";

  /** Where the phases' peak memory goes too (null: time only). */
  readonly memory: StageMemory | null;

  /** `memory`: where the phases' peak memory goes too (none: time only). */
  constructor(memory: StageMemory | null = null) {
    this.memory = memory;
  }

  /** Phases from now on count into `stage`. */
  enter(stage: string): void {
    this.current = stage;
    this.memory?.enter(stage);
  }

  /** Adds seconds to the current stage: to its total ("seconds") or to one of its phases. */
  add(what: Phase | "seconds", seconds: number): void {
    let time = this.byStage.get(this.current);
    if (!time) this.byStage.set(this.current, (time = zero()));
    time[what] += seconds;
  }

  /** Runs `work` and adds its wall time to the current stage's `what`. */
  async time<T>(what: Phase | "seconds", work: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await (what === "seconds" ? work() : this.measure(what, work));
    } finally {
      this.add(what, (performance.now() - started) / 1000);
    }
  }

  /** Runs `work` with its peak memory counted towards `phase` (untimed: a part of a timed phase, as an update's optimizer step). */
  measure<T>(phase: MemoryPhase, work: () => Promise<T>): Promise<T> {
    return this.memory ? this.memory.within(phase, work) : work();
  }

  /** A copy of every stage's times, in the order the stages first ran. */
  get stages(): Record<string, StageTime> {
    return Object.fromEntries([...this.byStage].map(([name, time]) => [name, { ...time }]));
  }

  /** One stage's times (zeros for a stage that has not run). */
  of(stage: string): StageTime {
    return { ...(this.byStage.get(stage) ?? zero()) };
  }
}
