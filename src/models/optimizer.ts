// Optimizer: AdamW over parameter groups — a model, a value head, or both with their own learning rates — owning its
// native optimizer. The whole state (moments, step counts) saves to and loads from one file.
import type { AdamWOptions, NativeModel, NativeOptimizer, NativeValueHead } from "../native/binding.js";
import { addon } from "../native/loader.js";

export type { AdamWOptions };

/** Anything that holds a native module: a CausalLM, a ValueHead, or the native objects themselves. */
export type Trainable =
  | {
      /** The native module the object wraps. */
      readonly native: NativeModel | NativeValueHead;
    }
  | NativeModel
  | NativeValueHead;

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
  return "native" in module ? module.native : module;
}

/** What one step was taken over: its samples and mean loss, as given, or over every rank in data-parallel training. */
export interface StepSamples {
  /** Samples the step was taken over (weights each rank's gradient in data-parallel training). */
  samples: number;
  /** Mean loss over those samples, when given. */
  loss?: number;
}

/** Runs before every step over the optimizer's modules; data-parallel training reduces the gradients here (src/dist). */
export type GradientSync = (modules: Array<NativeModel | NativeValueHead>, local: StepSamples) => Promise<StepSamples>;

/** AdamW over parameter groups (a model, a value head, or several with their own learning rates), owning its native optimizer; the state saves to one file. */
export class Optimizer {
  /** The native optimizer the methods call into. */
  readonly native: NativeOptimizer;
  /** The modules of the parameter groups, in group order. */
  readonly modules: Array<NativeModel | NativeValueHead>;
  /** Runs before every step; data-parallel training sets it to reduce gradients across ranks (null: none). */
  gradientSync: GradientSync | null = null;

  /** AdamW with PyTorch's defaults (betas 0.9/0.999, eps 1e-8, weight decay 0.01); frozen parameters are skipped. */
  constructor(groups: Trainable | readonly ParameterGroup[], options: AdamWOptions) {
    const Native = addon().NativeOptimizer;
    this.modules = Array.isArray(groups) ? groups.map((g: ParameterGroup) => nativeOf(g.module)) : [nativeOf(groups as Trainable)];
    this.native = Array.isArray(groups)
      ? new Native(groups.map((g: ParameterGroup) => ({ module: nativeOf(g.module), lr: g.lr, weightDecay: g.weightDecay })), options)
      : new Native(nativeOf(groups as Trainable), options);
  }

  /**
   * One AdamW step; gradNorm is the total norm over every group before clipping to maxGradNorm. `samples` (default
   * 1) weighs this process's gradient against other ranks'; the result's samples and loss are the step's totals.
   */
  async step(options: { maxGradNorm?: number; samples?: number; loss?: number } = {}): Promise<{
    /** Total gradient norm over every group, before clipping. */
    gradNorm: number;
  } & StepSamples> {
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

  /** Writes the whole state (moments, step counts, learning rates) to one file. */
  async save(file: string): Promise<void> {
    return this.native.save(file);
  }

  /** Refuses, naming the file, a state saved for other groups or parameter shapes. */
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
