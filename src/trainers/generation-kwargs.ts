// CoMLRL's train(**kwargs): keyword arguments of Hugging Face generate() that override the trainer's own sampling
// settings in training rollouts and preference-pair sampling. Evaluation samples without them, as CoMLRL's
// evaluate() calls generate() without the kwargs. Only the arguments our sampler implements are accepted, under
// Hugging Face's names; anything else is an error naming it, where Python would fail inside generate() or ignore it.
import type { SamplingSettings } from "./agents.js";
import { checkOptionKeys, TrainerOptionError } from "./options.js";

/** Hugging Face generate() keyword arguments that override the trainer's sampling settings in training rollouts. */
export interface GenerationKwargs {
  /** Softmax temperature; overrides SamplingSettings.temperature. */
  temperature?: number;
  /** Nucleus-sampling threshold in (0, 1]; overrides SamplingSettings.topP. */
  top_p?: number;
  /** 0: no top-k filter. */
  top_k?: number;
  /** Penalty on tokens already present (1: off); overrides SamplingSettings.repetitionPenalty. */
  repetition_penalty?: number;
  /** CoMLRL drops do_sample: rollouts always sample, so only true is accepted. */
  do_sample?: true;
}

const KEYS = { temperature: true, top_p: true, top_k: true, repetition_penalty: true, do_sample: true } as const satisfies Record<keyof GenerationKwargs, true>;

function checked(kwargs: Record<string, unknown>, key: keyof GenerationKwargs, valid: (value: number) => boolean, expected: string): number | undefined {
  const value = kwargs[key];
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !valid(value)) throw new TrainerOptionError(`generationKwargs.${key} must be ${expected}, got ${JSON.stringify(value)}`);
  return value;
}

/** The sampling settings of training rollouts: `sampling` with what the kwargs (checked here) set. */
export function withGenerationKwargs(sampling: SamplingSettings, kwargs: unknown): SamplingSettings {
  if (kwargs === undefined || kwargs === null) return sampling;
  if (typeof kwargs !== "object" || Array.isArray(kwargs)) throw new TrainerOptionError(`generationKwargs must be an object of generate() arguments, got ${JSON.stringify(kwargs)}`);
  const given = kwargs as Record<string, unknown>;
  checkOptionKeys(given, KEYS, "generationKwargs");
  if (given.do_sample !== undefined && given.do_sample !== true) {
    throw new TrainerOptionError(`generationKwargs.do_sample must be true (rollouts always sample), got ${JSON.stringify(given.do_sample)}`);
  }
  // top_k None passed to generate() turns the filter off there; 0 says that without the ambiguity of null.
  const topK = checked(given, "top_k", (v) => Number.isInteger(v) && v >= 0, "a non-negative integer (0: no top-k filter)");
  return {
    ...sampling,
    temperature: checked(given, "temperature", (v) => v > 0 && Number.isFinite(v), "a positive number") ?? sampling.temperature,
    topP: checked(given, "top_p", (v) => v > 0 && v <= 1, "in (0, 1]") ?? sampling.topP,
    topK: topK ?? sampling.topK,
    repetitionPenalty: checked(given, "repetition_penalty", (v) => v > 0 && Number.isFinite(v), "a positive number") ?? sampling.repetitionPenalty,
  };
}
