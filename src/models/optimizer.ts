// Optimizer: AdamW over parameter groups — a model, a value head, or both with their own learning rates — owning its
// native optimizer. The whole state (moments, step counts) saves to and loads from one file.
import { resolvePrecision, type Precision, type ResolvedPrecision } from "../config/precision.js";
import type { AdamWOptions as NativeAdamWOptions, NativeModel, NativeOptimizer, NativeValueHead, OptimizerMemory } from "../native/binding.js";
import { addon } from "../native/loader.js";
import { numerics, tf32Hint } from "../runtime.js";
import type { CausalLM } from "./causal-lm.js";
import type { ValueHead } from "./value-head.js";

export type { OptimizerMemory };

/** AdamW's hyperparameters (unset ones take PyTorch's defaults) and how bf16 parameters are stepped. */
export interface AdamWOptions extends Omit<NativeAdamWOptions, "masterWeights"> {
  /**
   * How bf16 parameters are stepped (src/config/precision.ts): "bf16-mixed" (float32 master weights and moments),
   * "pure-bf16" (in place, as CoMLRL) or "auto" (the default: bf16-mixed on a GPU, pure-bf16 on a CPU).
   */
  precision?: Precision;
}

// One warning of each kind per process: every agent of a run would repeat it.
const warned = new Set<string>();

function warnOnce(code: string, message: string): void {
  if (warned.has(code)) return;
  warned.add(code);
  process.emitWarning(message, { code });
}

/** What an Optimizer steps: a model or a value head. */
export type Trainable = CausalLM | ValueHead;

/** One group of an Optimizer: a module, with its own learning rate or weight decay if given. */
export interface ParameterGroup {
  /** The model or value head whose parameters the group steps. */
  module: Trainable;
  /** Overrides the optimizer's lr for this group. */
  lr?: number;
  /** Overrides the optimizer's weightDecay for this group. */
  weightDecay?: number;
}

function nativeOf(module: Trainable): NativeModel | NativeValueHead {
  return module.native;
}

/** What one step was taken over: its samples and mean loss, as given, or over every rank in data-parallel training. */
export interface StepSamples {
  /** Samples the step was taken over (weights each rank's gradient in data-parallel training). */
  samples: number;
  /** Mean loss over those samples, when given. */
  loss?: number;
}

/**
 * Runs before every step over the optimizer's modules; data-parallel training reduces the gradients here (src/distributed).
 * @internal
 */
export type GradientSync = (modules: Array<NativeModel | NativeValueHead>, local: StepSamples) => Promise<StepSamples>;

/** AdamW over parameter groups (a model, a value head, or several with their own learning rates), owning its native optimizer; the state saves to one file. */
export class Optimizer {
  /**
   * The native optimizer the methods call into.
   * @internal
   */
  readonly native: NativeOptimizer;
  /**
   * The native modules of the parameter groups, in group order.
   * @internal
   */
  readonly modules: Array<NativeModel | NativeValueHead>;
  /**
   * Runs before every step; data-parallel training sets it to reduce gradients across ranks (null: none).
   * @internal
   */
  gradientSync: GradientSync | null = null;
  /** How the parameters step: "fp32" when none is bf16, else the asked precision ("auto" resolved by device). */
  readonly precision: ResolvedPrecision;
  private firstStepChecked = false;
  // The modules' device (one for all: the native optimizer refuses modules on two).
  private readonly device: string;

  /** AdamW with PyTorch's defaults (betas 0.9/0.999, eps 1e-8, weight decay 0.01); frozen parameters are skipped. */
  constructor(groups: Trainable | readonly ParameterGroup[], options: AdamWOptions) {
    const Native = addon().NativeOptimizer;
    this.modules = Array.isArray(groups) ? groups.map((g: ParameterGroup) => nativeOf(g.module)) : [nativeOf(groups as Trainable)];
    const { precision = "auto", ...adamW } = options;
    // What is not a module has no info(); the native constructor then refuses it, naming the group.
    const infos = this.modules.flatMap((module) => (typeof (module as Partial<NativeModel> | undefined)?.info === "function" ? [module.info()] : []));
    this.device = infos[0]?.device ?? "cpu";
    this.precision = resolvePrecision(precision, infos.some((info) => info.dtype === "bfloat16") ? "bfloat16" : "float32", this.device);
    const nativeOptions: NativeAdamWOptions = { ...adamW, masterWeights: this.precision === "bf16-mixed" };
    this.native = Array.isArray(groups)
      ? new Native(groups.map((g: ParameterGroup) => ({ module: nativeOf(g.module), lr: g.lr, weightDecay: g.weightDecay })), nativeOptions)
      : new Native(nativeOf(groups as Trainable), nativeOptions);
  }

  /** The dtype of each AdamW moment tensor, once a step has made them ("float32" under bf16-mixed). */
  momentDtypes(): string[] {
    return this.native.momentDtypes();
  }

  /**
   * Bytes the trained parameters and their optimizer state hold, in total and per parameter: bf16-mixed holds 2 (bf16
   * weight) + 4 (float32 master) + 8 (float32 moments) once stepped, plus a 2-byte gradient during a backward.
   */
  memory(): OptimizerMemory & {
    /** Bytes per parameter of weight, master and moments (without the gradient). */
    bytesPerParameter: number;
    /** Bytes per parameter of a whole backward's gradient. */
    gradientBytesPerParameter: number;
  } {
    const held = this.native.memory();
    const per = (bytes: number) => (held.parameters === 0 ? 0 : bytes / held.parameters);
    return { ...held, bytesPerParameter: per(held.weightBytes + held.masterBytes + held.momentBytes), gradientBytesPerParameter: per(held.gradientBytes) };
  }

  /**
   * Before the first step, warns once per process about what the precision leaves: under pure-bf16, when a step of
   * the learning rate is under half a bf16 ulp for over half of the weights (CoMLRL's behaviour with bf16 models;
   * "bf16-mixed" keeps float32 master weights that accumulate those updates); under float32 on a GPU without TF32,
   * what TF32 would buy (tf32Hint).
   */
  private async warnBeforeFirstStep(): Promise<void> {
    if (this.firstStepChecked) return;
    this.firstStepChecked = true;
    if (this.precision === "fp32" && this.device.startsWith("cuda")) {
      const hint = tf32Hint(numerics(), 1);
      if (hint !== null) warnOnce("COMLRL_TF32_OFF", hint);
    }
    if (this.precision !== "pure-bf16" || warned.has("COMLRL_PURE_BF16_STALL")) return;
    const fraction = await this.native.stalledFraction();
    if (fraction <= 0.5) return;
    warnOnce(
      "COMLRL_PURE_BF16_STALL",
      `precision "pure-bf16": a step of the learning rate (${this.learningRates().join(", ")}) is under half a bf16 ulp for ` +
        `${(100 * fraction).toFixed(1)}% of the weights, so AdamW's updates round away and those weights never move (as in CoMLRL ` +
        `with a bf16 model); precision "bf16-mixed" keeps float32 master weights that accumulate them`,
    );
  }

  /**
   * One AdamW step; gradNorm is the total norm over every group before clipping to maxGradNorm. `samples` (default
   * 1) weighs this process's gradient against other ranks'; the result's samples and loss are the step's totals.
   */
  async step(options: { maxGradNorm?: number; samples?: number; loss?: number } = {}): Promise<{
    /** Total gradient norm over every group, before clipping. */
    gradNorm: number;
  } & StepSamples> {
    await this.warnBeforeFirstStep();
    const local: StepSamples = { samples: options.samples ?? 1, ...(options.loss === undefined ? {} : { loss: options.loss }) };
    const reduced = this.gradientSync ? await this.gradientSync(this.modules, local) : local;
    return { ...(await this.native.step({ maxGradNorm: options.maxGradNorm })), ...reduced };
  }

  /**
   * Arms the next step() to be taken during the backward that follows: each parameter is stepped as soon as autograd
   * has completed its gradient, whose tensor is then dropped, so that the modules' gradients never all exist at once;
   * step() then steps what remains (a head written outside autograd) and reports the whole step's gradient norm. The
   * same update as step() after that backward, for steps with no clipping, no gradient synchronisation and the whole
   * loss in one backward (a second gradient for a stepped parameter is an error). A non-finite loss has no backward,
   * so a step it would have spoiled is never begun.
   */
  async armStepInBackward(): Promise<void> {
    if (this.gradientSync) throw new Error("armStepInBackward: this optimizer synchronises gradients across ranks before its step, which a step in backward cannot wait for");
    await this.warnBeforeFirstStep();
    await this.native.stepInBackward(true);
  }

  /** Disarms a step armed by armStepInBackward() without taking it (the backward failed). */
  async disarmStepInBackward(): Promise<void> {
    await this.native.stepInBackward(false);
  }

  /** Sets one group's learning rate, or every group's when group is omitted. */
  setLearningRate(lr: number, group?: number): void {
    this.native.setLearningRate(lr, group);
  }

  /** Each group's current learning rate, in group order. */
  learningRates(): number[] {
    return this.native.learningRates();
  }

  /** Writes the whole state (moments, step counts, learning rates, bf16-mixed's master weights) to one file. */
  async save(file: string): Promise<void> {
    return this.native.save(file);
  }

  /**
   * Refuses, naming the file, a state saved for other groups or parameter shapes, master weights for an optimizer
   * without them, or master weights that do not round to the model's current weights (load the model's first).
   */
  async load(file: string): Promise<void> {
    return this.native.load(file);
  }

  /** Forgets the moments and step counts, as a newly made optimizer over the same groups; learning rates stay. */
  async reset(): Promise<void> {
    return this.native.reset();
  }

  /** Frees the native state now; the optimizer is unusable after. */
  dispose(): void {
    this.native.dispose();
  }

  /** dispose(), for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}
