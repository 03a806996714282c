// How long a prompt may be. CoMLRL tokenizes prompts with truncation to the tokenizer's model_max_length
// (COMLRL-SPEC §3.1), from the tokenizer's truncation_side; comlrl does the same by default, and bounds every prompt
// by the model's positions as well: a prompt of more tokens than max_position_embeddings leave after maxNewTokens
// would sample and train past the positions the model knows (or, for a long enough prompt, ask for terabytes of
// attention scores). promptOverflow "error" refuses such a prompt instead.
import type { PromptOverflow } from "../config/index.js";
import type { ComlrlTokenizer } from "../models/tokenizer.js";

/** A prompt over its limit under promptOverflow "error", or a maxNewTokens that leaves no room for any prompt. */
export class PromptLengthError extends Error {
  /** Always "PromptLengthError". */
  override name = "PromptLengthError";
}

/** The settings that bound a prompt (SamplingSettings carries them). */
export interface PromptBounds {
  maxNewTokens: number;
  maxPromptTokens: number | null;
  promptOverflow: PromptOverflow;
}

/** The most tokens a prompt may have for a model of `positions` (max_position_embeddings), and what sets it (for messages). */
export function promptTokenLimit(positions: number, tokenizer: Pick<ComlrlTokenizer, "modelMaxLength">, bounds: PromptBounds): { tokens: number; why: string } {
  const room = positions - bounds.maxNewTokens;
  if (room < 1) throw new PromptLengthError(`maxNewTokens ${bounds.maxNewTokens} leaves no position for a prompt: the model has max_position_embeddings ${positions}`);
  const asked = bounds.maxPromptTokens ?? tokenizer.modelMaxLength;
  if (asked !== null && asked <= room) return { tokens: asked, why: bounds.maxPromptTokens !== null ? `maxPromptTokens ${asked}` : `the tokenizer's model_max_length ${asked}` };
  return { tokens: room, why: `max_position_embeddings ${positions} − maxNewTokens ${bounds.maxNewTokens}` };
}

/** ids within the limit: cut from the tokenizer's truncation side, or refused under promptOverflow "error". */
export function boundPrompt(ids: number[], prompt: string, limit: { tokens: number; why: string }, overflow: PromptOverflow, side: "left" | "right"): number[] {
  if (ids.length <= limit.tokens) return ids;
  if (overflow === "error") {
    const start = JSON.stringify(prompt.slice(0, 60));
    throw new PromptLengthError(`the prompt of ${ids.length} tokens (${start}…) is over the ${limit.tokens} a prompt may have (${limit.why}); shorten it, or set promptOverflow "truncate"`);
  }
  return side === "left" ? ids.slice(ids.length - limit.tokens) : ids.slice(0, limit.tokens);
}
