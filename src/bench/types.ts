// The bench suite's vocabulary: what a benchmark case asks for, what a worker process sends back, and the shape of
// the results file (bench/results/<date>-<host>.json) that reports and `--compare` read.
import type { Dtype } from "../models/causal-lm.js";
import type { RotaryModelType } from "../models/config.js";

/** The dtypes the suite measures, by their short names. */
export type BenchDtype = "fp32" | "bf16";
export const TORCH_DTYPE: Record<BenchDtype, Dtype> = { fp32: "float32", bf16: "bfloat16" };
export const DTYPE_BYTES: Record<BenchDtype, number> = { fp32: 4, bf16: 2 };

/** The model shapes the suite builds (see models.ts); `family-<model_type>`: that family at the 12M shape. */
export type BenchModelName = "tiny" | "12m" | "20m" | "0.5b" | "moe" | "moe-aux" | "sliding" | `family-${RotaryModelType}`;

/** One figure over repeated runs. */
export interface Summary {
  min: number;
  median: number;
  max: number;
  runs: number;
}

// ---- cases: what to run -------------------------------------------------------------------------------------------

export interface MatmulCeilingCase {
  kind: "matmul";
  id: string;
  dtype: BenchDtype;
  repeats: number;
  /** Longest one n×n×n product may take; the largest size under it is measured. */
  iterationSeconds: number;
  /** Seconds one repeat (all its iterations) should take. */
  repeatSeconds: number;
}

export interface CopyCeilingCase {
  kind: "copy";
  id: string;
  bytes: number;
  iterations: number;
  repeats: number;
}

export interface GenerationCase {
  kind: "generate";
  id: string;
  model: BenchModelName;
  dtype: BenchDtype;
  batch: number;
  promptLength: number;
  newTokens: number;
  repeats: number;
  /** "suite": the suite's own protocol; "peer": the protocol the peer figures were measured with. */
  protocol: "suite" | "peer";
}

export interface TrainingCase {
  kind: "train";
  id: string;
  model: BenchModelName;
  dtype: BenchDtype;
  rows: number;
  /** Tokens per row: a prompt of promptLength plus a completion of the rest, all completion tokens scored. */
  tokensPerRow: number;
  promptLength: number;
  repeats: number;
}

export interface TrainerCase {
  kind: "trainer";
  id: string;
  scoring: "batched" | "perCompletion";
  /** Items of the demo dataset in the epoch. */
  items: number;
  repeats: number;
  /** Processes × intra-op threads each, in processes of their own (ranks > 1: data parallel); absent: this worker. */
  layout?: { ranks: number; threads: number };
}

/** One epoch of the demo task by another trainer, split into that trainer's phases (see algorithms.ts). */
export interface AlgorithmCase {
  kind: "algorithm";
  id: string;
  /** "marlhf": pair collection, one reward-model epoch and one RL epoch. */
  algorithm: "iac" | "maac" | "madpo" | "marlhf";
  items: number;
  repeats: number;
  /** A first one-item epoch before the timed ones, so that they do not pay for the process's first calls. */
  warmUp: boolean;
}

/**
 * What each algorithm's epoch is split into, in order: "stage/phase" from the trainer's StageTimings (see
 * lifecycle/timings.ts), then other (the rest of the epoch: tokenizing, logging, bookkeeping).
 */
export const ALGORITHM_PHASES: Record<AlgorithmCase["algorithm"], readonly string[]> = {
  iac: ["train/generation", "train/reward", "train/critic", "train/update", "other"],
  maac: ["train/generation", "train/reward", "train/critic", "train/update", "other"],
  madpo: ["pairs/generation", "pairs/reward", "dpo/update", "other"],
  marlhf: ["pairs/generation", "pairs/reward", "reward_model/update", "rl/generation", "rl/reward", "rl/update", "other"],
};

export type CeilingCase = MatmulCeilingCase | CopyCeilingCase;
export type BenchCase = GenerationCase | TrainingCase | TrainerCase | AlgorithmCase;
export type AnyCase = CeilingCase | BenchCase;

/** What a benchmark returns: raw per-repeat samples and single facts about the run. */
export interface WorkerOutput {
  samples: Record<string, number[]>;
  details: Record<string, number>;
}

/** The worker process prints its result as one stdout line starting with this. */
export const WORKER_RESULT_PREFIX = "comlrl-bench-result ";

/** What the parent saw of a worker process: its memory, and how much of the machine others used meanwhile. */
/** The prefix of a sample holding a phase's peak resident MiB ("peakRssMiB:train/backward"). */
export const PHASE_PEAK_PREFIX = "peakRssMiB:";

export interface ProcessFigures {
  /** The worker process's peak resident set (its process.resourceUsage().maxRSS), MiB. */
  peakRssMiB: number;
  /** Peak device memory of the worker on a GPU, MiB (sampled from nvidia-smi), or null on the CPU. */
  peakDeviceMiB: number | null;
  /**
   * The share of the machine's CPU time (all cores) that other processes and the hypervisor (steal) took while the
   * worker ran, or null where /proc/stat is missing. On a small machine even 10% makes the figures unreliable.
   */
  otherCpuShare: number | null;
}

/** A benchmark's output with what its process figures. */
export interface Measured extends WorkerOutput, ProcessFigures {}

// ---- results -------------------------------------------------------------------------------------------------------

export interface Environment {
  host: string;
  platform: string;
  cpu: string;
  cores: number;
  memoryGiB: number;
  gpu: string | null;
  device: string;
  torchVersion: string;
  blas: string;
  threads: number;
  node: string;
  commit: string | null;
  /** 1-minute load average before and after the run; a busy machine makes every figure low. */
  loadBefore: number;
  loadAfter: number;
}

export interface MatmulCeilingResult extends ProcessFigures {
  id: string;
  dtype: BenchDtype;
  n: number;
  iterations: number;
  gflops: Summary;
}

export interface CopyCeilingResult extends ProcessFigures {
  id: string;
  bytes: number;
  /** A copy: read + write counted. */
  gbps: Summary;
  /** Reading alone (a sum over the buffer): the roofline for decoding. */
  readGbps: Summary;
}

export interface Ceilings {
  matmul: Partial<Record<BenchDtype, MatmulCeilingResult>>;
  copy: CopyCeilingResult;
}

export interface GenerationResult extends ProcessFigures {
  case: GenerationCase;
  parameterCount: number;
  /** New tokens of all rows per second of generate(), prefill included. */
  tokensPerSecond: Summary;
  seconds: Summary;
  /** The fastest generate() of a single new token (the prompt's forward pass), timed once per run. */
  prefillSeconds: number;
  /** Tokens per second of the decode steps alone: (generate − prefill) time. */
  decodeTokensPerSecond: Summary;
  /** Bytes a decode step must read: every weight once plus the KV cache at the mean context. */
  bytesPerDecodeStep: number;
  decodeGBps: Summary;
  /** decodeGBps over the measured read bandwidth. */
  rooflineFraction: Summary;
  /** The decode tokens/s the read bandwidth would allow at bytesPerDecodeStep. */
  rooflineTokensPerSecond: number;
}

export interface TrainingResult extends ProcessFigures {
  case: TrainingCase;
  parameterCount: number;
  stepSeconds: Summary;
  /** The step's parts: zero grad + forward + backward, and the AdamW step. */
  backwardSeconds: Summary;
  optimizerSeconds: Summary;
  tokensPerSecond: Summary;
  /** 6 × parameters × tokens per second. */
  gflops: Summary;
  /** gflops over the measured matmul ceiling of the same dtype. */
  ceilingFraction: Summary;
}

export interface TrainerResult extends ProcessFigures {
  case: TrainerCase;
  envSteps: number;
  epochSeconds: Summary;
  envStepsPerSecond: Summary;
  /** Seconds per phase of the epoch: generation, reward, scoring (reference KL), update, other. */
  phases: Record<"generation" | "reward" | "scoring" | "update" | "other", Summary>;
  /** Data-parallel layouts: the gradient all-reduces of an epoch (one per optimizer step), rank 0's view. */
  communication: { allReducesPerEpoch: number; bytesPerStep: number; secondsPerStep: Summary } | null;
  /** Peak resident MiB per "stage/phase" of the timed epochs (the trainer's StageMemory); absent in older results. */
  phasePeakRssMiB?: Record<string, Summary>;
}

export interface AlgorithmResult extends ProcessFigures {
  case: AlgorithmCase;
  envSteps: number;
  epochSeconds: Summary;
  envStepsPerSecond: Summary;
  /** Seconds per phase, in the algorithm's order (ALGORITHM_PHASES). */
  phases: Record<string, Summary>;
  /** Peak resident MiB per "stage/phase" of the timed epochs (the trainer's StageMemory); absent in older results. */
  phasePeakRssMiB?: Record<string, Summary>;
}

export interface Target {
  name: string;
  /** Higher is better for both; null when the case was not run. */
  value: number | null;
  goal: number;
  /** "ratio": a speed-up (shown as 2.1×); "fraction": a share of a ceiling (shown as 45%). */
  unit: "ratio" | "fraction";
  met: boolean | null;
  detail: string;
}

export interface ComparisonRow {
  figure: string;
  previous: number;
  current: number;
  /** current / previous. */
  ratio: number;
  better: "higher" | "lower";
}

export interface BenchResult {
  schema: 1;
  createdAt: string;
  mode: "default" | "quick";
  only: string | null;
  wallSeconds: number;
  environment: Environment;
  ceilings: Ceilings;
  generation: GenerationResult[];
  training: TrainingResult[];
  trainer: TrainerResult[];
  /** Epochs of the other trainers (absent from results written before they were measured). */
  algorithms?: AlgorithmResult[];
  /** perCompletion epoch time over batched epoch time (medians), when both ran. */
  trainerSpeedup: number | null;
  targets: Target[];
  failed: Array<{ id: string; error: string }>;
  comparison?: { against: string; rows: ComparisonRow[] };
}
