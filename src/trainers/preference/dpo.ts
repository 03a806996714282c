// MADPO's loss (COMLRL-SPEC §6.2): reference-free DPO on the joint policy, factorised over agents. For pair p,
// Δ_k = log π_k(w_k|x_k) − log π_k(l_k|x_k) (sums over every completion token) and the joint Δ_p = Σ_k Δ_k. Agent i
// minimises loss_i = mean_p −log σ(β Δ_p) with its own Δ_i carrying the gradient and the others' detached, so
//   ∇θ_i loss_i = mean_p −β σ(−β Δ_p) (∇ log π_i(w_i) − ∇ log π_i(l_i)),
// a policy gradient with weight β σ(−β Δ_p)/|B| on the winner and its negative on the loser.
import { allOrFree, type Agent } from "../agents.js";
import { forEachAgent } from "../../rollout/tree.js";
import type { PreferencePair } from "./pairs.js";

/** −log σ(x), computed without overflow. */
export function negLogSigmoid(x: number): number {
  return x >= 0 ? Math.log1p(Math.exp(-x)) : -x + Math.log1p(Math.exp(x));
}

function sigmoid(x: number): number {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

/** The loss mean_p −log σ(β Δ_p) and each pair's winner weight β σ(−β Δ_p)/|B| for policyGradientBackward. */
export function dpoObjective(jointDeltas: readonly number[], beta: number): { loss: number; winnerWeights: number[] } {
  const n = jointDeltas.length;
  return {
    loss: jointDeltas.reduce((sum, d) => sum + negLogSigmoid(beta * d), 0) / n,
    winnerWeights: jointDeltas.map((d) => (beta * sigmoid(-beta * d)) / n),
  };
}

/** One agent's rows of a pair batch: winners first, then losers, each with its prompt. */
function rows(agent: number, batch: readonly PreferencePair[]) {
  const prompts = batch.map((p) => p.promptIds[agent]);
  return { prompts: [...prompts, ...prompts], completions: [...batch.map((p) => p.winnerIds[agent]), ...batch.map((p) => p.loserIds[agent])] };
}

/** Per pair, Δ = log π(winner) − log π(loser) from the sums of rows(): winners first, then losers. */
function deltasOf(sums: Float32Array, pairs: number): number[] {
  return Array.from({ length: pairs }, (_, p) => sums[p] - sums[pairs + p]);
}

/** rows()' policy-gradient weights: each pair's winner weight on its winner, its negative on its loser. */
function rowWeights(winnerWeights: readonly number[]): number[] {
  return [...winnerWeights, ...winnerWeights.map((w) => -w)];
}

/** One agent's scoring of a pair batch: its Δ_i per pair, and the backward of its loss once the winner weights are known. */
export interface AgentScoring {
  deltas: number[];
  backward(winnerWeights: readonly number[]): Promise<void>;
  /** Frees a kept scoring graph whose backward will not run (nothing after the backward). */
  release(): Promise<void>;
}

/**
 * Every agent's Δ_i per pair, from one scoring pass per agent. Agents updating at the same time hold every agent's
 * activations at once anyway, so each keeps its scoring graph for its backward, which then runs no forward of its
 * own. Agents in turn would hold all of them only for that: each frees its graph once scored, and its backward runs
 * the forward again, so that one agent's activations live at a time. The scoring runs the autograd path in either
 * case, so that agents on lanes and agents in turn compute the same Δ and gradients to the bit.
 */
export async function scoreAgents(agents: readonly Agent[], batch: readonly PreferencePair[], concurrent: boolean): Promise<AgentScoring[]> {
  const score = async (i: number): Promise<AgentScoring> => {
    const { prompts, completions } = rows(i, batch);
    const scored = await agents[i].model.scoreForBackward(prompts, completions, concurrent);
    return {
      deltas: deltasOf(scored.sum, batch.length),
      backward: async (winnerWeights) => {
        await scored.policyGradientBackward(rowWeights(winnerWeights));
      },
      release: () => scored.release(),
    };
  };
  if (!concurrent) return forEachAgent(agents.length, false, score);
  // Kept graphs: when one agent's scoring fails, the others' are freed before the failure is thrown. A failed release
  // leaves its graph to the garbage collector; the scoring failure is the error to report.
  return allOrFree(agents.map((_, i) => score(i)), (scoring) => void scoring.release().catch(() => undefined));
}

/** Accumulates agent's gradient of mean_p −log σ(β Δ_p) (its own Δ with gradient) in one batched backward. */
export async function dpoBackward(agent: Agent, batch: readonly PreferencePair[], winnerWeights: readonly number[]): Promise<void> {
  const { prompts, completions } = rows(agent.index, batch);
  await agent.model.policyGradientBackward(prompts, completions, rowWeights(winnerWeights));
}
