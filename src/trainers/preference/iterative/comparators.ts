// The comparators of the iterative trainers (COMLRL-SPEC §6.5 step 2): what each item's current candidates are
// compared with. current — the same agents on their own "comparator" sampling stream (independent of training's, so
// both sides are not the same draws: CoMLRL's "homogeneous generation" fix; its state is checkpointed);
// current_copy — a frozen clone of the agents made at the start of each iteration, on comparatorDevices; model —
// frozen models from ids/dirs or given objects, loaded (once per id) for an iteration and freed after it; history —
// the policy checkpoint of iteration k − historyK or the nearest earlier one, else the initial one; api — a remote
// LLM (api-comparator.ts). Generation is per agent, or centralized: one agent answers the adapter's joint prompt and
// the answer is split into the roles.
import type { CausalLM } from "../../../models/causal-lm.js";
import type { ComlrlTokenizer } from "../../../models/tokenizer.js";
import type { Item } from "../../../rollout/types.js";
import { Agent, type SamplingSettings } from "../../agents.js";
import { CentralizedParseError, type CentralizedAdapter } from "../../reinforce/centralized.js";
import type { Candidates } from "./candidates.js";
import type { PolicyCheckpoints } from "./policy-checkpoints.js";

const COMPARATOR_STREAM = "comparator";

/** k completions of one agent's prompt; ids null when the sampler has text only. */
export interface AgentSampler {
  sample(agent: number, prompt: string, k: number, item: Item): Promise<{ texts: string[]; ids: Int32Array[] | null }>;
}

/** A comparator's samplers for one iteration, and what it holds across iterations. */
export interface ComparatorSource {
  /** Prepares iteration k's samplers (clones, loads). */
  begin(iteration: number): Promise<AgentSampler>;
  /** Frees what begin() made for the iteration. */
  end(): void;
  /** Sampling-stream state that must survive a checkpoint (current only). */
  state(): Record<string, string> | null;
  restore(state: Record<string, string> | null): void;
  dispose(): void;
}

/** Agent.sample on any model with a tokenizer (frozen comparator models sample exactly as the agents do). */
async function sampleModel(model: CausalLM, tokenizer: ComlrlTokenizer, sampling: SamplingSettings, prompt: string, k: number, stream: string) {
  const sampled = await Agent.prototype.sample.call({ model, tokenizer, sampling } as Agent, [prompt], k, stream);
  return { texts: sampled.texts[0], ids: sampled.completionIds[0] };
}

const base64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");

/** current: the live agents on their comparator stream, seeded apart from training's. */
export function currentComparator(agents: readonly Agent[], seed: number): ComparatorSource {
  // Distinct from the training (seed + i) and evaluation streams' seeds.
  agents.forEach((agent) => agent.model.setSeed(seed + 1_000_003 + agent.index, COMPARATOR_STREAM));
  const sampler: AgentSampler = {
    sample: async (agent, prompt, k) => {
      const sampled = await agents[agent].sample([prompt], k, COMPARATOR_STREAM);
      return { texts: sampled.texts[0], ids: sampled.completionIds[0] };
    },
  };
  return {
    begin: async () => sampler,
    end: () => {},
    state: () => Object.fromEntries(agents.map((a) => [`agent_${a.index}`, base64(a.model.generatorState(COMPARATOR_STREAM))])),
    restore: (state) => {
      if (!state) throw new Error("the checkpoint holds no comparator stream state");
      agents.forEach((a) => a.model.setGeneratorState(new Uint8Array(Buffer.from(state[`agent_${a.index}`], "base64")), COMPARATOR_STREAM));
    },
    dispose: () => {},
  };
}

/** Seeds iteration k's comparator models alike in every run, so a resumed iteration draws what the first run drew. */
const iterationSeed = (seed: number, iteration: number, agent: number) => seed + 7919 * (iteration + 1) + agent;

/**
 * Frozen models made per iteration by `load` (agent i → a model and, when it shares the agent's tokenizer, that
 * tokenizer: its ids are then the agent's vocabulary and are kept). Models made here are freed at end().
 */
function frozenModels(
  agents: readonly Agent[],
  seed: number,
  load: (iteration: number) => Promise<Array<{ model: CausalLM; tokenizer: ComlrlTokenizer; owned: boolean; sameVocabulary: boolean }>>,
): ComparatorSource {
  let models: Awaited<ReturnType<typeof load>> = [];
  const free = () => {
    new Set(models.filter((m) => m.owned).map((m) => m.model)).forEach((m) => m.dispose());
    models = [];
  };
  return {
    begin: async (iteration) => {
      free();
      models = await load(iteration);
      // Their comparator stream: a model the caller passed in keeps its default stream as it came.
      models.forEach((m, i) => m.model.setSeed(iterationSeed(seed, iteration, i), COMPARATOR_STREAM));
      return {
        sample: async (agent, prompt, k) => {
          const m = models[agent];
          const sampled = await sampleModel(m.model, m.tokenizer, agents[agent].sampling, prompt, k, COMPARATOR_STREAM);
          return m.sameVocabulary ? sampled : { texts: sampled.texts, ids: null };
        },
      };
    },
    end: free,
    state: () => null,
    restore: () => {},
    dispose: free,
  };
}

/** current_copy: a frozen clone of every agent, made at the start of each iteration on its comparator device. */
export function currentCopyComparator(agents: readonly Agent[], devices: readonly string[], seed: number): ComparatorSource {
  return frozenModels(agents, seed, async () => {
    const clones: Array<{ model: CausalLM; tokenizer: ComlrlTokenizer; owned: boolean; sameVocabulary: boolean }> = [];
    try {
      for (const agent of agents) clones.push({ model: (await agent.model.clone({ device: devices[agent.index] })).freeze(), tokenizer: agent.tokenizer, owned: true, sameVocabulary: true });
    } catch (error) {
      clones.forEach((c) => c.model.dispose());
      throw error;
    }
    return clones;
  });
}

export interface ComparatorModel {
  model: CausalLM;
  tokenizer: ComlrlTokenizer;
  /** Whether the comparator was loaded here (and is freed after the iteration) or given by the caller. */
  owned: boolean;
}

/**
 * model: frozen comparator models per agent from `load` (one load per distinct source), freed after each iteration.
 * Their candidates are text to the trained agents (another vocabulary's ids would mean other tokens).
 */
export function modelComparator(agents: readonly Agent[], seed: number, load: () => Promise<ComparatorModel[]>): ComparatorSource {
  return frozenModels(agents, seed, async () => (await load()).map((m) => ({ ...m, sameVocabulary: false })));
}

/** history: the agents as they were at the policy checkpoint iteration k − historyK (or nearest earlier, or initial). */
export function historyComparator(
  agents: readonly Agent[],
  checkpoints: PolicyCheckpoints,
  historyK: number,
  devices: readonly string[],
  seed: number,
  load: (dir: string, device: string) => Promise<CausalLM>,
  onLoad: (label: string) => void,
): ComparatorSource {
  return frozenModels(agents, seed, async (iteration) => {
    const label = checkpoints.historyFor(iteration, historyK);
    onLoad(label);
    const dirs = checkpoints.agentDirs(label, agents.length);
    const loaded: Array<{ model: CausalLM; tokenizer: ComlrlTokenizer; owned: boolean; sameVocabulary: boolean }> = [];
    try {
      for (const agent of agents) loaded.push({ model: (await load(dirs[agent.index], devices[agent.index])).freeze(), tokenizer: agent.tokenizer, owned: true, sameVocabulary: true });
    } catch (error) {
      loaded.forEach((m) => m.model.dispose());
      throw error;
    }
    return loaded;
  });
}

/** Per-agent generation: each agent's k candidates for its own prompt. */
export async function decentralizedCandidates(sampler: AgentSampler, item: Item, prompts: readonly string[], k: number): Promise<Candidates> {
  const texts: string[][] = [];
  const ids: (Int32Array[] | null)[] = [];
  for (let agent = 0; agent < prompts.length; agent++) {
    const sampled = await sampler.sample(agent, prompts[agent], k, item);
    if (sampled.texts.length !== k) throw new Error(`comparator returned ${sampled.texts.length} completions for agent ${agent}, ${k} expected`);
    texts.push(sampled.texts);
    ids.push(sampled.ids);
  }
  return { texts, completionIds: ids.every((row) => row !== null) ? (ids as Int32Array[][]) : null };
}

/**
 * Centralized generation: agent `agentIndex` answers the adapter's joint prompt k times and every answer is split
 * into exactly numAgents role texts (an answer without structure gives every role ""). The parts are text only.
 */
export async function centralizedCandidates(
  sampler: AgentSampler,
  adapter: CentralizedAdapter,
  agentIndex: number,
  item: Item,
  prompts: string[],
  k: number,
): Promise<Candidates> {
  const joint = adapter.buildPrompt(item, prompts);
  const { texts } = await sampler.sample(agentIndex, joint, k, item);
  const split = texts.map((text) => {
    let parts: string[];
    try {
      parts = adapter.parseCompletion(text, item, prompts.length);
    } catch (error) {
      if (!(error instanceof CentralizedParseError)) throw error;
      parts = Array(prompts.length).fill("");
    }
    if (!Array.isArray(parts) || parts.length !== prompts.length || parts.some((p) => typeof p !== "string")) {
      throw new Error(`centralized comparator: the adapter must split an answer into exactly ${prompts.length} strings, got ${Array.isArray(parts) ? parts.length : typeof parts}`);
    }
    return parts;
  });
  return { texts: prompts.map((_, agent) => split.map((parts) => parts[agent])), completionIds: null };
}
