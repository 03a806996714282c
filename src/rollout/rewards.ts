// Shared rewards: dispatch, validation that names the item, turn and joint action at fault, and processors.
import type { RewardContext, RewardFunction, RewardProcessor } from "./types.js";

export class RewardError extends Error {
  override name = "RewardError";
}

function where(context: RewardContext, jointActions: number[]): string {
  const actions = jointActions.length === 1 ? `joint action ${jointActions[0]}` : `joint actions ${jointActions[0]}..${jointActions.at(-1)}`;
  return `item ${context.itemIndex}, turn ${context.turn + 1}, ${actions}`;
}

async function callOnce(rewardFunc: RewardFunction, completions: string[][], context: RewardContext, jointActions: number[]): Promise<number[]> {
  let value: number[] | number;
  try {
    value = await rewardFunc(completions, context);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new RewardError(`reward function threw at ${where(context, jointActions)}: ${reason}`, { cause: error });
  }
  const values = typeof value === "number" ? [value] : value;
  if (!Array.isArray(values) && !ArrayBuffer.isView(values)) {
    throw new RewardError(`reward function returned ${typeof value} at ${where(context, jointActions)}; expected an array of numbers`);
  }
  if (values.length !== jointActions.length) {
    throw new RewardError(`reward function returned ${values.length} values for ${jointActions.length} joint actions at ${where(context, jointActions)}`);
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
  return raw.map((r, j) => {
    const processed = processor(r);
    if (!Number.isFinite(processed)) throw new RewardError(`reward processor turned ${r} into ${processed} at ${where(context, [j])}`);
    return processed;
  });
}

/** COMLRL-SPEC §4.3's reward processors. */
export const RewardProcessors = {
  identity: (): RewardProcessor => (x) => x,
  clamp: (min = -10, max = 10): RewardProcessor => (x) => Math.min(max, Math.max(min, x)),
  scale: (factor = 1): RewardProcessor => (x) => x * factor,
  sigmoidScale: (): RewardProcessor => (x) => 1 / (1 + Math.exp(-x)),
  exponentialScale: (factor = 1): RewardProcessor => (x) => (x > 0 ? Math.exp(factor * x) - 1 : 1 - Math.exp(-factor * x)),
};
