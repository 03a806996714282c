// What MADPOIter and MARLHFIter share (COMLRL-SPEC §6.5 steps 1–6, 8): the per-iteration collection stage — for
// every train item the current policy's candidates (training's sampling stream; they count as env steps) and the
// comparator's, both scored, paired index by index — then the iteration's replay shard, the training pairs chosen by
// the replay mode, iter/* metrics, reward distributions, and the policy checkpoints. All of it is trainer state:
// state()/restore() carry the shard records, the comparator's stream and the policy checkpoints across a resume.
import { resolveDevices, type CudaFacts, type IterativeFields, type MADPOConfig } from "../../../config/index.js";
import { CausalLM } from "../../../models/causal-lm.js";
import { resolveModelSource } from "../../../models/hub.js";
import { ComlrlTokenizer } from "../../../models/tokenizer.js";
import type { WandbConfig } from "../../../logging/wandb.js";
import { formatPrompt } from "../../../rollout/formatters.js";
import { forEachAgent, type RolloutEnvironment } from "../../../rollout/tree.js";
import type { Item } from "../../../rollout/types.js";
import type { Agent, ModelSource } from "../../agents.js";
import { TaggedAdapter, type CentralizedAdapter } from "../../reinforce/centralized.js";
import type { StageHost, TrainingStage, TrainProgress } from "../../lifecycle/stage-host.js";
import { runtimeInfo } from "../../../runtime.js";
import type { Actors } from "../../actors.js";
import type { PreferencePairs } from "../pairs.js";
import { apiComparator } from "./api-comparator.js";
import { buildPairs, type Candidates, type ScoredCandidates } from "./candidates.js";
import {
  centralizedCandidates,
  currentComparator,
  currentCopyComparator,
  decentralizedCandidates,
  historyComparator,
  modelComparator,
  type AgentSampler,
  type ComparatorModel,
  type ComparatorSource,
} from "./comparators.js";
import { resolveArtefactDir, resumedArtefactDir } from "./dirs.js";
import { INITIAL_CHECKPOINT, iterationCheckpointName, PolicyCheckpoints } from "./policy-checkpoints.js";
import { PreferenceReplay, readReplayDir, type IterativePair, type ShardRecord } from "./replay.js";
import { declaredRewardRange, writeRewardDistribution, type RewardSamples } from "./reward-distribution.js";
import { makeDirs } from "../../../util/make-dirs.js";

export type IterativeConfig = Omit<MADPOConfig, "pairSelection"> & IterativeFields;

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
  /** The trainer's host: the round's counters, generator, logs and console are its. */
  host: StageHost;
  task: RoundTask;
  options: IterativeOptions;
  agentDevices: readonly string[];
  facts: CudaFacts;
  wandb: WandbConfig | null | undefined;
  outputDir: string;
}

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

/** The comparator the config names, on its devices. */
function createComparator(setup: RoundSetup, checkpoints: PolicyCheckpoints | null): ComparatorSource {
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

export class IterativeRound {
  readonly replay: PreferenceReplay;
  readonly policies: PolicyCheckpoints | null;
  private readonly comparator: ComparatorSource;
  private readonly rewardRange: [number, number] | null;
  private distributionsDir: string;
  private readonly adapter: CentralizedAdapter;
  /** The iteration being collected: its pairs and the rewards its distribution is drawn from. */
  private pairs: IterativePair[] = [];
  private samples: RewardSamples = { candidate: { target: [], comparator: [] }, selected: { target: [], comparator: [] } };
  private wins = 0;
  private comparisons = 0;
  private sampler: AgentSampler | null = null;

  constructor(private readonly setup: RoundSetup) {
    const { task, wandb, outputDir } = setup;
    const c = task.config;
    this.rewardRange = c.logRewardDistribution ? declaredRewardRange(task.environment.rewardFunc) : null;
    this.replay = new PreferenceReplay(resolveArtefactDir("preference_replay", c.preferenceReplayDir, wandb, outputDir));
    this.distributionsDir = resolveArtefactDir("reward_distributions", null, wandb, outputDir);
    const wantsPolicies = c.policyCheckpointDir !== null || c.comparatorPolicy === "history";
    this.policies = wantsPolicies ? new PolicyCheckpoints(resolveArtefactDir("policy_checkpoints", c.policyCheckpointDir, wandb, outputDir)) : null;
    this.adapter = setup.options.centralizedComparatorAdapter ?? new TaggedAdapter();
    this.comparator = createComparator(setup, this.policies);
  }

  private get host(): StageHost {
    return this.setup.host;
  }

  private get task(): RoundTask {
    return this.setup.task;
  }

  /** Registers another run's replay shards (CoMLRL's layout or ours) as history older than this run's. */
  adoptReplay(dir: string): void {
    const shards = readReplayDir(dir, this.task.agents.map((a) => a.tokenizer));
    this.replay.adopt(shards.map((s, j) => ({ ...s, iteration: j - shards.length + 1 })));
  }

  /** Each trained agent's k candidates for its prompt, from training's stream. */
  private async currentCandidates(prompts: string[], k: number): Promise<{ candidates: Candidates; promptIds: number[][] }> {
    const sampled = await forEachAgent(this.task.agents.length, this.task.environment.concurrent, (i) => this.task.agents[i].sample([prompts[i]], k));
    return { candidates: { texts: sampled.map((s) => s.texts[0]), completionIds: sampled.map((s) => s.completionIds[0]) }, promptIds: sampled.map((s) => s.promptIds[0]) };
  }

  private comparatorCandidates(item: Item, prompts: string[], k: number): Promise<Candidates> {
    const c = this.task.config;
    // Centralized collaboration: the one actor's prompt is the joint prompt already.
    const centralized = c.comparatorGenerationMode === "centralized" && c.collaborationMode !== "centralized";
    return centralized ? centralizedCandidates(this.sampler!, this.adapter, c.comparatorCentralizedAgentIndex, item, prompts, k) : decentralizedCandidates(this.sampler!, item, prompts, k);
  }

  /** One step per train item; at the end the shard, the training pairs, metrics and distributions. */
  collectStage(onPairs: (pairs: IterativePair[]) => void): TrainingStage {
    const { host, task } = this;
    const c = task.config;
    return {
      name: "collect",
      epochs: 1,
      steps: task.items.length,
      runStep: async (i) => {
        const iteration = host.progress.iteration;
        if (host.progress.itemIndex === 0) await this.beginIteration(iteration);
        const item = task.items[i];
        const prompts = task.environment.formatters.map((f, agent) => formatPrompt(f, item, agent));
        const context = { item, itemIndex: i, prompts };
        const { candidates, promptIds } = await this.currentCandidates(prompts, c.preferenceNumCandidates);
        host.progress.envStep += c.preferenceNumCandidates;
        const current = await task.score(candidates, context);
        const comparator = await task.score(await this.comparatorCandidates(item, prompts, c.comparatorNumCandidates ?? c.preferenceNumCandidates), context);
        const pairs = buildPairs({ itemIndex: i, prompts, promptIds }, current, comparator, task.agents.map((a) => a.tokenizer), { pairSelection: c.pairSelection, pairsPerSample: c.preferencePairsPerSample }, host.random);
        this.pairs.push(...pairs);
        this.samples.candidate.target.push(...current.rawRewards);
        this.samples.candidate.comparator.push(...comparator.rawRewards);
        const n = Math.min(current.rewards.length, comparator.rewards.length);
        for (let j = 0; j < n; j++) this.wins += current.rewards[j] > comparator.rewards[j] ? 1 : 0;
        this.comparisons += n;
        host.logger?.logTrain({ "iter/item_pairs": pairs.length, "iter/item_target_reward_mean": mean(current.rewards), "iter/item_comparator_reward_mean": mean(comparator.rewards) }, host.progress.envStep);
        return { pairs: this.pairs.length };
      },
      endEpoch: async () => {
        const iteration = host.progress.iteration;
        this.comparator.end();
        this.sampler = null;
        await makeDirs(this.replay.dir);
        await this.replay.write(iteration, this.pairs);
        const training = this.replay.select(iteration, { mode: c.preferenceReplayMode, k: c.preferenceReplayK, lambda: c.preferenceReplayLambda, sampleSize: c.preferenceReplaySampleSize }, host.random);
        for (const p of this.pairs) {
          if (p.targetRawReward !== null) this.samples.selected.target.push(p.targetRawReward);
          if (p.comparatorRawReward !== null) this.samples.selected.comparator.push(p.comparatorRawReward);
        }
        host.logger?.logTrain(
          {
            "iter/iteration": iteration + 1,
            "iter/num_pairs": this.pairs.length,
            "iter/training_pairs": training.length,
            "iter/replay_shards": this.replay.records.length,
            "iter/target_reward_mean": mean(this.samples.candidate.target),
            "iter/comparator_reward_mean": mean(this.samples.candidate.comparator),
            "iter/target_win_rate": this.comparisons ? this.wins / this.comparisons : 0,
          },
          host.progress.envStep,
        );
        if (this.rewardRange) await writeRewardDistribution(this.distributionsDir, iteration, this.rewardRange, this.samples);
        if (training.length === 0) host.console(`iteration ${iteration + 1}: no preference pairs (every comparison tied); training is skipped`);
        onPairs(training);
      },
    };
  }

  private async beginIteration(iteration: number): Promise<void> {
    this.pairs = [];
    this.samples = { candidate: { target: [], comparator: [] }, selected: { target: [], comparator: [] } };
    this.wins = 0;
    this.comparisons = 0;
    if (iteration === 0 && this.policies && !this.policies.has(INITIAL_CHECKPOINT)) await this.policies.write(INITIAL_CHECKPOINT, this.task.agents);
    this.sampler = await this.comparator.begin(iteration);
  }

  /** After an iteration's training: its policy checkpoint, when they are kept. */
  async endIteration(iteration: number): Promise<void> {
    await this.policies?.write(iterationCheckpointName(iteration), this.task.agents);
  }

  state(): Record<string, unknown> {
    return { replay: this.replay.records, comparator: this.comparator.state(), policyCheckpoints: this.policies?.state() ?? null };
  }

  /** Restores a checkpoint's round state; later artefacts of a resumed run go to resumeTag subdirectories. */
  restore(state: Record<string, unknown>, resumeTag: string): void {
    this.replay.restore(state.replay as ShardRecord[], this.task.agents.map((a) => a.tokenizer));
    this.comparator.restore(state.comparator as Record<string, string> | null);
    if (this.policies) this.policies.restore((state.policyCheckpoints as Record<string, string>) ?? {});
    this.replay.dir = resumedArtefactDir(this.replay.dir, resumeTag);
    this.distributionsDir = resumedArtefactDir(this.distributionsDir, resumeTag);
    if (this.policies) this.policies.dir = resumedArtefactDir(this.policies.dir, resumeTag);
  }

  dispose(): void {
    this.comparator.dispose();
  }
}

/** A round of an iterative trainer: its host, its agents and task environment, and how it labels candidates. */
export function roundSetUp(
  trainer: { readonly host: StageHost; readonly config: IterativeConfig; readonly outputDir: string },
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
  };
}

/**
 * One iteration's stages: the round's collection (its training pairs become `preferences`), then `training`, whose
 * last stage writes the iteration's policy checkpoint after its last epoch.
 */
export function iterationStages(progress: TrainProgress, round: IterativeRound, preferences: PreferencePairs, training: TrainingStage[]): TrainingStage[] {
  const collect = round.collectStage((pairs) => {
    preferences.pairs.length = 0;
    preferences.pairs.push(...pairs);
  });
  const last = training[training.length - 1];
  const closing: TrainingStage = {
    name: last.name,
    get epochs() {
      return last.epochs;
    },
    get steps() {
      return last.steps;
    },
    runStep: (i) => last.runStep(i),
    endEpoch: async () => {
      await last.endEpoch?.();
      if (progress.epoch + 1 >= last.epochs) await round.endIteration(progress.iteration);
    },
    ...(last.evaluateBefore ? { evaluateBefore: (i: number) => last.evaluateBefore!(i) } : {}),
  };
  return [collect, ...training.slice(0, -1), closing];
}
