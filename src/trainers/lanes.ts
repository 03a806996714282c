// Agents that share a CPU run concurrently on compute lanes of their own (docs/performance.md, "CPU agent lanes"):
// agent i's actor, reference and critic run on lane i mod L with one intra-op thread each, so that two agents'
// generation, critic readouts and updates overlap on two cores instead of taking turns on both. At a small model's
// size an op is mostly libtorch's per-op overhead, which intra-op threads do not shorten. Results are those of one
// intra-op thread: each lane runs its agent's ops in the order they were issued, every agent draws from its own
// sampling stream, and the trainers plan (and shuffle) before agents run. What the agents share (MARLHF's reward
// model, an IAC critic given for several agents) stays on the CPU's own lane with all the intra-op threads: it runs
// while the agents wait, and the reward model's epoch needs them (demo: 0.58 s on two threads, 0.86 s on one).
// Agents whose updates take turns (a centralized critic) get none: placement.ts decides.
import type { CausalLM, ModelSource } from "../models/causal-lm.js";

/** The knob: a count of lanes (1: none, the agents take turns on the CPU's one lane). */
export const CPU_LANES_ENV = "COMLRL_CPU_LANES";

/** What decides whether agents get lanes of their own. */
export interface LaneFacts {
  parallelTraining: "none" | "mp" | "ddp";
  /** Every actor's device (and every reference's). */
  devices: readonly string[];
  /** The actors' sources: one model object given twice is shared, and a shared model cannot run on two lanes. */
  sources: readonly ModelSource[];
  /** Intra-op threads (runtimeInfo().numThreads). */
  threads: number;
}

/**
 * How many agent lanes: COMLRL_CPU_LANES when set (at most one per agent), else one per intra-op thread when the
 * agents are at least as many as the threads (2 agents on 2 threads: two lanes of one thread each; on 16 threads
 * the agents keep taking turns with 16). 1 where lanes do not apply: one agent, an agent not on the CPU, data
 * parallelism (every rank must issue its collectives in one order), or a model shared by agents.
 */
export function planCpuLanes(facts: LaneFacts, env: Record<string, string | undefined> = process.env): number {
  const agents = facts.sources.length;
  if (agents < 2 || facts.parallelTraining === "ddp" || sharesModels(facts.sources) || facts.devices.some((d) => d !== "cpu")) return 1;
  const given = env[CPU_LANES_ENV];
  if (given === undefined || given === "") return facts.threads > 1 && agents >= facts.threads ? facts.threads : 1;
  const lanes = Number(given);
  if (!Number.isInteger(lanes) || lanes < 1) throw new RangeError(`${CPU_LANES_ENV} must be a positive integer, got "${given}"`);
  return Math.min(lanes, agents);
}

/** Whether one model object is given for two agents (their calls must then take turns on one module). */
export function sharesModels(sources: readonly ModelSource[]): boolean {
  return sources.some((s, i) => typeof s !== "string" && sources.indexOf(s) !== i);
}

/**
 * Puts agent `agent`'s CPU models (actor, reference, critic: their heads' calls go where the model's do) on its lane;
 * a model placed on a GPU (a critic device of its own) keeps its device's lane.
 */
export function placeOnAgentLane(lanes: number, agent: number, models: ReadonlyArray<CausalLM | null>): void {
  if (lanes < 2) return;
  for (const model of models) if (model && model.info().device === "cpu") model.setComputeLane(agent % lanes);
}
