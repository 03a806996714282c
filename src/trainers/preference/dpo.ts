// MADPO's loss (COMLRL-SPEC §6.2): reference-free DPO on the joint policy, factorised over agents. For pair p,
// Δ_k = log π_k(w_k|x_k) − log π_k(l_k|x_k) (sums over every completion token) and the joint Δ_p = Σ_k Δ_k. Agent i
// minimises loss_i = mean_p −log σ(β Δ_p) with its own Δ_i carrying the gradient and the others' detached, so
//   ∇θ_i loss_i = mean_p −β σ(−β Δ_p) (∇ log π_i(w_i) − ∇ log π_i(l_i)),
// a policy gradient with weight β σ(−β Δ_p)/|B| on the winner and its negative on the loser.
import type { Agent } from "../agents.js";
import { forEachAgent } from "../../rollout/tree.js";
import type { PreferencePair } from "./pairs.js";

/** −log σ(x), computed without overflow. */
export function negLogSigmoid(x: number): number {
  return x >= 0 ? Math.log1p(Math.exp(-x)) : -x + Math.log1p(Math.exp(x));
}

export function sigmoid(x: number): number {
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

/** Δ_i per pair for every agent, from one scoring pass per agent (no gradients). */
export async function agentDeltas(agents: readonly Agent[], batch: readonly PreferencePair[], concurrent: boolean): Promise<number[][]> {
  return forEachAgent(agents.length, concurrent, async (i) => {
    const { prompts, completions } = rows(i, batch);
    const { sum } = await agents[i].model.score(prompts, completions);
    return batch.map((_, p) => sum[p] - sum[batch.length + p]);
  });
}

/** Accumulates agent's gradient of mean_p −log σ(β Δ_p) (its own Δ with gradient) in one batched backward. */
export async function dpoBackward(agent: Agent, batch: readonly PreferencePair[], winnerWeights: readonly number[]): Promise<void> {
  const { prompts, completions } = rows(agent.index, batch);
  await agent.model.policyGradientBackward(prompts, completions, [...winnerWeights, ...winnerWeights.map((w) => -w)]);
}
