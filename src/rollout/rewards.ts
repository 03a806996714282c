// Shared rewards: dispatch, validation that names the item, turn and joint action at fault, and processors.
import type { RewardContext, RewardFunction, RewardProcessor } from "./types.js";

/** A reward function or processor that threw or returned something other than finite numbers; the message names the item, turn and joint action. */
export class RewardError extends Error {
  /** Always "RewardError". */
  override name = "RewardError";
}

/** A reward call that did not settle within rewardTimeoutSeconds. */
class RewardTimeoutError extends RewardError {}

/**
 * rewardFunc with every call bounded to `seconds`: one that has not settled by then rejects with a RewardTimeoutError
 * (a timer keeps the process alive meanwhile, so a never-settling call cannot end it silently). A proxy, so the
 * function's own properties (a declared reward range, a stateDict) read through unchanged.
 */
export function withRewardTimeout(rewardFunc: RewardFunction, seconds: number): RewardFunction {
  // setTimeout takes at most 2^31 − 1 ms (~24.8 days); a longer delay would fire at once.
  const ms = Math.min(seconds * 1000, 2 ** 31 - 1);
  return new Proxy(rewardFunc, {
    apply(target, thisArg, args) {
      const result = Reflect.apply(target, thisArg, args) as ReturnType<RewardFunction>;
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new RewardTimeoutError(`did not settle within ${seconds} s (rewardTimeoutSeconds)`)), ms);
      });
      return Promise.race([Promise.resolve(result), timeout]).finally(() => clearTimeout(timer));
    },
  });
}

function where(context: RewardContext, jointActions: number[]): string {
  const actions = jointActions.length === 1 ? `joint action ${jointActions[0]}` : `joint actions ${jointActions[0]}..${jointActions.at(-1)}`;
  return `item ${context.itemIndex}, turn ${context.turn + 1}, ${actions}`;
}

async function callOnce(
  rewardFunc: RewardFunction,
  completions: string[][],
  context: RewardContext,
  jointActions: number[],
  acceptedLengths: readonly number[] = [jointActions.length],
): Promise<number[]> {
  let value: number[] | number;
  try {
    value = await rewardFunc(completions, context);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    if (error instanceof RewardTimeoutError) throw new RewardError(`reward function ${reason} at ${where(context, jointActions)}`, { cause: error });
    throw new RewardError(`reward function threw at ${where(context, jointActions)}: ${reason}`, { cause: error });
  }
  const values = typeof value === "number" ? [value] : value;
  if (!Array.isArray(values) && !ArrayBuffer.isView(values)) {
    throw new RewardError(`reward function returned ${typeof value} at ${where(context, jointActions)}; expected an array of numbers`);
  }
  if (!acceptedLengths.includes(values.length)) {
    const expected = acceptedLengths.length === 1 ? `${acceptedLengths[0]}` : `${acceptedLengths.slice(0, -1).join(", ")} or ${acceptedLengths.at(-1)}`;
    throw new RewardError(`reward function returned ${values.length} values for ${jointActions.length} joint actions at ${where(context, jointActions)} (expected ${expected})`);
  }
  Array.from(values).forEach((r, k) => {
    if (typeof r !== "number" || !Number.isFinite(r)) {
      throw new RewardError(`reward function returned ${String(r)} (not a finite number) at ${where(context, [jointActions[k]])}`);
    }
  });
  return Array.from(values);
}

/**
 * Rewards for a node's joint actions: completions[agent][j]. "node" batching makes one call for all of them,
 * "jointAction" one call per joint action with one-element lists (CoMLRL's convention).
 */
export async function computeRewards(
  rewardFunc: RewardFunction,
  completions: string[][],
  context: RewardContext,
  batching: "node" | "jointAction",
  processor: RewardProcessor,
): Promise<number[]> {
  const count = completions[0].length;
  const indices = Array.from({ length: count }, (_, j) => j);
  const raw =
    batching === "node"
      ? await callOnce(rewardFunc, completions, context, indices)
      : (await Promise.all(indices.map((j) => callOnce(rewardFunc, completions.map((c) => [c[j]]), context, [j])))).flat();
  return processAll(raw, processor, context);
}

function processAll(raw: number[], processor: RewardProcessor, context: RewardContext): number[] {
  return raw.map((r, j) => {
    const processed = processor(r);
    if (!Number.isFinite(processed)) throw new RewardError(`reward processor turned ${r} into ${processed} at ${where(context, [j])}`);
    return processed;
  });
}

/**
 * Actor-critic rewards (COMLRL-SPEC §3.5): one call with every agent's G completions (joint action g = every agent's
 * g-th sample). The reward function may return one shared value (broadcast), one per joint action (shared by the
 * agents), or one per agent; when G equals the agent count the values are read per joint action, as CoMLRL does.
 * Returns rewards[agent][g].
 */
export async function computeAgentRewards(rewardFunc: RewardFunction, completions: string[][], context: RewardContext, processor: RewardProcessor): Promise<number[][]> {
  const numAgents = completions.length;
  const g = completions[0].length;
  const raw = await callOnce(rewardFunc, completions, context, Array.from({ length: g }, (_, j) => j), [...new Set([g, 1, numAgents])]);
  const values = processAll(raw, processor, context);
  if (values.length === g) return completions.map(() => [...values]);
  if (values.length === 1) return completions.map(() => Array(g).fill(values[0]));
  return values.map((v) => Array(g).fill(v));
}

/** COMLRL-SPEC §4.3's reward processors. */
export const RewardProcessors = {
  /** Leaves the reward as it is. */
  identity: (): RewardProcessor => (x) => x,
  /** Clips the reward into [min, max] (default [−10, 10]). */
  clamp: (min = -10, max = 10): RewardProcessor => (x) => Math.min(max, Math.max(min, x)),
  /** Multiplies the reward by factor. */
  scale: (factor = 1): RewardProcessor => (x) => x * factor,
  /** CoMLRL 1.4.3's other processor: adds a constant. */
  shift: (value = 0): RewardProcessor => (x) => x + value,
  /** 1 / (1 + e^−r): squashes the reward into (0, 1). */
  sigmoidScale: (): RewardProcessor => (x) => 1 / (1 + Math.exp(-x)),
  /** e^(factor·r) − 1 for r > 0, 1 − e^(−factor·r) otherwise. */
  exponentialScale: (factor = 1): RewardProcessor => (x) => (x > 0 ? Math.exp(factor * x) - 1 : 1 - Math.exp(-factor * x)),
};
