// DistributedContext: this process's place in a data-parallel job and the collectives trainers use, over one c10d
// process group. Every collective must be called by every rank, in the same order; one that a dead or stalled
// peer cannot complete rejects with a TorchError after the job's timeout instead of hanging.
import type { CudaFacts } from "../config/devices.js";
import type { CollectiveTraffic, NativeAddon, NativeModel, NativeProcessGroup, NativeValueHead } from "../native/binding.js";
import { addon } from "../native/loader.js";
import { readDistributedEnvironment, DistributedEnvironmentError, type DistributedEnvironment } from "./environment.js";

/** How allReduce combines the ranks' values. */
export type ReduceOp = "sum" | "mean" | "max" | "min";
export type { CollectiveTraffic };

/** Totals over this process's gradient reductions, for benches and logs. */
export interface CommunicationStats {
  /** Gradient all-reduces so far (one per optimizer step). */
  gradientReductions: number;
  /** Bytes of gradients all-reduced so far. */
  gradientBytes: number;
  /** Seconds spent in gradient all-reduces. */
  gradientSeconds: number;
  /** Bytes broadcast so far (parameters at start and resume). */
  broadcastBytes: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The CUDA device a rank's NCCL group may use: its local rank's own GPU (where auto placement puts it, rankDevice),
 * when this build has NCCL and that GPU exists; null for a rank that shares a GPU or has none. Each collective over
 * GPU tensors then runs on NCCL only if every rank's tensors are on its NCCL device, agreed by all ranks in the call
 * itself (native/distributed/process_group.cc), so ranks never split between NCCL and Gloo.
 */
export function ncclDeviceFor(localRank: number, facts: CudaFacts, ncclAvailable: boolean): number | null {
  return ncclAvailable && facts.cudaAvailable && localRank < facts.deviceCount ? localRank : null;
}

/**
 * The warning a rank of a multi-rank job on a GPU machine gets when its addon has no NCCL (a CUDA build made where
 * nccl.h was missing, or with COMLRL_NCCL=OFF): every GPU gradient is then reduced through Gloo (device to host,
 * TCP, host to device), tens of seconds per step for billions of parameters. Null when NCCL is there or not needed.
 */
export function missingNcclWarning(worldSize: number, facts: CudaFacts, ncclAvailable: boolean): string | null {
  if (ncclAvailable || worldSize < 2 || !facts.cudaAvailable || facts.deviceCount === 0) return null;
  return (
    `this comlrl addon has no NCCL, so the ${worldSize} ranks reduce their GPU gradients through the CPU (Gloo), which is slow; ` +
    "rebuild it against a PyTorch with its nvidia-nccl wheel (npm rebuild comlrl; `node scripts/find-libtorch.mjs` says why NCCL is left out)"
  );
}

function cudaFacts(native: NativeAddon): CudaFacts {
  const { cudaAvailable, cudaDeviceCount } = native.runtimeInfo();
  return { cudaAvailable, deviceCount: cudaDeviceCount };
}

/** This process's place in a data-parallel job and its collectives over c10d's Gloo process group (docs/data-parallel.md). */
export class DistributedContext {
  /** What this rank has communicated so far. */
  readonly stats: CommunicationStats = { gradientReductions: 0, gradientBytes: 0, gradientSeconds: 0, broadcastBytes: 0 };

  private constructor(
    private readonly group: NativeProcessGroup,
    /** The job's torchrun environment. */
    readonly environment: DistributedEnvironment,
  ) {}

  /** Joins the job described by `environment` (waits for every rank, up to its timeout). */
  static async connect(environment: DistributedEnvironment): Promise<DistributedContext> {
    const native = addon();
    if (!native.NativeProcessGroup) throw new DistributedEnvironmentError("this comlrl addon was built without process groups: rebuild it (npm run build:native)");
    const facts = cudaFacts(native);
    const ncclAvailable = native.NativeProcessGroup.ncclAvailable();
    const warning = missingNcclWarning(environment.worldSize, facts, ncclAvailable);
    if (warning) process.emitWarning(warning);
    const nccl = ncclDeviceFor(environment.localRank, facts, ncclAvailable);
    const group = await native.NativeProcessGroup.create({
      rank: environment.rank,
      worldSize: environment.worldSize,
      masterAddr: environment.masterAddr,
      masterPort: environment.masterPort,
      timeoutMs: environment.timeoutMs,
      ...(environment.interface ? { interface: environment.interface } : {}),
      // A rank on a GPU machine reduces its GPU tensors with NCCL on its local GPU (communicators start lazily,
      // at the first collective on that GPU, so a job on CPU devices pays nothing).
      ...(nccl !== null ? { ncclDevice: nccl } : {}),
    });
    return new DistributedContext(group, environment);
  }

  private static shared: Promise<DistributedContext> | null = null;
  private static sharedContext: DistributedContext | null = null;

  /**
   * The process's context from the torchrun environment, joined once and shared by every trainer in the process
   * (as torch.distributed's default group is). Throws when the environment names no job.
   */
  static fromEnvironment(env: NodeJS.ProcessEnv = process.env): Promise<DistributedContext> {
    if (!DistributedContext.shared) {
      const environment = readDistributedEnvironment(env);
      if (!environment) {
        throw new DistributedEnvironmentError(
          'parallelTraining "ddp" needs a data-parallel job: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are unset (start the script with comlrl launch --nproc N)',
        );
      }
      DistributedContext.shared = DistributedContext.connect(environment).then((context) => (DistributedContext.sharedContext = context));
    }
    return DistributedContext.shared;
  }

  /** This process's rank. */
  get rank(): number {
    return this.environment.rank;
  }

  /** Ranks in the job. */
  get worldSize(): number {
    return this.environment.worldSize;
  }

  /** This process's rank on its machine. */
  get localRank(): number {
    return this.environment.localRank;
  }

  /** Rank 0: the one that logs, saves models and writes checkpoints. */
  get isMain(): boolean {
    return this.environment.rank === 0;
  }

  /** Element-wise reduction of a few numbers over the ranks. */
  async allReduce(values: readonly number[] | Float64Array, op: ReduceOp = "sum"): Promise<number[]> {
    return [...(await this.group.allReduce(Float64Array.from(values), op))];
  }

  /** Every rank's JSON value, in rank order (metrics, rewards, per-rank state). */
  async allGather<T>(value: T): Promise<T[]> {
    const parts = await this.group.allGather(encoder.encode(JSON.stringify(value)));
    return parts.map((bytes) => JSON.parse(decoder.decode(bytes)) as T);
  }

  /** root's JSON value on every rank (what the others pass is ignored). */
  async broadcast<T>(value: T, root = 0): Promise<T> {
    const bytes = await this.group.broadcast(this.rank === root ? encoder.encode(JSON.stringify(value)) : new Uint8Array(0), root);
    return JSON.parse(decoder.decode(bytes)) as T;
  }

  /** Waits until every rank has reached it. */
  async barrier(): Promise<void> {
    await this.group.barrier();
  }

  /**
   * Replaces the modules' gradients by the samples-weighted mean over the ranks, Σ w_r·g_r / Σ w_r, so that one
   * step applies the gradient of the union of the ranks' samples. `values` are summed over the ranks. The modules are
   * native ones (an Optimizer's), so only the library calls it.
   * @internal
   */
  async allReduceGradients(
    modules: Array<NativeModel | NativeValueHead>,
    weight: number,
    values: readonly number[] = [],
  ): Promise<{
    /** Σ of the ranks' weights. */
    totalWeight: number;
    /** `values` summed over the ranks. */
    values: number[];
  } & CollectiveTraffic> {
    const result = await this.group.allReduceGradients(modules, { weight, values: Float64Array.from(values) });
    this.stats.gradientReductions++;
    this.stats.gradientBytes += result.bytes;
    this.stats.gradientSeconds += result.seconds;
    return { ...result, values: [...result.values] };
  }

  /**
   * Every parameter and buffer of the (native) modules takes root's values.
   * @internal
   */
  async broadcastParameters(modules: Array<NativeModel | NativeValueHead>, root = 0): Promise<CollectiveTraffic> {
    const traffic = await this.group.broadcastParameters(modules, root);
    this.stats.broadcastBytes += traffic.bytes;
    return traffic;
  }

  /** Leaves the group; the context is unusable afterwards. */
  dispose(): void {
    this.group.dispose();
    if (this === DistributedContext.sharedContext) {
      DistributedContext.shared = null;
      DistributedContext.sharedContext = null;
    }
  }
}
