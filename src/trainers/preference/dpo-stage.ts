// MADPO's DPO stage (COMLRL-SPEC §6.2), shared by MADPO and MADPOIter: numTrainEpochs passes over the shuffled pair
// set, one joint DPO step per trainBatchSize pairs, in which every agent is stepped in turn on the joint loss. It
// runs inside its trainer's host, which counts its env steps and updates and logs them.
import type { PreferenceBaseConfig } from "./base-config.js";
import type { Agent } from "../agents.js";
import type { StageHost, TrainingStage } from "../lifecycle/stage-host.js";
import { dpoObjective, scoreAgents } from "./dpo.js";
import type { PreferencePair, PreferencePairs } from "./pairs.js";
import { meanOrZero } from "../../util/mean.js";


/** What one joint DPO step logs. */
export interface DPOStepMetrics {
  /** mean_p −log σ(β Δ_p), the same joint loss every agent descends. */
  loss: number;
  /** mean_p β Δ_p: the implicit reward margin of winners over losers. */
  rewardMargin: number;
  /** Share of pairs with Δ_p > 0. */
  accuracy: number;
  /** Per agent, mean_p Δ_i. */
  agentDeltas: number[];
  /** Per agent, the gradient norm of its step, before clipping. */
  gradNorms: number[];
}


export class DpoTraining {
  /** The current epoch's order of the pairs. */
  private order: number[] = [];

  constructor(
    private readonly host: StageHost,
    private readonly config: PreferenceBaseConfig,
    private readonly agents: readonly Agent[],
    /** Whether agents score and step at the same time (distinct devices). */
    private readonly concurrent: boolean,
    private readonly preferences: PreferencePairs,
    /** Whether there is held-out data to evaluate on. */
    private readonly hasEvalData: boolean,
  ) {
    // CoMLRL's MADPO (and its iterative form) trains its agents in train mode: their dropout acts in the DPO backward.
    for (const agent of agents) agent.model.train();
  }

  /** numTrainEpochs over the pairs; evaluation counted in DPO steps, before step s when s % evalInterval is 0. */
  stage(): TrainingStage {
    const c = this.config;
    const preferences = this.preferences;
    const dpo: TrainingStage = {
      name: "dpo",
      epochs: c.numTrainEpochs,
      get steps() {
        return Math.ceil(preferences.pairs.length / c.trainBatchSize);
      },
      evaluateBefore: (i) => c.evalInterval > 0 && (this.host.progress.epoch * dpo.steps + i) % c.evalInterval === 0 && this.hasEvalData,
      // Drawn from the checkpointed generator, so a resumed epoch has the same order.
      beginEpoch: async () => {
        this.order = this.host.random.shuffle(preferences.pairs.map((_, j) => j));
      },
      runStep: async (i) => {
        const batch = this.order.slice(i * c.trainBatchSize, (i + 1) * c.trainBatchSize).map((j) => preferences.pairs[j]);
        const metrics = await this.update(batch);
        return { "dpo loss": metrics.loss };
      },
    };
    return dpo;
  }

  /**
   * One DPO step on a batch of pairs: every agent's Δ_i from one scoring pass, then each agent's backward and AdamW
   * step on the joint loss (all Δ are taken before any agent steps, as in the spec's sequential update; scoreAgents
   * says when the backward reuses the scoring pass).
   */
  async update(batch: PreferencePair[]): Promise<DPOStepMetrics> {
    const c = this.config;
    const concurrent = this.concurrent;
    const scored = await this.host.timings.time("update", () => scoreAgents(this.agents, batch, concurrent));
    const deltas = scored.map((s) => s.deltas);
    const joint = batch.map((_, p) => deltas.reduce((sum, d) => sum + d[p], 0));
    const { loss, winnerWeights } = dpoObjective(joint, c.dpoBeta);
    // A step that fails (a non-finite loss refused, another agent's error) leaves kept graphs without their backward.
    const steps = await this.host
      .stepAgents(this.agents.length, concurrent, async (i, step) => {
        const agent = this.agents[i];
        await step({
          ...agent.policyStep(),
          samples: batch.length,
          loss,
          backward: () => scored[i].backward(winnerWeights),
          subject: `agent ${agent.index} (DPO)`,
          batch: `a batch of ${batch.length} pairs`,
          maxGradNorm: c.maxGradNorm,
        });
      })
      .finally(() => Promise.all(scored.map((s) => s.release())));
    const metrics: DPOStepMetrics = {
      loss,
      rewardMargin: meanOrZero(joint.map((d) => c.dpoBeta * d)),
      accuracy: meanOrZero(joint.map((d) => (d > 0 ? 1 : 0))),
      agentDeltas: deltas.map((d) => meanOrZero(d)),
      gradNorms: steps.map((s) => s.gradNorm),
    };
    if (c.useEnvironmentStep) this.host.progress.envStep += c.environmentStepsPerPair * batch.length;
    // CoMLRL's MADPO logs the batch's candidate reward mean as the turn-1 reward and return.
    const rewardMean = meanOrZero(batch.map((p) => p.candidateRewardMean));
    this.host.logger?.logTrain(
      {
        "turn_1/reward_mean": rewardMean,
        "turn_1/expected_return": rewardMean,
        "dpo/loss": loss,
        "dpo/reward_margin": metrics.rewardMargin,
        "dpo/accuracy": metrics.accuracy,
        ...Object.fromEntries(metrics.agentDeltas.map((d, i) => [`dpo/agent_${i}/delta_mean`, d])),
      },
      this.host.progress.envStep,
    );
    return metrics;
  }
}
