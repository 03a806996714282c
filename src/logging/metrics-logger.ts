// The one object trainers log through. Every record goes to outputDir/metrics.jsonl; TensorBoard (outputDir/tensorboard)
// and W&B receive what the spec says they see (§4.5), all on the env_step axis:
//   logTrain  → JSONL every time; TensorBoard and W&B only when the rate limit lets it through (the spec's rule:
//               loggingSteps ≤ 1, or nothing logged yet, or envStep − lastLoggedStep ≥ loggingSteps). The JSONL
//               file is the complete record; the rate limit exists to keep dashboards light.
//   log       → every sink, never rate-limited (epoch-end summaries, iteration counters, final_model_saved).
//   logEval   → every sink, keys prefixed "eval/" here, so trainers pass the same names they use for training.
//   logSamples→ JSONL kind "samples", a markdown table in TensorBoard's Text tab, a W&B table.
// lastLoggedStep is part of the trainer's checkpoint (state()/loadState()) so a resumed run keeps the same cadence.
import path from "node:path";
import { JsonlMetricsWriter, type MetricsKind } from "./jsonl.js";
import { TensorBoardWriter } from "./tensorboard.js";
import { WandbLogger, wandbSkipReason, type WandbConfig, type WandbRunIdentity } from "./wandb.js";

/** One logged value: a number, a string, a flag, or null for a missing one. */
export type MetricValue = number | string | boolean | null;
/** A record of metrics by name, as MetricsLogger.log takes them. */
export type Metrics = Record<string, MetricValue>;

/** One generated completion, as shown in sample tables. */
export interface SampleRow {
  /** The turn (1-based, as logged). */
  turn: number;
  /** The agent index (or a role name). */
  agent: number | string;
  /** The prompt text. */
  prompt: string;
  /** The completion text. */
  completion: string;
  /** The joint action's reward. */
  reward: number;
}

/** Where and how MetricsLogger.create logs: the output directory, rate limit and sinks. */
export interface MetricsLoggerOptions {
  /** Directory of the JSONL metrics, plots and TensorBoard files. */
  outputDir: string;
  /** The spec's logging_steps: the least env_step gap between train records sent to TensorBoard and W&B. */
  loggingSteps: number;
  /** The trainer's name (e.g. "MAGRPO"), for the default W&B run name test-<algorithm lower-case>. */
  algorithm: string;
  /** Also write TensorBoard event files (under outputDir/tensorboard). */
  tensorboard?: boolean;
  /** Null or absent: no W&B. */
  wandb?: WandbConfig | null;
  /** The W&B run config (model, agents, learning rates, …); the config sections are merged in. */
  runConfig?: Record<string, unknown>;
  /** No console output (the spec's verbose=false). */
  quiet?: boolean;
}

/** What a checkpoint saves of a MetricsLogger, so that a resumed run keeps its log rate limit. */
export interface MetricsLoggerState {
  /** env_step of the last train record sent to TensorBoard and W&B; null before the first. */
  lastLoggedStep: number | null;
}

const SAMPLE_COLUMNS = ["turn", "agent", "prompt", "completion", "reward"] as const;

/** The spec's train-log rate limit. */
export function shouldLogTrain(step: number, lastLoggedStep: number | null, loggingSteps: number): boolean {
  return loggingSteps <= 1 || lastLoggedStep === null || step - lastLoggedStep >= loggingSteps;
}

// Backslash-escape what markdown would read as formatting or table structure; line breaks become <br> because a
// table cell must stay on one line (TensorBoard's markdown renderer allows that tag).
function markdownCell(value: string | number): string {
  return String(value)
    .replace(/[\\`*_[\]<>|#~]/g, (c) => `\\${c}`)
    .replace(/\r?\n/g, "<br>");
}

/** Sample rows as a markdown table for TensorBoard's Text tab. */
export function samplesMarkdown(rows: SampleRow[]): string {
  const header = `| ${SAMPLE_COLUMNS.join(" | ")} |`;
  const rule = `|${SAMPLE_COLUMNS.map(() => "---").join("|")}|`;
  const body = rows.map((row) => `| ${SAMPLE_COLUMNS.map((column) => markdownCell(row[column])).join(" | ")} |`);
  return [header, rule, ...body].join("\n");
}

function checkEnvStep(envStep: number, method: string): void {
  if (!Number.isSafeInteger(envStep) || envStep < 0) {
    throw new Error(`MetricsLogger.${method}: envStep must be a non-negative integer, got ${envStep}`);
  }
}

/** Writes a run's metrics to metrics.jsonl, and to TensorBoard and W&B when enabled (rank 0 only in data-parallel jobs). */
export class MetricsLogger {
  private lastLoggedStep: number | null = null;
  private closed = false;

  private constructor(
    private readonly loggingSteps: number,
    private readonly jsonl: JsonlMetricsWriter,
    private readonly tensorboard: TensorBoardWriter | null,
    private readonly wandb: WandbLogger | null,
  ) {}

  /** Opens the local files, then starts the W&B run if configured; if W&B fails, the files are closed again. */
  static async create(options: MetricsLoggerOptions): Promise<MetricsLogger> {
    if (!Number.isFinite(options.loggingSteps)) {
      throw new Error(`MetricsLogger: loggingSteps must be a number, got ${options.loggingSteps}`);
    }
    const jsonl = new JsonlMetricsWriter(path.join(options.outputDir, "metrics.jsonl"));
    const tensorboard = options.tensorboard ? new TensorBoardWriter(path.join(options.outputDir, "tensorboard")) : null;
    let wandb: WandbLogger | null = null;
    if (options.wandb) {
      const skip = wandbSkipReason();
      if (skip !== null) {
        if (!options.quiet) console.warn(`comlrl: ${skip}`);
      } else {
        try {
          wandb = await WandbLogger.init(options.wandb, {
            algorithm: options.algorithm,
            runConfig: options.runConfig ?? {},
            quiet: options.quiet ?? false,
          });
        } catch (error) {
          jsonl.close();
          tensorboard?.close();
          throw error;
        }
      }
    }
    return new MetricsLogger(options.loggingSteps, jsonl, tensorboard, wandb);
  }

  private checkOpen(method: string): void {
    if (this.closed) throw new Error(`MetricsLogger.${method}: the logger is closed`);
  }

  // TensorBoard has scalars and text; booleans and nulls stay in JSONL and W&B.
  private toTensorBoard(metrics: Metrics, envStep: number): void {
    if (!this.tensorboard) return;
    const scalars: Record<string, number> = {};
    for (const [key, value] of Object.entries(metrics)) {
      if (typeof value === "number") scalars[key] = value;
      else if (typeof value === "string") this.tensorboard.addText(key, value, envStep);
    }
    this.tensorboard.addScalars(scalars, envStep);
  }

  /** Writes to every sink, without rate limiting. */
  log(kind: MetricsKind, metrics: Metrics, envStep: number): void {
    this.checkOpen("log");
    checkEnvStep(envStep, "log");
    this.jsonl.write(kind, envStep, metrics);
    this.toTensorBoard(metrics, envStep);
    this.wandb?.log(metrics, envStep);
  }

  /** Writes a train record; returns whether the rate limit let it through to TensorBoard and W&B. */
  logTrain(metrics: Metrics, envStep: number): boolean {
    this.checkOpen("logTrain");
    checkEnvStep(envStep, "logTrain");
    this.jsonl.write("train", envStep, metrics);
    if (!shouldLogTrain(envStep, this.lastLoggedStep, this.loggingSteps)) return false;
    this.toTensorBoard(metrics, envStep);
    this.wandb?.log(metrics, envStep);
    this.lastLoggedStep = envStep;
    return true;
  }

  /** Writes eval metrics under "eval/<key>"; a key that already starts with "eval/" is a caller bug and throws. */
  logEval(metrics: Metrics, envStep: number): void {
    this.checkOpen("logEval");
    const prefixed: Metrics = {};
    for (const [key, value] of Object.entries(metrics)) {
      if (key.startsWith("eval/")) {
        throw new Error(`MetricsLogger.logEval: metric "${key}" is already prefixed; logEval adds "eval/" itself`);
      }
      prefixed[`eval/${key}`] = value;
    }
    this.log("eval", prefixed, envStep);
  }

  /** Writes sample completions under name (default "samples"). */
  logSamples(rows: SampleRow[], envStep: number, name = "samples"): void {
    this.checkOpen("logSamples");
    checkEnvStep(envStep, "logSamples");
    this.jsonl.write("samples", envStep, { name, rows });
    this.tensorboard?.addText(name, samplesMarkdown(rows), envStep);
    this.wandb?.logTable(name, [...SAMPLE_COLUMNS], rows.map((row) => SAMPLE_COLUMNS.map((column) => row[column])), envStep);
  }

  /** The W&B run to record in checkpoints, or null without W&B. */
  wandbRunIdentity(): WandbRunIdentity | null {
    return this.wandb?.runIdentity() ?? null;
  }

  /** Where metrics.jsonl ends now (a checkpoint records it; see readRunMetrics). */
  metricsBytes(): number {
    return this.jsonl.bytes();
  }

  /** What a checkpoint saves so that a resumed run logs as an uninterrupted one would. */
  state(): MetricsLoggerState {
    return { lastLoggedStep: this.lastLoggedStep };
  }

  /** Restores state() from a checkpoint. */
  loadState(state: MetricsLoggerState): void {
    const last: unknown = (state as { lastLoggedStep?: unknown } | null)?.lastLoggedStep;
    if (last !== null && !(typeof last === "number" && Number.isSafeInteger(last) && last >= 0)) {
      throw new Error(`MetricsLogger.loadState: lastLoggedStep must be null or a non-negative integer, got ${JSON.stringify(last)}`);
    }
    this.lastLoggedStep = last;
  }

  /** Closes the files and finishes the W&B run. Closing twice is harmless. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.jsonl.close();
    this.tensorboard?.close();
    await this.wandb?.finish();
  }
}
