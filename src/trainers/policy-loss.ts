// One policy loss for every learner's actors (docs/objectives.md). A learner hands it rows — a completion of a
// prompt with its advantage and, where the rollout recorded them, the sampler's log-probs of its tokens — and the
// loss accumulates their gradient under the agent's objective: CoMLRL's on-policy sum (lossType "comlrl") or one of
// TRL's clipped-ratio losses through the native objective kernel (native/losses/objective.h), with the recorded
// log-probs as the old ones, truncated completions masked, the reference KL in the loss and the sampler/trainer
// agreement measured on the same tokens. It takes no optimizer step: the learner's step request runs its backward.
import type { AgentObjective } from "../config/objectives.js";
import type { TokenRows } from "../models/causal-lm.js";
import type { NativeObjectiveOptions } from "../native/binding.js";
import type { Agent } from "./agents.js";

/** One completion the policy loss scores. */
export interface PolicyRow {
  /** Token ids of the prompt. */
  readonly prompt: readonly number[];
  /** Token ids of the completion; an empty one scores nothing (and still counts in its group). */
  readonly completion: Int32Array;
  /** The completion's advantage. */
  readonly advantage: number;
  /**
   * Rows of one group: CoMLRL's loss averages the rows of a group, then the groups (MAGRPO's group is one node's K
   * completions; an actor-critic row is a group of its own). The clipped losses normalise by their loss type instead.
   */
  readonly group: number;
  /** The sampler's log-probs of the completion's tokens, and the agent's policy steps when it sampled; absent when not recorded. */
  readonly sampled?: {
    /** One log-prob per completion token, under the policy's own distribution. */
    readonly logprobs: Float32Array;
    /** The agent's policy steps when the completion was sampled. */
    readonly policySteps: number;
  };
}

/** What a policy loss's backward reports: the loss whose gradient it accumulated and its metrics (unprefixed). */
export interface PolicyLossResult {
  /** The loss whose gradient was accumulated; 0 when no row had tokens. */
  loss: number;
  /** The clipped losses' "objective/…" figures and the sampler/trainer agreement ("mismatch/…", or "drift/…" once the policy moved); none for "comlrl". */
  metrics: Record<string, number>;
}

/** The config fields a policy loss reads. */
export interface PolicyLossConfig {
  /** Each agent's objective (docs/objectives.md). */
  readonly objectives: readonly AgentObjective[];
  /** The generation limit: what "truncated" means, and dr_grpo's normaliser. */
  readonly maxNewTokens: number;
  /** With klIn "loss", the reference KL enters the loss at referenceKlCoef. */
  readonly referenceKlEnabled: boolean;
  readonly referenceKlCoef: number;
}

/** Whether generation stopped at the token limit instead of an EOS (TRL: the last id is neither EOS nor pad). */
export function isTruncated(ids: Int32Array, maxNewTokens: number, stopIds: readonly number[]): boolean {
  return ids.length >= maxNewTokens && !stopIds.includes(ids[ids.length - 1]);
}

/** The ids that end a completion on purpose: EOS, and the pad id generation fills with. */
function stopIdsOf(agent: Agent): number[] {
  return [...agent.tokenizer.eosTokenIds, agent.tokenizer.padTokenId].filter((id): id is number => typeof id === "number");
}

/**
 * The agents' policy loss. A learner asks it which agents' rollouts record log-probs and how many passes a rollout
 * gets (numIterations), then runs backward(agent, rows) inside each policy step.
 */
export class PolicyLoss {
  constructor(private readonly config: PolicyLossConfig) {}

  /** The agent's objective. */
  objective(agent: number): AgentObjective {
    return this.config.objectives[agent];
  }

  /** Whether the agent's rollouts must record the sampler's log-probs: its loss takes ratios to them (and measures the agreement). */
  recordsLogprobs(agent: number): boolean {
    return this.objective(agent).lossType !== "comlrl";
  }

  /** Passes over each rollout's minibatches (numIterations; the same minibatches each time, as TRL reuses a generation batch). */
  passes(agent: number): number {
    return this.objective(agent).numIterations;
  }

  /** Whether backward() is one native backward of the whole loss, so that the step may be taken inside it. */
  get oneBackward(): boolean {
    return true;
  }

  /**
   * Accumulates the gradient of the agent's loss over the rows (the caller steps the optimizer). `policySteps` is the
   * agent's optimizer steps so far: rows sampled at that count were sampled with the parameters being scored.
   */
  async backward(agent: Agent, rows: readonly PolicyRow[], policySteps: number): Promise<PolicyLossResult> {
    const objective = this.objective(agent.index);
    if (objective.lossType === "comlrl") return { loss: await this.comlrlBackward(agent, rows, objective), metrics: {} };
    return this.clippedBackward(agent, rows.filter((row) => row.completion.length > 0), objective, policySteps);
  }

  /** Rows whose loss is masked: truncated completions, where the objective says so. */
  private masked(agent: Agent, objective: AgentObjective): (row: PolicyRow) => boolean {
    if (!objective.maskTruncatedCompletions) return () => false;
    const stopIds = stopIdsOf(agent);
    return (row) => isTruncated(row.completion, this.config.maxNewTokens, stopIds);
  }

  /** CoMLRL's loss (1/G) Σ_groups (1/|group|) Σ_rows −A · log π(completion), every completion token scored; masked rows weigh 0. */
  private async comlrlBackward(agent: Agent, rows: readonly PolicyRow[], objective: AgentObjective): Promise<number> {
    const sizes = new Map<number, number>();
    for (const row of rows) sizes.set(row.group, (sizes.get(row.group) ?? 0) + 1);
    const masked = this.masked(agent, objective);
    const scored = rows.filter((row) => row.completion.length > 0);
    if (scored.length === 0) return 0;
    const weights = scored.map((row) => (masked(row) ? 0 : row.advantage / (sizes.get(row.group)! * sizes.size)));
    return this.weightedLogprobBackward(agent, scored.map((row) => row.prompt), scored.map((row) => row.completion), weights);
  }

  /** Accumulates ∇ Σ_rows −weight · log π(completion); returns that loss. */
  protected async weightedLogprobBackward(agent: Agent, prompts: TokenRows, completions: Int32Array[], weights: number[]): Promise<number> {
    return (await agent.model.policyGradientBackward(prompts, completions, weights, 1)).loss;
  }

  /** One of TRL's clipped-ratio losses through the native objective kernel. */
  private async clippedBackward(agent: Agent, rows: readonly PolicyRow[], objective: AgentObjective, policySteps: number): Promise<PolicyLossResult> {
    if (rows.length === 0) return { loss: 0, metrics: {} };
    const prompts = rows.map((row) => row.prompt);
    const completions = rows.map((row) => row.completion);
    const masked = this.masked(agent, objective);
    const mask = rows.flatMap((row) => Array<number>(row.completion.length).fill(masked(row) ? 0 : 1));
    const haveSampler = rows.every((row) => row.sampled && row.sampled.logprobs.length === row.completion.length);
    if (objective.numIterations > 1 && !haveSampler) {
      throw new Error(`agent ${agent.index}: numIterations ${objective.numIterations} needs the rollout's log-probs, which this rollout did not record`);
    }
    const beta = this.config.referenceKlEnabled && objective.klIn === "loss" ? this.config.referenceKlCoef : 0;
    let refLogprobs: Float32Array | undefined;
    if (beta !== 0) {
      if (!agent.reference) throw new Error(`agent ${agent.index}: klIn "loss" needs the reference model (referenceKlEnabled)`);
      refLogprobs = (await agent.reference.score(prompts, completions, { tokenLogprobs: true })).tokenLogprobs;
    }
    const options: NativeObjectiveOptions = {
      lossType: objective.lossType as NativeObjectiveOptions["lossType"],
      importanceSamplingLevel: objective.importanceSamplingLevel,
      epsilon: objective.epsilon,
      epsilonHigh: objective.epsilonHigh,
      delta: objective.delta,
      beta,
      klEstimator: objective.klEstimator,
      klBiasCorrection: objective.useBiasCorrectionKl,
      entropyCoef: objective.entropyCoef,
      maxCompletionLength: this.config.maxNewTokens,
    };
    const samplerLogprobs = haveSampler ? Float32Array.from(rows.flatMap((row) => Array.from(row.sampled!.logprobs))) : undefined;
    const result = await agent.model.objectiveBackward(prompts, completions, {
      advantages: rows.map((row) => row.advantage),
      // One update per rollout: TRL's old log-probs are the current ones, detached (every ratio exactly 1).
      oldLogprobs: objective.numIterations > 1 ? samplerLogprobs : undefined,
      refLogprobs,
      tokenMask: Float32Array.from(mask),
      objective: options,
      scale: 1,
    });
    const metrics: Record<string, number> = {
      "objective/policy_loss": result.policyLoss,
      "objective/clip_ratio/low_mean": result.clipLow,
      "objective/clip_ratio/high_mean": result.clipHigh,
      "objective/ratio_mean": result.ratioMean,
    };
    if (!Number.isNaN(result.klMean)) metrics["objective/kl"] = result.klMean;
    if (!Number.isNaN(result.entropyMean)) metrics["objective/entropy"] = result.entropyMean;
    // Whether every row was sampled with the parameters the trainer scores with (no optimizer step since).
    const unmoved = rows.every((row) => row.sampled?.policySteps === policySteps);
    if (samplerLogprobs) Object.assign(metrics, agreementMetrics(samplerLogprobs, result.tokenLogprobs, completions, unmoved));
    return { loss: result.loss, metrics };
  }
}

/**
 * Sampler against trainer on the same tokens: mean and max |Δ log p| and the mean sequence ratio exp(Σ Δ). Under
 * "mismatch/" while the parameters are the sampler's (no optimizer step since the rows were sampled); after a step
 * the same figures measure how far the policy moved, under "drift/".
 */
function agreementMetrics(sampler: Float32Array, trainer: Float32Array, completions: readonly Int32Array[], unmoved: boolean): Record<string, number> {
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
