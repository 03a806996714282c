// Held-out evaluation of the MAGRPO family, MADPO and MARLHF (COMLRL-SPEC §3.4): one sample per agent per turn along
// a single path, scored by the task reward. It runs on its own environment — the agents' evaluation sampling
// streams, no reference KL, no training timings — so how often it runs never changes the training trajectory.
import type { MetricsLogger } from "../logging/metrics-logger.js";
import { rolloutItem, type RolloutEnvironment, type RolloutNode, type RolloutSettings } from "../rollout/tree.js";
import type { Item } from "../rollout/types.js";
import { EVAL_STREAM, type Agent } from "./agents.js";
import { meanOrZero } from "../util/mean.js";

/** What CoMLRL's eval_logger receives (agent_completions_turns, batch_items, prompts). */
export interface EvalLoggerInput {
  /** [agent][sample][turn] */
  agentCompletionsTurns: string[][][];
  /** The evaluated dataset items, one per sample. */
  items: Item[];
  /** Each item's `prompt` field ("" when it has none), not the formatted prompts. */
  prompts: string[];
}

/** Optional hooks that turn evaluation completions into domain metrics (CoMLRL's eval_logger / eval_aggregator). */
export interface EvaluationHooks {
  /** Receives the evaluation completions per agent, sample and turn, with their items and prompts. */
  evalLogger?: (input: EvalLoggerInput) => unknown | Promise<unknown>;
  /** Turns evalLogger's result into metrics, logged as eval/<key>. */
  evalAggregator?: (result: unknown, numTurns: number) => Record<string, number>;
}

/** turn_t/reward_mean and turn_t/expected_return over the items (plus what evalAggregator adds), unprefixed. */
async function evaluateItems(
  items: Item[],
  environment: RolloutEnvironment,
  settings: RolloutSettings,
  hooks: EvaluationHooks,
): Promise<Record<string, number>> {
  const single: RolloutSettings = { ...settings, numGenerations: 1, jointMode: "aligned" };
  const numAgents = environment.policies.length;
  const rewardsByTurn: number[][] = Array.from({ length: settings.numTurns }, () => []);
  const returnsByTurn: number[][] = Array.from({ length: settings.numTurns }, () => []);
  const completionsTurns: string[][][] = Array.from({ length: numAgents }, () => []);
  for (let i = 0; i < items.length; i++) {
    const { root } = await rolloutItem(items[i], i, environment, single, 0);
    const rewards: number[] = [];
    const texts: string[][] = Array.from({ length: numAgents }, () => []);
    for (let node: RolloutNode | null = root; node; node = node.children[0]) {
      rewards.push(node.rewards[0]);
      node.texts.forEach((t, agent) => texts[agent].push(t[0]));
    }
    rewards.forEach((r, t) => {
      rewardsByTurn[t].push(r);
      returnsByTurn[t].push(rewards.slice(t).reduce((a, b) => a + b, 0));
    });
    texts.forEach((t, agent) => completionsTurns[agent].push(t));
  }
  const metrics: Record<string, number> = {};
  rewardsByTurn.forEach((rs, t) => {
    if (rs.length === 0) return;
    metrics[`turn_${t + 1}/reward_mean`] = meanOrZero(rs);
    metrics[`turn_${t + 1}/expected_return`] = meanOrZero(returnsByTurn[t]);
  });
  if (hooks.evalLogger && hooks.evalAggregator) {
    const prompts = items.map((item) => (typeof item.prompt === "string" ? item.prompt : ""));
    const result = await hooks.evalLogger({ agentCompletionsTurns: completionsTurns, items, prompts });
    Object.assign(metrics, hooks.evalAggregator(result, settings.numTurns));
  }
  return metrics;
}

/**
 * A trainer's evaluate(): the first numSamples eval items on the agents' evaluation streams, re-seeded from `seed` so
 * that the same weights always evaluate alike, logged as eval/… and returned with that prefix.
 */
export async function evaluateAgents(
  agents: readonly Agent[],
  environment: RolloutEnvironment,
  settings: RolloutSettings,
  run: { items: Item[]; seed: number; envStep: number; logger: MetricsLogger | null; hooks: EvaluationHooks },
): Promise<Record<string, number>> {
  if (run.items.length === 0) return {};
  agents.forEach((agent) => agent.model.setSeed(run.seed + agent.index, EVAL_STREAM));
  const evalEnvironment: RolloutEnvironment = { ...environment, policies: agents.map((a) => a.evalPolicy()), timings: undefined };
  const metrics = await evaluateItems(run.items, evalEnvironment, settings, run.hooks);
  run.logger?.logEval(metrics, run.envStep);
  return Object.fromEntries(Object.entries(metrics).map(([key, value]) => [`eval/${key}`, value]));
}
