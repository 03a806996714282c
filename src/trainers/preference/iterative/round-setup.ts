// What an iterative round is built from (COMLRL-SPEC §6.5): the trainer's config, agents, task environment and train
// items, how it labels candidates, where its files go and which rank writes them, and the comparator the config
// names, on its devices. Built once by the trainer that owns the round; round.ts runs it.
import { resolveDevices, type CudaFacts, type IterativeFields } from "../../../config/index.js";
import type { PreferenceBaseConfig } from "../base-config.js";
import { CausalLM } from "../../../models/causal-lm.js";
import { resolveModelSource } from "../../../models/hub.js";
import { ComlrlTokenizer } from "../../../models/tokenizer.js";
import type { WandbConfig } from "../../../logging/wandb.js";
import type { RolloutEnvironment } from "../../../rollout/tree.js";
import type { Item } from "../../../rollout/types.js";
import { runtimeInfo } from "../../../runtime.js";
import type { Actors } from "../../actors.js";
import type { Agent, ModelSource } from "../../agents.js";
import type { CentralizedAdapter } from "../../reinforce/centralized.js";
import type { StageHost } from "../../lifecycle/stage-host.js";
import { apiComparator } from "./api-comparator.js";
import type { Candidates, ScoredCandidates } from "./candidates.js";
import { currentComparator, currentCopyComparator, historyComparator, modelComparator, type ComparatorModel, type ComparatorSource } from "./comparators.js";
import type { PolicyCheckpoints } from "./policy-checkpoints.js";

export type IterativeConfig = PreferenceBaseConfig & IterativeFields;

export interface IterativeOptions {
  /** Centralized comparator generation: builds the joint prompt and splits answers (default: <agent_i> sections). */
  centralizedComparatorAdapter?: CentralizedAdapter;
  /** comparatorPolicy "model" with loaded models (or ids), one for all agents or one per agent. */
  comparatorAgents?: ModelSource[] | null;
}

export const ITERATIVE_OPTION_KEYS = { centralizedComparatorAdapter: true, comparatorAgents: true } as const satisfies Record<keyof IterativeOptions, true>;

/** What a round works on: its trainer's config, agents, task environment and train items, and how it labels candidates. */
export interface RoundTask {
  readonly config: IterativeConfig;
  readonly agents: readonly Agent[];
  readonly environment: RolloutEnvironment;
  readonly items: Item[];
  /** Labels candidates; the task reward unless the trainer scores with a learned model. */
  score(candidates: Candidates, context: { item: Item; itemIndex: number; prompts: string[] }): Promise<ScoredCandidates>;
}

export interface RoundSetup {
  /** The trainer's host: the round's counters, generator, logs, console and rank agreement are its. */
  host: StageHost;
  task: RoundTask;
  options: IterativeOptions;
  agentDevices: readonly string[];
  facts: CudaFacts;
  wandb: WandbConfig | null | undefined;
  outputDir: string;
  /** Whether this process writes the round's files (rank 0 of a data-parallel job, or the only process). */
  writesFiles: boolean;
}

/** A round of an iterative trainer: its host, its agents and task environment, and how it labels candidates. */
export function roundSetUp(
  trainer: { readonly host: StageHost; readonly config: IterativeConfig; readonly outputDir: string; readonly isMain: boolean },
  actors: Pick<Actors, "agents" | "environment" | "placement">,
  options: IterativeOptions & { trainDataset: Item[]; wandbConfig?: WandbConfig | null },
  score: RoundTask["score"],
): RoundSetup {
  const info = runtimeInfo();
  return {
    host: trainer.host,
    task: { config: trainer.config, agents: actors.agents, environment: actors.environment, items: options.trainDataset, score },
    options,
    agentDevices: actors.placement.agentDevices,
    facts: { cudaAvailable: info.cudaAvailable, deviceCount: info.cudaDeviceCount },
    wandb: options.wandbConfig,
    outputDir: trainer.outputDir,
    writesFiles: trainer.isMain,
  };
}

/** The comparator the config names, on its devices. */
export function createComparator(setup: RoundSetup, checkpoints: PolicyCheckpoints | null): ComparatorSource {
  const { host, task, options, facts } = setup;
  const c = task.config;
  const agents = task.agents;
  const devices = () => resolveDevices(c.comparatorDevices ?? [...setup.agentDevices], agents.length, "comparatorDevices", facts);
  if (options.comparatorAgents != null && c.comparatorPolicy !== "model") throw new TypeError(`comparatorAgents is only used with comparatorPolicy "model" (got "${c.comparatorPolicy}")`);
  switch (c.comparatorPolicy) {
    case "current":
      return currentComparator(agents, c.seed);
    case "current_copy":
      return currentCopyComparator(agents, devices(), c.seed);
    case "history":
      return historyComparator(agents, checkpoints!, c.comparatorHistoryK ?? 1, devices(), c.seed, (dir, device) => CausalLM.fromDirectory(dir, { device, dtype: c.dtype }), (label) =>
        host.console(`history comparator: ${label}`),
      );
    case "api":
      return apiComparator(c, (message) => host.console(message));
    case "model": {
      if (options.comparatorAgents != null && (c.comparatorAgents !== null || c.comparatorModelName !== null)) {
        throw new TypeError("comparatorAgents is given both as a trainer option and in the config; give one");
      }
      const sources: ModelSource[] = options.comparatorAgents ?? (c.comparatorAgents ? [...c.comparatorAgents] : [c.comparatorModelName!]);
      if (sources.length !== 1 && sources.length !== agents.length) throw new RangeError(`comparatorAgents must list 1 or ${agents.length} models, got ${sources.length}`);
      return modelComparator(agents, c.seed, async () => {
        const placed = devices();
        const cache = new Map<string, Promise<ComparatorModel>>();
        const load = (source: ModelSource, agent: number): Promise<ComparatorModel> => {
          if (typeof source !== "string") return Promise.resolve({ model: source, tokenizer: agents[agent].tokenizer, owned: false });
          const key = `${source}@${placed[agent]}`;
          if (!cache.has(key)) {
            cache.set(
              key,
              (async () => {
                const dir = await resolveModelSource(source);
                const tokenizer = await ComlrlTokenizer.fromDirectory(dir);
                return { model: (await CausalLM.fromDirectory(dir, { device: placed[agent], dtype: c.dtype })).freeze(), tokenizer, owned: true };
              })(),
            );
          }
          return cache.get(key)!;
        };
        return Promise.all(agents.map((a) => load(sources.length === 1 ? sources[0] : sources[a.index], a.index)));
      });
    }
  }
}
