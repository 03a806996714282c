// What MADPO and MARLHF share around their updates: the task and its actors — decentralized, or one actor on the
// adapter's joint prompt in centralized collaboration (COMLRL-SPEC §6.6) — and the pair-collection stage that runs
// once before training (§6.1).
import type { PreferenceBaseConfig } from "./base-config.js";
import type { RolloutEnvironment, RolloutTimer } from "../../rollout/tree.js";
import type { Item } from "../../rollout/types.js";
import { setUpActors, type ActorExtras, type Actors } from "../actors.js";
import type { Agent } from "../agents.js";
import { centralizedActorOptions, type CentralizedAdapter } from "../reinforce/centralized.js";
import type { TaskOptions } from "../task-options.js";
import type { StageHost, TrainingStage } from "../lifecycle/trainer.js";
import { collectItemPairs, PreferencePairs, type PairSettings } from "./pairs.js";

export interface PreferenceOptions {
  /** Centralized collaboration: builds the joint prompt and splits joint responses (default: <agent_i> sections). */
  centralizedAdapter?: CentralizedAdapter;
}

export const PREFERENCE_OPTION_KEYS = { centralizedAdapter: true } as const satisfies Record<keyof PreferenceOptions, true>;

export interface PreferenceActors extends Actors {
  /** The role count: numAgents, also when one centralized actor writes for every role. */
  numRoles: number;
}

/**
 * Loads the actors. Centralized: exactly one actor model and tokenizer; its formatter is the adapter's joint prompt
 * and the task reward sees the joint response split into roles.
 */
export async function setUpPreferenceActors(
  options: TaskOptions<unknown> & PreferenceOptions,
  config: PreferenceBaseConfig & { numGenerations?: number },
  algorithm: string,
  /** What MARLHF declares beside the actors (the reward model, an RL phase's critics) and asks of them (IAC's value heads, copied references). */
  extra: ActorExtras = {},
): Promise<PreferenceActors> {
  const actorConfig = { ...config, collaborationMode: undefined, numGenerations: config.numGenerations ?? 2 };
  if (config.collaborationMode !== "centralized") {
    if (options.centralizedAdapter) throw new TypeError(`${algorithm}: centralizedAdapter is only used with collaborationMode "centralized"`);
    return { ...(await setUpActors(options, actorConfig, extra)), numRoles: config.numAgents };
  }
  const actor = centralizedActorOptions(options, options.centralizedAdapter, config.numAgents, algorithm);
  const set = await setUpActors({ ...options, ...actor }, { ...actorConfig, numAgents: 1 }, extra);
  return { ...set, numRoles: config.numAgents };
}

/** The environment pairs are collected in: the task's, with the agents as plain samplers (no reference KL), timed into `timings`. */
export function collectionEnvironment(agents: readonly Agent[], environment: RolloutEnvironment, timings: RolloutTimer): RolloutEnvironment {
  return { ...environment, policies: agents.map((agent) => ({ sample: (prompts, k) => agent.sample(prompts, k) })), timings };
}

/**
 * One epoch, one step per train item: sample the item's joint candidates, score them with the task reward, keep its
 * pairs. The candidates count as env steps. At the end every rank holds every rank's pairs, items without a pair are
 * reported, and a run where every item tied is an error.
 */
export function pairStage(host: StageHost, items: Item[], environment: RolloutEnvironment, settings: PairSettings, pairs: PreferencePairs): TrainingStage {
  return {
    name: "pairs",
    epochs: 1,
    steps: items.length,
    runStep: async (i) => {
      const collected = await collectItemPairs(items[i], i, environment, settings, host.random, host.progress.envStep);
      host.progress.envStep += collected.envSteps;
      pairs.add(i, collected);
      host.logger?.logTrain(PreferencePairs.itemMetrics(collected), host.progress.envStep);
      return { pairs: pairs.pairs.length };
    },
    endEpoch: async () => {
      // Data parallel: each rank collected its share of the items; every rank trains on all the pairs.
      await pairs.gather(host);
      pairs.assertUsable(items.length);
      const tied = pairs.itemsWithoutPairs.length;
      if (tied > 0) host.console(`${tied} of ${items.length} train items gave no preference pair (all candidates tied): items ${pairs.itemsWithoutPairs.join(", ")}`);
      host.logger?.logTrain({ "pairs/total": pairs.pairs.length, "pairs/items_without_pairs": tied }, host.progress.envStep);
    },
  };
}
