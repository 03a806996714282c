// What MADPOIter and MARLHFIter run every iteration (COMLRL-SPEC §6.5 steps 1–6, 8): the collection stage — for every
// train item the current policy's candidates (training's sampling stream; they count as env steps) and the
// comparator's, both scored, paired index by index — then, with every rank's items gathered, the iteration's replay
// shard, the training pairs chosen by the replay mode, iter/* metrics and reward distributions; the iteration's
// training (skipped when it has no training pairs); then its policy checkpoint. Rank 0 writes the files, every rank
// holds the same shards and checkpoints. All of it is trainer state: state()/restore() carry the shard records, the
// comparator's stream and the policy checkpoints across a resume. What a round is built from is in round-setup.ts.
import { formatPrompt } from "../../../rollout/formatters.js";
import { forEachAgent } from "../../../rollout/tree.js";
import type { Item } from "../../../rollout/types.js";
import { TaggedAdapter, type CentralizedAdapter } from "../../reinforce/centralized.js";
import type { StageHost, TrainingStage, TrainProgress } from "../../lifecycle/stage-host.js";
import { gatherItems, type PreferencePairs } from "../pairs.js";
import { buildPairs, type Candidates } from "./candidates.js";
import { centralizedCandidates, decentralizedCandidates, type AgentSampler, type ComparatorSource } from "./comparators.js";
import { resolveArtefactDir, resumedArtefactDir } from "./dirs.js";
import { INITIAL_CHECKPOINT, iterationCheckpointName, PolicyCheckpoints } from "./policy-checkpoints.js";
import { iterativePairToJson, pairsFromJson, PreferenceReplay, readReplayDir, type IterativePair, type ShardRecord } from "./replay.js";
import { declaredRewardRange, writeRewardDistribution, type RewardSamples } from "./reward-distribution.js";
import { createComparator, type RoundSetup, type RoundTask } from "./round-setup.js";
import { meanOrZero } from "../../../util/mean.js";

/** One collected item as the ranks exchange it (plain JSON): its pairs, its candidates' raw rewards, its comparisons. */
interface CollectedItem {
  itemIndex: number;
  pairs: Array<Record<string, unknown>>;
  targetRawRewards: number[];
  comparatorRawRewards: number[];
  /** Aligned comparisons the current candidate won, of those made. */
  wins: number;
  comparisons: number;
}

export class IterativeRound {
  readonly replay: PreferenceReplay;
  readonly policies: PolicyCheckpoints | null;
  private readonly comparator: ComparatorSource;
  private readonly rewardRange: [number, number] | null;
  private distributionsDir: string;
  private readonly adapter: CentralizedAdapter;
  /** The items this rank collected in the current iteration. */
  private collected: CollectedItem[] = [];
  private sampler: AgentSampler | null = null;
  /** Whether every rank writes and reads the artefacts in the same directories (a resume picks them on each rank). */
  private dirsAgreed = true;

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
    const sampled = await this.host.timings.time("generation", () =>
      forEachAgent(this.task.agents.length, this.task.environment.concurrent, (i) => this.task.agents[i].sample([prompts[i]], k)),
    );
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
      // The collection's one epoch is the iteration's.
      beginEpoch: () => this.beginIteration(host.progress.iteration),
      runStep: async (i) => {
        const item = task.items[i];
        const prompts = task.environment.formatters.map((f, agent) => formatPrompt(f, item, agent));
        const context = { item, itemIndex: i, prompts };
        const { candidates, promptIds } = await this.currentCandidates(prompts, c.preferenceNumCandidates);
        host.progress.envStep += c.preferenceNumCandidates;
        const current = await task.score(candidates, context);
        const comparator = await task.score(await this.comparatorCandidates(item, prompts, c.comparatorNumCandidates ?? c.preferenceNumCandidates), context);
        const pairs = buildPairs({ itemIndex: i, prompts, promptIds }, current, comparator, task.agents.map((a) => a.tokenizer), { pairSelection: c.pairSelection, pairsPerSample: c.preferencePairsPerSample }, host.random);
        const comparisons = Math.min(current.rewards.length, comparator.rewards.length);
        const wins = current.rewards.slice(0, comparisons).filter((r, j) => r > comparator.rewards[j]).length;
        this.collected.push({ itemIndex: i, pairs: pairs.map(iterativePairToJson), targetRawRewards: current.rawRewards, comparatorRawRewards: comparator.rawRewards, wins, comparisons });
        host.logger?.logTrain({ "iter/item_pairs": pairs.length, "iter/item_target_reward_mean": meanOrZero(current.rewards), "iter/item_comparator_reward_mean": meanOrZero(comparator.rewards) }, host.progress.envStep);
        return { pairs: this.collected.reduce((sum, r) => sum + r.pairs.length, 0) };
      },
      endEpoch: async () => {
        this.comparator.end();
        this.sampler = null;
        onPairs(await this.endCollection(host.progress.iteration));
      },
    };
  }

  private async beginIteration(iteration: number): Promise<void> {
    await this.agreeDirs();
    this.collected = [];
    if (iteration === 0 && this.policies && !this.policies.has(INITIAL_CHECKPOINT)) await this.writePolicies(INITIAL_CHECKPOINT);
    this.sampler = await this.comparator.begin(iteration);
  }

  /** Every rank's items gathered: the iteration's shard, its training pairs, iter/* metrics and distributions. */
  private async endCollection(iteration: number): Promise<IterativePair[]> {
    const { host, task } = this;
    const c = task.config;
    await this.agreeDirs();
    const items = await gatherItems(host, this.collected);
    const pairs = pairsFromJson(
      items.flatMap((r) => r.pairs),
      task.agents.map((a) => a.tokenizer),
      `iteration ${iteration + 1}'s pairs`,
    );
    await this.replay.write(iteration, pairs, this.setup.writesFiles);
    const training = this.replay.select(iteration, { mode: c.preferenceReplayMode, k: c.preferenceReplayK, lambda: c.preferenceReplayLambda, sampleSize: c.preferenceReplaySampleSize }, host.random);
    const samples: RewardSamples = {
      candidate: { target: items.flatMap((r) => r.targetRawRewards), comparator: items.flatMap((r) => r.comparatorRawRewards) },
      selected: { target: pairs.flatMap((p) => (p.targetRawReward === null ? [] : [p.targetRawReward])), comparator: pairs.flatMap((p) => (p.comparatorRawReward === null ? [] : [p.comparatorRawReward])) },
    };
    const comparisons = items.reduce((sum, r) => sum + r.comparisons, 0);
    host.logger?.logTrain(
      {
        // CoMLRL 1.4.3's keys for the iteration, the pairs it collected, those in every replay shard so far, and
        // those its training draws.
        "iter/current_iteration": iteration + 1,
        "iter/current_preference_pairs": pairs.length,
        "iter/total_preference_pairs": this.replay.records.reduce((sum, shard) => sum + shard.numPairs, 0),
        "iter/train_preference_pairs": training.length,
        "iter/replay_shards": this.replay.records.length,
        "iter/target_reward_mean": meanOrZero(samples.candidate.target),
        "iter/comparator_reward_mean": meanOrZero(samples.candidate.comparator),
        "iter/target_win_rate": comparisons ? items.reduce((sum, r) => sum + r.wins, 0) / comparisons : 0,
      },
      host.progress.envStep,
    );
    if (this.rewardRange && this.setup.writesFiles) await writeRewardDistribution(this.distributionsDir, iteration, this.rewardRange, samples);
    if (training.length === 0) host.console(`iteration ${iteration + 1}: no preference pairs (every comparison tied); training is skipped`);
    return training;
  }

  /** After an iteration's training: its policy checkpoint, when they are kept. */
  async endIteration(iteration: number): Promise<void> {
    await this.agreeDirs();
    if (this.policies) await this.writePolicies(iterationCheckpointName(iteration));
  }

  /** Rank 0 saves the agents; every rank records the checkpoint, and waits until it is written (the history comparator loads it). */
  private async writePolicies(label: string): Promise<void> {
    await this.policies!.write(label, this.task.agents, this.setup.writesFiles);
    await this.host.gather([]);
  }

  /** After a resume every rank takes rank 0's artefact directories (each rank picked its own resume-* name). */
  private async agreeDirs(): Promise<void> {
    if (this.dirsAgreed) return;
    const [dirs] = await this.host.gather([{ replay: this.replay.dir, distributions: this.distributionsDir, policies: this.policies?.dir ?? null }]);
    this.replay.dir = dirs.replay;
    this.distributionsDir = dirs.distributions;
    if (this.policies) this.policies.dir = dirs.policies!;
    this.dirsAgreed = true;
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
    this.dirsAgreed = false;
  }

  dispose(): void {
    this.comparator.dispose();
  }
}

/**
 * One iteration's stages: the round's collection (its training pairs become `preferences`), then `training`, whose
 * stages take no step when the iteration has no training pairs (CoMLRL skips its training then: MARLHFIter neither
 * trains a reward model nor runs RL), and whose last stage writes the iteration's policy checkpoint after its last
 * epoch, trained or not.
 */
export function iterationStages(progress: TrainProgress, round: IterativeRound, preferences: PreferencePairs, training: TrainingStage[]): TrainingStage[] {
  const collect = round.collectStage((pairs) => {
    preferences.pairs.length = 0;
    preferences.pairs.push(...pairs);
  });
  const trained = training.map((stage, s): TrainingStage => {
    const last = s === training.length - 1;
    return {
      name: stage.name,
      get epochs() {
        return stage.epochs;
      },
      get steps() {
        return preferences.pairs.length === 0 ? 0 : stage.steps;
      },
      ...(stage.beginEpoch ? { beginEpoch: () => stage.beginEpoch!() } : {}),
      runStep: (i) => stage.runStep(i),
      endEpoch: async () => {
        await stage.endEpoch?.();
        if (last && progress.epoch + 1 >= stage.epochs) await round.endIteration(progress.iteration);
      },
      ...(stage.evaluateBefore ? { evaluateBefore: (i: number) => stage.evaluateBefore!(i) } : {}),
    };
  });
  return [collect, ...trained];
}
