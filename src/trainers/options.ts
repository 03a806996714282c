// Trainer options are checked like config fields: a mistyped key (`formatter:` for `formatters:`) is an error naming
// the nearest valid one, never silently ignored, and enum-like options must hold one of their values.
import { closestField } from "../config/fields.js";
import type { Precision } from "../config/precision.js";
import type { AdamWOptions } from "../models/optimizer.js";

/** An unknown or invalid trainer option; the message names it and the nearest valid one. */
export class TrainerOptionError extends TypeError {
  /** Always "TrainerOptionError". */
  override name = "TrainerOptionError";
}

/** Throws on any key of options that `known` does not list, suggesting the nearest known key (undefined = not given). */
export function checkOptionKeys(options: object, known: Readonly<Record<string, true>>, where: string): void {
  const names = Object.keys(known);
  const unknown = Object.entries(options).flatMap(([key, value]) => (value === undefined || key in known ? [] : [key]));
  if (unknown.length === 0) return;
  const described = unknown.map((key) => {
    const guess = closestField(key, names);
    return guess === undefined ? `"${key}"` : `"${key}" (did you mean "${guess}"?)`;
  });
  throw new TrainerOptionError(`${where} has no option ${described.join(", ")}`);
}

/** Throws unless value is undefined or one of allowed. */
export function checkOneOf(value: unknown, allowed: readonly string[], name: string): void {
  if (value !== undefined && !allowed.includes(value as string)) {
    throw new TrainerOptionError(`${name} must be one of ${allowed.map((v) => JSON.stringify(v)).join(", ")}, got ${JSON.stringify(value)}`);
  }
}

/**
 * AdamW at learning rate `lr` with the config's betas, epsilon, weight decay and precision (every optimizer a trainer
 * makes; each resolves "auto" from its own model's dtype and device, so agents on a GPU and on a CPU may differ).
 */
export function adamW(
  config: { readonly adamBetas: readonly [number, number]; readonly adamEps: number; readonly weightDecay: number; readonly precision: Precision },
  lr: number,
): AdamWOptions {
  return { lr, betas: [config.adamBetas[0], config.adamBetas[1]], eps: config.adamEps, weightDecay: config.weightDecay, precision: config.precision };
}
