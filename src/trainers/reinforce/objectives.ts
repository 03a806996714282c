// The clipped-ratio objectives of the MAGRPO family (docs/objectives.md): the advantages of an agent's update under
// its grouping and reward scaling, the zero-variance filter, and one minibatch step through the native objective
// kernel (native/losses/objective.h) with the rollout's log-probs as the old ones, truncated completions masked, the
// reference KL in the loss and the sampler/trainer agreement measured on the same tokens.
import type { AgentObjective } from "../../config/objectives.js";
import type { AdvantageMode } from "../../config/magrpo.js";
import type { NativeObjectiveOptions } from "../../native/binding.js";
import { advantages as comlrlAdvantages, shapeReturns } from "../../rollout/advantages.js";
import type { NodeSample } from "../../rollout/types.js";
import type { Agent } from "../agents.js";
import { mean } from "../../util/mean.js";

/** The MAGRPO config fields the advantages read. */
export interface AdvantageSettings {
  readonly advantageMode: AdvantageMode;
  readonly advantageNormalization: boolean;
  readonly referenceKlEnabled: boolean;
  readonly referenceKlCoef: number;
}

/** An agent's update: each kept sample's advantages (one per completion) and the groups the filter skipped. */
export interface UpdateAdvantages {
  readonly of: ReadonlyMap<NodeSample, readonly number[]>;
  /** Groups (a sample's K completions) tested by the zero-variance filter, and how many it skipped. */
  readonly groups: number;
  readonly filtered: number;
}

const populationStd = (xs: readonly number[]) => {
  const m = mean(xs);
  return Math.sqrt(mean(xs.map((x) => (x - m) ** 2)));
};
// TRL's nanstd: with Bessel's correction.
const sampleStd = (xs: readonly number[]) => {
  const m = mean(xs);
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1));
};

/** The returns the advantages start from: shaped by the reference KL when it enters the reward. */
function returnsOf(sample: NodeSample, objective: AgentObjective, settings: AdvantageSettings): number[] {
  return settings.referenceKlEnabled && objective.klIn === "reward" ? shapeReturns(sample.returns, sample.referenceKl, settings.referenceKlCoef) : sample.returns;
}

/**
 * Advantages of one agent's samples of an update. Groups: "joint" each sample's K completions (one node, one prompt:
 * CoMLRL's), "agent" every completion of the update, "agent_turn" those of one turn. scaleRewards null keeps
 * CoMLRL's baseline and normalisation over the group; otherwise TRL's: the group mean as baseline, divided by
 * (std + 1e-4) of the group ("group") or of all the update's completions ("batch"), or not ("none").
 */
export function updateAdvantages(samples: readonly NodeSample[], objective: AgentObjective, settings: AdvantageSettings): UpdateAdvantages {
  const threshold = objective.zeroVarianceFilter;
  const kept = threshold === null ? [...samples] : samples.filter((s) => populationStd(returnsOf(s, objective, settings)) > threshold);
  const groupKey = (s: NodeSample) => (objective.advantageGrouping === "joint" ? s : objective.advantageGrouping === "agent" ? "all" : s.turn);
  const groups = new Map<unknown, NodeSample[]>();
  for (const sample of kept) {
    const key = groupKey(sample);
    groups.set(key, [...(groups.get(key) ?? []), sample]);
  }
  const allReturns = kept.flatMap((s) => returnsOf(s, objective, settings));
  const batchStd = allReturns.length > 1 ? sampleStd(allReturns) : 0;
  const of = new Map<NodeSample, number[]>();
  for (const members of groups.values()) {
    const returns = members.flatMap((s) => returnsOf(s, objective, settings));
    if (returns.length < 2) {
      throw new RangeError(`advantageGrouping "${objective.advantageGrouping}" left a group of one completion: its advantage would have no baseline`);
    }
    let a: number[];
    if (objective.scaleRewards === null) {
      a = comlrlAdvantages(returns, settings.advantageMode, settings.advantageNormalization);
    } else {
      const baseline = mean(returns);
      const scale = objective.scaleRewards === "group" ? sampleStd(returns) : objective.scaleRewards === "batch" ? batchStd : null;
      a = returns.map((r) => (scale === null ? r - baseline : (r - baseline) / (scale + 1e-4)));
    }
    let offset = 0;
    for (const sample of members) {
      of.set(sample, a.slice(offset, offset + sample.returns.length));
      offset += sample.returns.length;
    }
  }
  return { of, groups: samples.length, filtered: samples.length - kept.length };
}

/** Whether generation stopped at the token limit instead of an EOS (TRL: the last id is neither EOS nor pad). */
export function isTruncated(ids: Int32Array, maxNewTokens: number, stopIds: readonly number[]): boolean {
  return ids.length >= maxNewTokens && !stopIds.includes(ids[ids.length - 1]);
}

/** The ids that end a completion on purpose: EOS, and the pad id generation fills with. */
function stopIdsOf(agent: Agent): number[] {
  return [...agent.tokenizer.eosTokenIds, agent.tokenizer.padTokenId].filter((id): id is number => typeof id === "number");
}

/** What a step reports beside the loss: the objective's metrics and the sampler/trainer agreement. */
export interface ObjectiveStepMetrics {
  loss: number;
  metrics: Record<string, number>;
}

export interface ObjectiveStepContext {
  objective: AgentObjective;
  /** Scale on the loss (its gradient) for accumulation; 1 for one minibatch per optimizer step. */
  scale?: number;
  maxNewTokens: number;
  /** The reference KL's coefficient in the loss (0: none). */
  beta: number;
}

/**
 * One minibatch through the objective kernel: accumulates the gradient (the caller steps the optimizer). Samples
 * without advantages (filtered) are not scored. Returns null when the minibatch has nothing left to score.
 */
export async function objectiveBackward(agent: Agent, minibatch: readonly NodeSample[], advantagesOf: ReadonlyMap<NodeSample, readonly number[]>, context: ObjectiveStepContext): Promise<ObjectiveStepMetrics | null> {
  const { objective } = context;
  const prompts: number[][] = [];
  const completions: Int32Array[] = [];
  const rowAdvantages: number[] = [];
  const mask: number[] = [];
  const sampler: number[] = [];
  let haveSampler = true;
  // Whether every row was sampled with the parameters the trainer scores with (no optimizer step since).
  let unmoved = true;
  const stopIds = stopIdsOf(agent);
  for (const sample of minibatch) {
    const a = advantagesOf.get(sample);
    if (!a) continue;
    sample.completionIds.forEach((ids, k) => {
      prompts.push(sample.promptIds);
      completions.push(ids);
      rowAdvantages.push(a[k]);
      const keep = objective.maskTruncatedCompletions && isTruncated(ids, context.maxNewTokens, stopIds) ? 0 : 1;
      for (let t = 0; t < ids.length; t++) mask.push(keep);
      const logprobs = sample.samplerLogprobs?.policy[k];
      if (logprobs && logprobs.length === ids.length) sampler.push(...logprobs);
      else haveSampler = false;
      if (sample.samplerLogprobs?.updates !== agent.updates) unmoved = false;
    });
  }
  if (completions.length === 0) return null;
  if (objective.numIterations > 1 && !haveSampler) {
    throw new Error(`agent ${agent.index}: numIterations ${objective.numIterations} needs the rollout's log-probs, which this rollout did not record`);
  }
  let refLogprobs: Float32Array | undefined;
  if (context.beta !== 0) {
    if (!agent.reference) throw new Error(`agent ${agent.index}: klIn "loss" needs the reference model (referenceKlEnabled)`);
    refLogprobs = (await agent.reference.score(prompts, completions, { tokenLogprobs: true })).tokenLogprobs;
  }
  const options: NativeObjectiveOptions = {
    lossType: objective.lossType as NativeObjectiveOptions["lossType"],
    importanceSamplingLevel: objective.importanceSamplingLevel,
    epsilon: objective.epsilon,
    epsilonHigh: objective.epsilonHigh,
    delta: objective.delta,
    beta: context.beta,
    klEstimator: objective.klEstimator,
    klBiasCorrection: objective.useBiasCorrectionKl,
    entropyCoef: objective.entropyCoef,
    maxCompletionLength: context.maxNewTokens,
  };
  const samplerLogprobs = haveSampler ? Float32Array.from(sampler) : undefined;
  const result = await agent.model.objectiveBackward(prompts, completions, {
    advantages: rowAdvantages,
    // One update per rollout: TRL's old log-probs are the current ones, detached (every ratio exactly 1).
    oldLogprobs: objective.numIterations > 1 ? samplerLogprobs : undefined,
    refLogprobs,
    tokenMask: Float32Array.from(mask),
    objective: options,
    scale: context.scale ?? 1,
  });
  const metrics: Record<string, number> = {
    "objective/policy_loss": result.policyLoss,
    "objective/clip_ratio/low_mean": result.clipLow,
    "objective/clip_ratio/high_mean": result.clipHigh,
    "objective/ratio_mean": result.ratioMean,
  };
  if (!Number.isNaN(result.klMean)) metrics["objective/kl"] = result.klMean;
  if (!Number.isNaN(result.entropyMean)) metrics["objective/entropy"] = result.entropyMean;
  if (samplerLogprobs) Object.assign(metrics, mismatchMetrics(samplerLogprobs, result.tokenLogprobs, completions, unmoved));
  return { loss: result.loss, metrics };
}

/**
 * Sampler against trainer on the same tokens: mean and max |Δ log p| and the mean sequence ratio exp(Σ Δ). Under
 * "mismatch/" while the parameters are the sampler's (no optimizer step since the rows were sampled); after a step
 * the same figures measure how far the policy moved, under "drift/".
 */
function mismatchMetrics(sampler: Float32Array, trainer: Float32Array, completions: readonly Int32Array[], unmoved: boolean): Record<string, number> {
  let sum = 0;
  let max = 0;
  let ratioSum = 0;
  let offset = 0;
  for (const ids of completions) {
    let logRatio = 0;
    for (let t = 0; t < ids.length; t++) {
      const d = trainer[offset + t] - sampler[offset + t];
      sum += Math.abs(d);
      max = Math.max(max, Math.abs(d));
      logRatio += d;
    }
    ratioSum += Math.exp(logRatio);
    offset += ids.length;
  }
  const prefix = unmoved ? "mismatch" : "drift";
  return {
    [`${prefix}/mean_abs_logp_diff`]: offset > 0 ? sum / offset : 0,
    [`${prefix}/max_abs_logp_diff`]: max,
    [`${prefix}/mean_sequence_ratio`]: ratioSum / completions.length,
  };
}

/** The MAGRPO config as the objective steps read it. */
export interface ObjectiveStepsConfig extends AdvantageSettings {
  readonly objectives: readonly AgentObjective[];
  readonly maxNewTokens: number;
}

/** Whether an agent's objective is CoMLRL's own path, untouched: today's loss, advantages and every completion. */
function isComlrlPath(objective: AgentObjective): boolean {
  return (
    objective.lossType === "comlrl" &&
    objective.scaleRewards === null &&
    objective.zeroVarianceFilter === null &&
    objective.advantageGrouping === "joint" &&
    !objective.maskTruncatedCompletions
  );
}

/**
 * The MAGRPO family's steps for agents whose objective leaves CoMLRL's path: the update's advantages are taken once
 * (prepare), each minibatch is passed numIterations times (passes), and each step runs the agent's loss (backward).
 */
export class ObjectiveSteps {
  private advantages = new Map<NodeSample, readonly number[]>();

  constructor(
    private readonly config: ObjectiveStepsConfig,
    agents: readonly Agent[],
    scoring: "batched" | "perCompletion",
  ) {
    config.objectives.forEach((objective, i) => {
      if (objective.lossType === "comlrl") return;
      if (scoring === "perCompletion") {
        throw new RangeError(`lossType "${objective.lossType}" (agent ${i}) needs the batched scoring path: scoring "perCompletion" is CoMLRL's loss only`);
      }
      agents[i].recordLogprobs = true;
    });
  }

  handles(agent: number): boolean {
    return !isComlrlPath(this.config.objectives[agent]);
  }

  /** One agent's minibatches of a turn, once per iteration (the same minibatches, as TRL reuses a generation batch). */
  passes<M>(group: readonly NodeSample[], minibatches: M[]): M[] {
    const iterations = group.length > 0 ? this.config.objectives[group[0].agent].numIterations : 1;
    return iterations === 1 ? minibatches : Array.from({ length: iterations }, () => minibatches).flat();
  }

  /**
   * The samples of a turn that train: those the zero-variance filter kept. Filtered ones leave the minibatches
   * before they are planned, so a turn whose groups are all filtered takes no optimizer step at all.
   */
  trained(group: NodeSample[]): NodeSample[] {
    if (group.length === 0 || this.config.objectives[group[0].agent].zeroVarianceFilter === null) return group;
    return group.filter((s) => this.advantages.has(s));
  }

  /**
   * The advantages of every handled agent's samples of this update; returns, per agent with a zero-variance filter,
   * the fraction of its groups the filter skipped.
   */
  prepare(samples: readonly NodeSample[]): Map<number, number> {
    this.advantages.clear();
    const filteredFraction = new Map<number, number>();
    this.config.objectives.forEach((objective, agent) => {
      if (isComlrlPath(objective)) return;
      const mine = samples.filter((s) => s.agent === agent);
      const update = updateAdvantages(mine, objective, this.config);
      for (const [sample, a] of update.of) this.advantages.set(sample, a);
      if (objective.zeroVarianceFilter !== null && update.groups > 0) filteredFraction.set(agent, update.filtered / update.groups);
    });
    return filteredFraction;
  }

  /** One minibatch's gradient under the agent's objective; the caller steps the optimizer. */
  async backward(agent: Agent, minibatch: readonly NodeSample[]): Promise<{ loss: number; objective: Record<string, number> }> {
    const objective = this.config.objectives[agent.index];
    if (objective.lossType === "comlrl") return { loss: await this.comlrlBackward(agent, minibatch, objective), objective: {} };
    const beta = this.config.referenceKlEnabled && objective.klIn === "loss" ? this.config.referenceKlCoef : 0;
    const result = await objectiveBackward(agent, minibatch, this.advantages, { objective, maxNewTokens: this.config.maxNewTokens, beta });
    return { loss: result?.loss ?? 0, objective: result?.metrics ?? {} };
  }

  /** CoMLRL's loss (1/|mb|) Σ (1/K) Σ_k −A_k · log π over the kept samples, with this objective's advantages. */
  private async comlrlBackward(agent: Agent, minibatch: readonly NodeSample[], objective: AgentObjective): Promise<number> {
    const kept = minibatch.filter((s) => this.advantages.has(s));
    const stopIds = stopIdsOf(agent);
    const prompts: number[][] = [];
    const completions: Int32Array[] = [];
    const weights: number[] = [];
    for (const sample of kept) {
      const a = this.advantages.get(sample)!;
      sample.completionIds.forEach((ids, k) => {
        prompts.push(sample.promptIds);
        completions.push(ids);
        const masked = objective.maskTruncatedCompletions && isTruncated(ids, this.config.maxNewTokens, stopIds);
        weights.push(masked ? 0 : a[k] / (sample.completionIds.length * kept.length));
      });
    }
    return completions.length > 0 ? (await agent.model.policyGradientBackward(prompts, completions, weights, 1)).loss : 0;
  }
}
