// The lifecycle every trainer shares: a schedule of stages (each a number of epochs over a number of steps) run inside
// iterations, periodic evaluation, per-update metrics, checkpoints with exact resume, saving and disposal. A trainer
// registers its components (see src/components/registry.ts) and supplies its stages and evaluate(); everything here iterates
// over those and never knows what an agent, a critic or a reward model is. The stages, and the learners they drive,
// run inside the trainer's stage host (stage-host.ts).
import { existsSync } from "node:fs";
import path from "node:path";
import { loadCheckpoint, pruneCheckpoints, resolveCheckpoint, saveCheckpoint, setAsideLaterCheckpoints, CheckpointError } from "../../checkpoint/checkpoint.js";
import { setAsideEarlierRunMetrics, writeResumeMarker } from "../../logging/jsonl.js";
import { MetricsLogger, type MetricsLoggerState } from "../../logging/metrics-logger.js";
import { ProgressBar, type ProgressFields } from "../../logging/progress.js";
import { OURS_RUN_CONFIG_KEY } from "../../logging/run-config.js";
import { mergeWandbResume, type WandbConfig, type WandbRunIdentity } from "../../logging/wandb.js";
import type { DistributedContext } from "../../distributed/context.js";
import { checkRanksAgree } from "../../distributed/fingerprint.js";
import { shardStage } from "./shard.js";
import { pendingJob, Replicas, type PendingJob, type RankState } from "../../distributed/replicas.js";
import { SeededRandom } from "../../util/random.js";
import { ComponentRegistry, type SaveModelOptions } from "../../components/registry.js";
import { StageTimings } from "./timings.js";
import { StageMemory } from "./memory.js";
import { memoryWindow, releaseFreedCpuMemory } from "../../runtime.js";
import { checkOptionKeys } from "../options.js";
import { makeDirsSync } from "../../util/make-dirs.js";
import { lockRunDirectories, releaseKeepingFirstError } from "../../util/run-lock.js";
import { checkResumeConfig } from "../../checkpoint/config-changes.js";
import { forEachAgent } from "../../rollout/tree.js";
import { NonFiniteError, type NonFinitePolicy, type StageHost, type StepRequest, type TrainingStage, type TrainProgress, type UpdateRecord } from "./stage-host.js";

export { NonFiniteError, type NonFinitePolicy, type StageHost, type StepFunction, type StepRequest, type TrainingStage, type TrainProgress, type UpdateRecord } from "./stage-host.js";

/** Something whose state a checkpoint saves and restores (a stateful dataset, a curriculum, a callback). */
export interface Stateful {
  /** The state to checkpoint; must be JSON-serialisable. */
  stateDict(): unknown;
  /** Restores a state stateDict returned, on resume. */
  loadStateDict(state: unknown): void;
}

// The options CoMLRL checkpoints unasked when they have state_dict/load_state_dict (its callback fields, under our
// names), each formatter too as formatters.<i>.
const DETECTED_STATEFUL_OPTIONS = ["trainDataset", "rewardFunc", "rewardProcessor", "externalTransition", "metricsCallback", "evalDataset", "evalLogger", "evalAggregator"];

// Our spelling first, then Python's, which CoMLRL calls (a dataset or callback ported from Python keeps it).
const STATE_METHOD_SPELLINGS = [
  ["stateDict", "loadStateDict"],
  ["state_dict", "load_state_dict"],
] as const;

/** An option's checkpoint methods under either spelling, or null when it has none; a save without a load is an error. */
function asStateful(name: string, value: object): Stateful | null {
  const methods = value as Record<string, unknown>;
  for (const [save, load] of STATE_METHOD_SPELLINGS) {
    const saveState = methods[save];
    const loadState = methods[load];
    if (typeof saveState !== "function") continue;
    if (typeof loadState !== "function") throw new TypeError(`${name} provides ${save} but no ${load}, so a checkpoint could not restore it`);
    return { stateDict: () => saveState.call(value) as unknown, loadStateDict: (state) => void loadState.call(value, state) };
  }
  return null;
}

/** Options every trainer takes beside its algorithm's own. */
export interface LifecycleOptions {
  /** Where metrics, plots and saved models go (default runs/<algorithm>-<timestamp>). */
  outputDir?: string;
  /** Also write TensorBoard event files (under outputDir/tensorboard). */
  tensorboard?: boolean;
  /** Log to this W&B run (null: no W&B). */
  wandbConfig?: WandbConfig | null;
  /** No progress bar or console lines. */
  quiet?: boolean;
  /**
   * Objects whose stateDict() checkpoints save and loadStateDict() resume restores, in this order. Datasets, reward
   * and transition functions, processors, formatters and evaluation callbacks given as options need not be listed:
   * those with a stateDict (or Python's state_dict / load_state_dict) are checkpointed under their option's name, as
   * CoMLRL does.
   */
  stateful?: Stateful[];
  /** Data-parallel training in this job (see src/distributed); parallelTraining "ddp" joins the torchrun environment's. */
  distributed?: DistributedContext | null;
  /**
   * A batch whose loss is not finite: "skip" (default) drops its gradient and says so, so that one bad batch never
   * poisons the weights; "error" stops the run naming the batch.
   */
  onNonFinite?: NonFinitePolicy;
  /** The bytes a CPU run may hold by the estimate made before loading (default: the machine's RAM; Infinity: no check). */
  memoryLimitBytes?: number;
}

export const LIFECYCLE_OPTION_KEYS = { outputDir: true, tensorboard: true, wandbConfig: true, quiet: true, stateful: true, distributed: true, onNonFinite: true, memoryLimitBytes: true } as const satisfies Record<
  keyof LifecycleOptions,
  true
>;

/** The config fields the lifecycle reads. */
export interface LifecycleConfig {
  /** Seeds the run's shuffle generator and sampling streams. */
  readonly seed: number;
  /** Least env-step gap between two train-metric logs. */
  readonly loggingSteps: number;
  /** "ddp": data-parallel across the processes of a torchrun-style job. */
  readonly parallelTraining?: string;
  /** Take a step inside its backward wherever it can be (see StepRequest.stepInBackward); absent: never. */
  readonly stepInBackward?: boolean;
}

/** Checkpoint and resume options of train() (docs/checkpoints.md). */
export interface TrainOptions {
  /** Where checkpoint-<completed epochs>/ directories go; checkpoints are off without it. */
  checkpointDir?: string;
  /** Save every this many completed epochs (default 1), and always at the end. */
  checkpointInterval?: number;
  /** A checkpoint directory, or "latest" for the newest complete one in checkpointDir. */
  resumeFromCheckpoint?: string;
  /** Keep only the newest N checkpoints (older ones are removed after a new one is complete). */
  keepLast?: number;
  /**
   * Config fields a resume may change beyond those that are always changeable (numTrainEpochs, logging, evaluation,
   * devices; see RESUME_CHANGEABLE_FIELDS): a resume under any other changed field is refused, naming it.
   */
  allowConfigChanges?: string[];
}

const TRAIN_OPTION_KEYS = { checkpointDir: true, checkpointInterval: true, resumeFromCheckpoint: true, keepLast: true, allowConfigChanges: true } as const satisfies Record<
  keyof TrainOptions,
  true
>;

/** What every trainer is: registered components plus a schedule of stages, with evaluation, logging, checkpoints, exact resume and data parallelism (docs/architecture.md). */
export abstract class Trainer<C extends LifecycleConfig = LifecycleConfig> {
  /** The algorithm's name, as CoMLRL logs it ("MAGRPO", "IAC", …). */
  abstract readonly algorithm: string;
  /** Where training stands: epoch, item, env steps, updates (checkpointed). */
  readonly progress: TrainProgress;
  /** Every weight-bearing part (agents, references, critics, heads, reward models) that checkpoints, saveModel and close() iterate over. */
  readonly components = new ComponentRegistry();
  protected readonly random: SeededRandom;
  /** What this trainer's stages and learners run inside (see stage-host.ts). */
  readonly host: StageHost;
  protected logger: MetricsLogger | null = null;
  /** Where metrics go: outputDir, or a resume-* subdirectory when resuming over an earlier run's files. */
  protected logDir: string;
  private resumedLoggerState: MetricsLoggerState | null = null;
  /** The W&B run the checkpoint resumed from was logging to, which the resumed run continues. */
  private resumedWandbRun: WandbRunIdentity | null = null;
  private running = false;
  private readonly job: PendingJob | null;
  private replicas: Replicas | null = null;

  protected constructor(
    /** The built, frozen config. */
    readonly config: C,
    protected readonly lifecycle: LifecycleOptions,
    /** Where metrics, TensorBoard files and the trainers' artefacts go. */
    readonly outputDir: string,
  ) {
    this.host = this.makeHost();
    this.progress = this.host.progress;
    this.random = this.host.random;
    this.logDir = outputDir;
    this.job = pendingJob(lifecycle.distributed, config.parallelTraining);
  }

  private makeHost(): StageHost {
    const logger = () => this.logger;
    const sharded = () => this.job !== null;
    return {
      progress: { iteration: 0, stage: 0, epoch: 0, itemIndex: 0, envStep: 0, update: 0, unitsDone: 0 },
      random: new SeededRandom(this.config.seed),
      get logger() {
        return logger();
      },
      get sharded() {
        return sharded();
      },
      console: (message) => this.console(message),
      agreeMax: async (values) => {
        if (this.job && !this.replicas) throw new Error(`${this.algorithm}: data-parallel training: call synchronizeReplicas() before updating outside train()`);
        return this.replicas ? this.replicas.agreeMax(values) : [...values];
      },
      gather: async (local) => (this.replicas ? this.replicas.gather(local) : [...local]),
      checkLoss: (loss, subject, batch) => {
        if (Number.isFinite(loss)) return true;
        if ((this.lifecycle.onNonFinite ?? "skip") === "error") {
          throw new NonFiniteError(`${subject}: non-finite loss (${loss}) on ${batch}; lower the learning rates or check the rewards (onNonFinite "skip" steps over such batches)`);
        }
        this.console(`${subject}: non-finite loss (${loss}); ${batch} skipped`);
        return false;
      },
      step: (request) => this.timings.time("update", () => this.takeStep(request, (update) => this.recordUpdate(update.component, update))),
      stepAgents: async (count, concurrent, work) => {
        const taken: UpdateRecord[][] = Array.from({ length: count }, () => []);
        await this.timings.time("update", () => forEachAgent(count, concurrent, (agent) => work(agent, (request) => this.takeStep(request, (update) => taken[agent].push(update)))));
        for (const update of taken.flat()) this.recordUpdate(update.component, update);
        return taken.flat();
      },
      timings: new StageTimings(new StageMemory(memoryWindow)),
    };
  }

  /** StageHost.step without its timing; `record` takes the step's record. */
  private async takeStep(request: StepRequest, record: (update: UpdateRecord) => void): Promise<UpdateRecord> {
    const { optimizer } = request;
    await request.zeroGrad();
    const known = request.loss;
    // The one place that decides: the config asks for it, the backward allows it, and nothing comes between the
    // backward and the step (no clipping, no gradient synchronisation).
    const inBackward = this.config.stepInBackward === true && request.stepInBackward === true && request.maxGradNorm === null && optimizer.gradientSync === null;
    let returned: number | void = undefined;
    if (known === undefined || Number.isFinite(known)) {
      if (inBackward) await optimizer.armStepInBackward();
      try {
        returned = await this.timings.measure("backward", () => request.backward());
      } catch (error) {
        if (inBackward) await optimizer.disarmStepInBackward();
        throw error;
      }
    }
    const loss = known ?? (returned as number);
    let update: UpdateRecord;
    if (this.host.checkLoss(loss, request.subject, request.batch)) {
      const step = await this.timings.measure("optimizer", () => optimizer.step({ maxGradNorm: request.maxGradNorm ?? undefined, samples: request.samples, loss }));
      update = { component: request.component, loss: step.loss ?? loss, gradNorm: step.gradNorm, learningRate: optimizer.learningRates()[0], samples: step.samples };
    } else {
      await request.zeroGrad();
      await optimizer.step({ samples: 0, loss: 0 });
      update = { component: request.component, loss, gradNorm: Number.NaN, learningRate: optimizer.learningRates()[0], samples: 0 };
    }
    // Dropped as soon as they are applied, so that agents updating in turn never hold their gradients at once (one
    // agent's gradients are as large as its weights).
    await request.zeroGrad();
    record(update);
    return update;
  }

  /** Where this trainer's time went, per stage and phase (evaluation not counted). */
  get timings(): StageTimings {
    return this.host.timings;
  }

  /** Rank 0 of a data-parallel job, or the only process: the one that logs, saves models and writes checkpoints. */
  get isMain(): boolean {
    return (this.job?.rank ?? 0) === 0;
  }

  private async connectReplicas(): Promise<void> {
    if (!this.job || this.replicas) return;
    const context = await this.job.context;
    await checkRanksAgree(context, this.components, this.config);
    this.replicas = new Replicas(context, this.components, this.config.seed);
  }

  /**
   * Data-parallel training: rank 0's weights on every rank and gradient reduction at every optimizer step from
   * now on. train() calls it; a loop of its own (collect/update) calls it once before its first update.
   */
  async synchronizeReplicas(): Promise<void> {
    await this.connectReplicas();
    await this.replicas?.join();
  }

  /**
   * Puts a fresh module in place of a registered component (MARLHFIter's reward model every iteration); under data
   * parallelism the new module takes rank 0's weights and its optimizer reduces gradients like every other.
   */
  protected async replaceComponent(spec: Parameters<ComponentRegistry["replace"]>[0]): Promise<void> {
    const component = this.components.replace(spec);
    await this.replicas?.adopt(component);
  }

  /** The stages of one iteration, in order. */
  protected abstract stages(): TrainingStage[];

  /** How many times the stages run (iterative trainers); 1 by default. */
  protected iterations(): number {
    return 1;
  }

  /** Held-out evaluation; the lifecycle logs what it returns. */
  abstract evaluate(): Promise<Record<string, number>>;

  /** Runs the schedule to its end, evaluating, logging and checkpointing as configured; resumes when asked. */
  async train(options: TrainOptions = {}): Promise<void> {
    checkOptionKeys(options, TRAIN_OPTION_KEYS, "train()");
    const interval = options.checkpointInterval ?? 1;
    if (!Number.isInteger(interval) || interval < 1) throw new RangeError(`checkpointInterval must be a positive integer, got ${interval}`);
    if (options.keepLast !== undefined && !(Number.isInteger(options.keepLast) && options.keepLast >= 1)) {
      throw new RangeError(`keepLast must be a positive integer (the checkpoints to keep), got ${options.keepLast}`);
    }
    const allowed = options.allowConfigChanges ?? [];
    if (!Array.isArray(allowed) || !allowed.every((field) => typeof field === "string")) {
      throw new TypeError(`allowConfigChanges must be a list of config field names, got ${JSON.stringify(allowed)}`);
    }
    if (this.running) throw new Error(`${this.algorithm}: train() is already running on this trainer; await it before calling train() again`);
    this.running = true;
    let unlock: (() => void) | undefined;
    let failed = false;
    try {
      if (this.isMain) unlock = lockRunDirectories(this.outputDir, options.checkpointDir);
      await this.connectReplicas();
      if (options.resumeFromCheckpoint) await this.resume(await resolveCheckpoint(options.resumeFromCheckpoint, options.checkpointDir), allowed);
      if (this.isMain && options.checkpointDir) {
        const aside = await setAsideLaterCheckpoints(options.checkpointDir, this.progress.unitsDone);
        if (aside) this.console(`checkpoints past the one this run starts from belong to another run: moved to ${aside}`);
      }
      await this.replicas?.join();
      if (this.isMain) {
        if (!this.logger && !options.resumeFromCheckpoint) {
          const aside = setAsideEarlierRunMetrics(this.outputDir);
          if (aside) this.console(`an earlier run's metrics in ${this.outputDir} moved to ${aside}: this run starts a new metrics.jsonl`);
        }
        makeDirsSync(this.logDir);
        this.logger ??= await this.openLogger();
      }
      await this.runSchedule(options, interval);
    } catch (error) {
      failed = true;
      throw error;
    } finally {
      this.running = false;
      releaseKeepingFirstError(unlock, failed);
    }
  }

  private async runSchedule(options: TrainOptions, interval: number): Promise<void> {
    const p = this.progress;
    const stages = this.stages().map((stage) => (this.replicas ? shardStage(stage, this.replicas.context) : stage));
    const iterations = this.iterations();
    if (p.stage >= stages.length || p.iteration >= iterations) {
      throw new CheckpointError(`the checkpoint resumed stands at stage ${p.stage + 1} of iteration ${p.iteration + 1}, but this ${this.algorithm} trainer runs ${stages.length} stages in ${iterations} iterations`);
    }
    // Read again at every step: a stage's length may follow from an earlier one's work (MARLHF's reward-model steps
    // from the pairs collected).
    const perIteration = () => stages.reduce((sum, s) => sum + s.epochs * s.steps, 0);
    const done = () => p.iteration * perIteration() + stages.slice(0, p.stage).reduce((sum, s) => sum + s.epochs * s.steps, 0) + p.epoch * stages[p.stage].steps + p.itemIndex;
    const bar = new ProgressBar({ total: iterations * perIteration(), label: this.algorithm, quiet: (this.lifecycle.quiet ?? false) || !this.isMain, start: done() });
    try {
      for (;;) {
        const stage = stages[p.stage];
        if (p.epoch < stage.epochs) {
          for (; p.itemIndex < stage.steps; p.itemIndex++) {
            if (stage.evaluateBefore?.(p.itemIndex)) await this.evaluateDuringTraining(bar);
            this.timings.enter(stage.name);
            const fields = await this.timings.time("seconds", async () => {
              if (p.itemIndex === 0) await stage.beginEpoch?.();
              return stage.runStep(p.itemIndex);
            });
            const memory = this.logStepMemory(stage.name);
            bar.update(
              done() + 1,
              { ...(iterations > 1 ? { iteration: p.iteration + 1 } : {}), ...(stages.length > 1 ? { stage: stage.name } : {}), epoch: p.epoch + 1, ...(fields ?? {}), ...memory },
              iterations * perIteration(),
            );
          }
          this.timings.enter(stage.name);
          await this.timings.time("seconds", async () => stage.endEpoch?.());
          p.epoch++;
          p.itemIndex = 0;
          p.unitsDone++;
          const last = p.epoch >= stage.epochs && p.stage === stages.length - 1 && p.iteration >= iterations - 1;
          if (options.checkpointDir && (last || p.unitsDone % interval === 0)) await this.checkpointDuringTraining(options.checkpointDir, options.keepLast, bar);
        } else if (p.stage + 1 < stages.length) {
          p.stage++;
          p.epoch = 0;
        } else if (p.iteration + 1 < iterations) {
          p.iteration++;
          p.stage = 0;
          p.epoch = 0;
        } else {
          break;
        }
      }
    } finally {
      bar.finish();
    }
  }

  /** The step's peak memory into metrics.jsonl (kind "memory"); returns the progress bar's fields: peak RSS, and each CUDA device's peak allocated. */
  private logStepMemory(stage: string): ProgressFields {
    const memory = this.timings.memory?.takeStep();
    if (!memory) return {};
    this.logger?.log("memory", { stage, ...memory }, this.progress.envStep);
    const gib = (value: unknown) => `${((value as number) / 1024).toFixed(2)}GiB`;
    const fields: ProgressFields = { peak_rss: gib(memory.peak_rss_mib) };
    for (const [key, value] of Object.entries(memory)) {
      const device = /^(cuda:\d+)\/peak_allocated_mib$/.exec(key)?.[1];
      if (device) fields[`${device}_peak`] = gib(value);
    }
    return fields;
  }

  private async evaluateDuringTraining(bar: ProgressBar): Promise<void> {
    const metrics = await this.evaluate();
    const [first] = Object.entries(metrics);
    if (first) bar.log(`eval @ step ${this.progress.envStep}: ${first[0]} ${first[1].toFixed(3)}`);
  }

  private async checkpointDuringTraining(root: string, keepLast: number | undefined, bar: ProgressBar): Promise<void> {
    const started = performance.now();
    const dir = await this.saveCheckpoint(root);
    if (keepLast && this.isMain) await pruneCheckpoints(root, keepLast);
    bar.log(`checkpoint ${dir} (${((performance.now() - started) / 1000).toFixed(1)} s)`);
  }

  /** Saves checkpoint-<completed epochs> under root. */
  async saveCheckpoint(root: string): Promise<string> {
    this.assertCheckpointable();
    // Data parallel: rank 0 writes the checkpoint, with every rank's own state; the others wait until it is written.
    const ranks = this.replicas ? await this.replicas.gatherStates(this.replicas.localState(this.random.getState(), this.progress)) : null;
    const dir = !this.isMain
      ? path.join(root, `checkpoint-${this.progress.unitsDone}`)
      : await saveCheckpoint(
          root,
          this.progress.unitsDone,
          this.components,
          {
            kind: this.algorithm,
            progress: { ...this.progress },
            wandb: this.logger?.wandbRunIdentity() ?? null,
            state: { ...this.checkpointState(), ...(ranks ? { worldSize: ranks.length, ranks } : {}) },
          },
          (dir) => this.saveCheckpointFiles(dir),
        );
    await this.replicas?.context.barrier();
    return dir;
  }

  /** Throws when work is in flight that a checkpoint would lose (e.g. unconsumed rollout buffers). */
  protected assertCheckpointable(): void {}

  /** Trainer-specific checkpoint files (preference pairs, replay shards). */
  protected async saveCheckpointFiles(_dir: string): Promise<void> {}

  /** The trainer's own state beyond components and progress; subclasses extend it. */
  protected checkpointState(): Record<string, unknown> {
    return {
      random: this.random.getState(),
      logger: this.logger?.state() ?? null,
      metrics: this.logger ? { dir: path.relative(this.outputDir, this.logDir), bytes: this.logger.metricsBytes() } : null,
      config: this.config,
      stateful: (this.lifecycle.stateful ?? []).map((s) => s.stateDict()),
      callbacks: Object.fromEntries(this.detectedStateful().map(([name, s]) => [name, s.stateDict()])),
    };
  }

  /** The options' objects with a stateDict (not those already listed in `stateful`), by option name. */
  private detectedStateful(): Array<[string, Stateful]> {
    const options = this.lifecycle as Record<string, unknown>;
    const listed = new Set<unknown>(this.lifecycle.stateful ?? []);
    const formatters = options.formatters;
    const candidates: Array<[string, unknown]> = [
      ...DETECTED_STATEFUL_OPTIONS.map((name): [string, unknown] => [name, options[name]]),
      ...(Array.isArray(formatters) ? formatters : [formatters]).map((f, i): [string, unknown] => [`formatters.${i}`, f]),
    ];
    return candidates.flatMap(([name, value]): Array<[string, Stateful]> => {
      if (value === null || (typeof value !== "object" && typeof value !== "function") || listed.has(value)) return [];
      const stateful = asStateful(name, value);
      return stateful === null ? [] : [[name, stateful]];
    });
  }

  protected restoreCheckpointState(state: Record<string, unknown>, _dir: string): void {
    this.random.setState(state.random as number);
    this.resumedLoggerState = (state.logger as MetricsLoggerState | null) ?? null;
    const saved = (state.stateful as unknown[]) ?? [];
    const targets = this.lifecycle.stateful ?? [];
    if (saved.length !== targets.length) throw new CheckpointError(`the checkpoint holds ${saved.length} stateful objects, this trainer was given ${targets.length}`);
    targets.forEach((target, i) => target.loadStateDict(saved[i]));
    const savedCallbacks = (state.callbacks as Record<string, unknown> | undefined) ?? {};
    const detected = this.detectedStateful();
    const names = detected.map(([name]) => name);
    const missing = names.filter((name) => !(name in savedCallbacks));
    const extra = Object.keys(savedCallbacks).filter((name) => !names.includes(name));
    if (missing.length > 0 || extra.length > 0) {
      const parts = [missing.length ? `no state for ${missing.join(", ")}` : "", extra.length ? `state for ${extra.join(", ")}, which this trainer was not given with a stateDict` : ""];
      throw new CheckpointError(`the checkpoint holds ${parts.filter(Boolean).join(" and ")}`);
    }
    for (const [name, target] of detected) target.loadStateDict(savedCallbacks[name]);
  }

  private async resume(dir: string, allowedConfigChanges: readonly string[]): Promise<void> {
    const restored = await loadCheckpoint(dir, this.algorithm, this.components, (saved) => {
      const missing = Object.keys(this.progress).filter((counter) => !(counter in saved.progress));
      if (missing.length > 0) throw new CheckpointError(`${path.join(dir, "trainer_state.json")}: progress has no ${missing.join(", ")}, which a ${this.algorithm} trainer counts`);
      checkResumeConfig(dir, saved.state.config, this.config as object, allowedConfigChanges);
    });
    Object.assign(this.progress, restored.progress);
    this.resumedWandbRun = restored.wandb ?? null;
    this.restoreCheckpointState(restored.state, dir);
    const saved = restored.state as { worldSize?: number; ranks?: RankState[] };
    if (this.replicas) {
      const random = this.replicas.restoreState(saved, this.progress);
      if (random !== null) this.random.setState(random);
    } else if ((saved.worldSize ?? 1) !== 1) {
      throw new CheckpointError(`${dir} was written by a data-parallel run of ${saved.worldSize} ranks: resume it with comlrl launch --nproc ${saved.worldSize} and parallelTraining "ddp"`);
    }
    // Metrics after the checkpoint go beside the first run's, not over them; the marker lets readRunMetrics put the
    // stream back together with the records the interrupted run wrote after its checkpoint left out.
    if (this.isMain && existsSync(path.join(this.outputDir, "metrics.jsonl"))) {
      this.logDir = path.join(this.outputDir, `resume-${this.progress.unitsDone}-${Date.now()}`);
      const metrics = restored.state.metrics as { dir: string; bytes: number } | null;
      writeResumeMarker(this.logDir, { checkpoint: path.resolve(dir), parent: metrics ? path.join("..", metrics.dir) : null, parentBytes: metrics?.bytes ?? 0 });
    }
    this.console(`resumed from ${dir}: epoch ${this.progress.epoch}, env step ${this.progress.envStep}`);
  }

  protected async openLogger(): Promise<MetricsLogger> {
    const logger = await MetricsLogger.create({
      outputDir: this.logDir,
      algorithm: this.algorithm,
      tensorboard: this.lifecycle.tensorboard ?? false,
      wandb: this.wandbConfig(),
      runConfig: this.runConfig(),
      loggingSteps: this.config.loggingSteps,
      quiet: this.lifecycle.quiet ?? false,
    });
    if (this.resumedLoggerState) logger.loadState(this.resumedLoggerState);
    return logger;
  }

  /**
   * The W&B config the logger opens: after a resume, the checkpoint's run continued (as CoMLRL does), unless
   * wandbConfig names its own `id` or `resume` mode (`resume: "never"` starts a new run).
   */
  private wandbConfig(): WandbConfig | null {
    const config = this.lifecycle.wandbConfig ?? null;
    return config === null ? null : mergeWandbResume(config, this.resumedWandbRun);
  }

  /** What W&B records about the run: CoMLRL's keys for this trainer, and ours under OURS_RUN_CONFIG_KEY. */
  protected runConfig(): Record<string, unknown> {
    return { ...this.comlrlRunConfig(), [OURS_RUN_CONFIG_KEY]: { trainer: this.algorithm, ...(this.config as object) } };
  }

  /**
   * The keys CoMLRL's trainer of this algorithm logs (its _init_wandb), from our config (see logging/run-config.ts).
   * None for an algorithm CoMLRL does not have: its run config is then ours alone, under OURS_RUN_CONFIG_KEY.
   */
  protected comlrlRunConfig(): Record<string, unknown> {
    return {};
  }

  /** Logs one optimizer step of a component (nanochat-style: loss, gradient norm, learning rate, every step). */
  private recordUpdate(component: string, update: UpdateRecord): void {
    this.progress.update++;
    this.logger?.log(
      "update",
      {
        update: this.progress.update,
        [`${component}/loss`]: update.loss,
        [`${component}/grad_norm`]: update.gradNorm,
        [`${component}/lr`]: update.learningRate,
        [`${component}/samples`]: update.samples,
      },
      this.progress.envStep,
    );
  }

  protected console(message: string): void {
    if (!this.lifecycle.quiet && this.isMain) console.error(`[${this.algorithm}] ${message}`);
  }

  /**
   * Writes every exported component in its user-facing layout (agent_i/ in Hugging Face layout, value heads, …);
   * `{ format: "gguf", dtype }` writes each causal LM as agent_i/model.gguf instead, which llama.cpp runs.
   */
  async saveModel(dir: string, options: SaveModelOptions = {}): Promise<void> {
    if (this.isMain) {
      await this.components.exportTo(dir, options);
      this.logger?.logTrain({ final_model_saved: 1 }, this.progress.envStep);
    }
    await this.replicas?.context.barrier();
  }

  /**
   * Closes the logs and frees what the trainer created (models passed in by the caller stay usable), giving the freed
   * memory back to the system.
   */
  async close(): Promise<void> {
    await this.logger?.close();
    this.logger = null;
    this.components.dispose();
    releaseFreedCpuMemory();
  }

  /** `await using trainer = …` closes it when the scope ends, even on a throw. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
