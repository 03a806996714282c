// Optimizer: AdamW over parameter groups — a model, a value head, or both with their own learning rates — owning its
// native optimizer. The whole state (moments, step counts) saves to and loads from one file.
import type { AdamWOptions, NativeModel, NativeOptimizer, NativeValueHead } from "../native/binding.js";
import { addon } from "../native/loader.js";

/** Anything that holds a native module: a CausalLM, a ValueHead, or the native objects themselves. */
export type Trainable = { readonly native: NativeModel | NativeValueHead } | NativeModel | NativeValueHead;

export interface ParameterGroup {
  module: Trainable;
  /** Overrides the optimizer's lr for this group. */
  lr?: number;
  /** Overrides the optimizer's weightDecay for this group. */
  weightDecay?: number;
}

function nativeOf(module: Trainable): NativeModel | NativeValueHead {
  return "native" in module ? module.native : module;
}

export class Optimizer {
  readonly native: NativeOptimizer;

  /** AdamW with PyTorch's defaults (betas 0.9/0.999, eps 1e-8, weight decay 0.01); frozen parameters are skipped. */
  constructor(groups: Trainable | readonly ParameterGroup[], options: AdamWOptions) {
    const Native = addon().NativeOptimizer;
    this.native = Array.isArray(groups)
      ? new Native(groups.map((g: ParameterGroup) => ({ module: nativeOf(g.module), lr: g.lr, weightDecay: g.weightDecay })), options)
      : new Native(nativeOf(groups as Trainable), options);
  }

  /** One AdamW step; gradNorm is the total norm over every group before clipping to maxGradNorm. */
  async step(options: { maxGradNorm?: number } = {}): Promise<{ gradNorm: number }> {
    return this.native.step(options);
  }

  /** Sets one group's learning rate, or every group's when group is omitted. */
  setLearningRate(lr: number, group?: number): void {
    this.native.setLearningRate(lr, group);
  }

  learningRates(): number[] {
    return this.native.learningRates();
  }

  async save(file: string): Promise<void> {
    return this.native.save(file);
  }

  /** Refuses, naming the file, a state saved for other groups or parameter shapes. */
  async load(file: string): Promise<void> {
    return this.native.load(file);
  }

  dispose(): void {
    this.native.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
