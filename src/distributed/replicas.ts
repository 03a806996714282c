// What the shared trainer lifecycle does in data-parallel training, in one place: every rank holds a replica of
// every component; rank 0's weights are broadcast at the start and after a resume; each stage's steps are sharded
// across the ranks; every optimizer step first replaces the gradients by their samples-weighted mean over the ranks
// (so replicas stay bit-identical); decisions that depend on local data (when to update, how many minibatches) are
// taken on the ranks' maximum; and each rank's own state (sampling streams, shuffle RNG, counters) travels to rank
// 0's checkpoint, so that a resume with the same world size continues exactly.
import { CausalLM, DROPOUT_STREAM } from "../models/causal-lm.js";
import { Optimizer } from "../models/optimizer.js";
import { nativeModuleOf, type NativeModule } from "../models/native-module.js";
import type { Component, ComponentRegistry } from "../components/registry.js";
import { DistributedContext } from "./context.js";
import { readDistributedEnvironment } from "./environment.js";

/** Where a rank's state keeps component `name`'s dropout stream, beside its sampling stream under `name`. */
const dropoutStreamKey = (name: string) => `${name}#dropout`;

/** What differs between the ranks of one run and so is checkpointed per rank. */
export interface RankState {
  /** The rank's shuffle generator state. */
  random: number;
  /** The rank's env-step counter. */
  envStep: number;
  /** The rank's optimizer-step counter. */
  update: number;
  /** The training sampling stream of each generating component, base64 (and its dropout stream, under name#dropout). */
  generators: Record<string, string>;
}

/** Ranks of a data-parallel job that disagree (a checkpoint of another world size, missing per-rank state). */
export class ReplicaError extends Error {
  /** Always "ReplicaError". */
  override name = "ReplicaError";
}

/** Seeds of rank r > 0 sit this far apart from rank 0's (the same stride per component index as the agents' seed + i). */
const RANK_SEED_STRIDE = 1_000_003;

export class Replicas {
  private joined = false;
  private streamsRestored = false;

  constructor(
    readonly context: DistributedContext,
    private readonly components: ComponentRegistry,
    private readonly seed: number,
  ) {}

  /** Each module once, in registration order. */
  private modules(): NativeModule[] {
    const out: NativeModule[] = [];
    for (const c of this.components.all) {
      const native = c.sharesModuleWith === null ? nativeModuleOf(c.module.key) : null;
      if (native) out.push(native);
    }
    return out;
  }

  /** Components that sample (causal LMs, each module once), whose training streams are per rank. */
  private generators(): Array<{ name: string; model: CausalLM; stream: string | undefined }> {
    return this.components.all.flatMap((c) =>
      c.sharesModuleWith === null && c.module.key instanceof CausalLM ? [{ name: c.name, model: c.module.key, stream: c.module.samplingStream }] : [],
    );
  }

  /**
   * Rank 0's weights on every rank; on a fresh start, rank r's sampling streams re-seeded apart from rank 0's (which
   * keep the one-process seeds); every optimizer's steps reduce gradients across the ranks from now on.
   */
  async join(): Promise<void> {
    const modules = this.modules();
    if (modules.length > 0) await this.context.broadcastParameters(modules);
    if (!this.joined && !this.streamsRestored && this.context.rank > 0) {
      this.generators().forEach(({ model, stream }, i) => model.seedTraining(this.seed + RANK_SEED_STRIDE * this.context.rank + i, stream));
    }
    for (const c of this.components.all) this.synchronizeOptimizer(c);
    this.joined = true;
  }

  private synchronizeOptimizer(c: Component): void {
    if (c.optimizer instanceof Optimizer) c.optimizer.gradientSync = (modules, local) => this.reduceGradients(modules, local);
  }

  /**
   * A component put in place after joining (a fresh reward model): rank 0's weights on every rank, and its
   * optimizer's gradients reduced like every other's. Every rank replaces the component at the same step.
   */
  async adopt(component: Component): Promise<void> {
    if (!this.joined) return;
    const native = component.sharesModuleWith === null ? nativeModuleOf(component.module.key) : null;
    if (native) await this.context.broadcastParameters([native]);
    this.synchronizeOptimizer(component);
  }

  private async reduceGradients(modules: NativeModule[], local: { samples: number; loss?: number }) {
    if (!this.joined) throw new ReplicaError("data-parallel training: call trainer.synchronizeReplicas() before updating outside train()");
    const given = local.loss !== undefined;
    const { totalWeight, values } = await this.context.allReduceGradients(modules, local.samples, [given ? local.samples * local.loss! : 0, given ? 1 : 0]);
    return { samples: totalWeight, ...(values[1] === this.context.worldSize ? { loss: totalWeight > 0 ? values[0] / totalWeight : 0 } : {}) };
  }

  /** The element-wise maximum over the ranks. */
  agreeMax(values: readonly number[]): Promise<number[]> {
    return this.context.allReduce(values, "max");
  }

  /** Every rank's items, concatenated in rank order. */
  async gather<T>(local: readonly T[]): Promise<T[]> {
    return (await this.context.allGather(local)).flat() as T[];
  }

  localState(random: number, progress: { envStep: number; update: number }): RankState {
    const base64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");
    const generators = Object.fromEntries(
      this.generators().flatMap(({ name, model, stream }) => [[name, base64(model.generatorState(stream))], [dropoutStreamKey(name), base64(model.generatorState(DROPOUT_STREAM))]]),
    );
    return { random, envStep: progress.envStep, update: progress.update, generators };
  }

  gatherStates(state: RankState): Promise<RankState[]> {
    return this.context.allGather(state);
  }

  /** This rank's part of a checkpoint written by a run of the same world size; returns the RNG state to restore. */
  restoreState(saved: { worldSize?: number; ranks?: RankState[] }, progress: { envStep: number; update: number }): number | null {
    const savedWorld = saved.worldSize ?? 1;
    if (savedWorld !== this.context.worldSize) {
      throw new ReplicaError(`the checkpoint was written by a run of ${savedWorld} rank(s), this run has ${this.context.worldSize}: resume with the same world size`);
    }
    const mine = saved.ranks?.[this.context.rank];
    if (!mine) return null;
    for (const { name, model, stream } of this.generators()) {
      for (const [key, restored, kind] of [[name, stream, "sampling"], [dropoutStreamKey(name), DROPOUT_STREAM, "dropout"]] as const) {
        const state = mine.generators[key];
        if (state === undefined) throw new ReplicaError(`the checkpoint has no ${kind} stream of ${name} for rank ${this.context.rank}`);
        model.setGeneratorState(new Uint8Array(Buffer.from(state, "base64")), restored);
      }
    }
    progress.envStep = mine.envStep;
    progress.update = mine.update;
    this.streamsRestored = true;
    return mine.random;
  }
}

/** A trainer's data-parallel job before it has joined: its rank (known at once) and the context being connected. */
export interface PendingJob {
  rank: number;
  context: Promise<DistributedContext>;
}

/**
 * The job a trainer belongs to: the context it was given, or with parallelTraining "ddp" the process's job from
 * the torchrun environment (joining starts now; a failure surfaces where the trainer first awaits it).
 */
export function pendingJob(given: DistributedContext | null | undefined, parallelTraining: string | undefined): PendingJob | null {
  if (given) return { rank: given.rank, context: Promise.resolve(given) };
  if (parallelTraining !== "ddp") return null;
  const context = DistributedContext.fromEnvironment();
  context.catch(() => {});
  return { rank: readDistributedEnvironment()!.rank, context };
}
