// From a rolled-out episode to actor-critic samples (COMLRL-SPEC §3.5): one sample per agent per completion, with the
// reward less the reference-KL penalty, the critic's old value, the TD(0) target y_t = r_t + γ·V_old(h_{t+1}) (the last
// turn's target is its reward) and the Monte-Carlo return, logged as a metric and undiscounted, as CoMLRL 1.4.3 logs
// it. Single-turn episodes have numGenerations completions at one node; multi-turn ones follow one completion per turn.
import type { Readout, ValueHead } from "../../models/value-head.js";
import type { RolloutNode } from "../../rollout/tree.js";
import { NonFiniteError } from "../lifecycle/stage-host.js";
import type { PolicyRow } from "../policy-loss.js";

/** The token ids a critic reads for one completion. */
export interface CriticRow {
  /** Token ids of the prompt the critic conditions on. */
  prompt: number[];
  /** Token ids of the completion being valued. */
  completion: Int32Array;
}

/** A critic row's completion where the critic values the prompt alone (a V critic, MAAC's joint text). */
export const NO_TOKENS = new Int32Array(0);

/** One agent's step of an actor-critic rollout: its prompt and completion, the reward, the critic's old value and the target. */
export interface ActorCriticSample {
  /** Index of the agent that wrote the completion. */
  agent: number;
  /** Zero-based turn of the episode. */
  turn: number;
  /** Index of the dataset item the episode was rolled out from. */
  itemIndex: number;
  /** Environment step counter at which the sample was collected. */
  envStep: number;
  /** Token ids of the agent's prompt. */
  promptIds: number[];
  /** Token ids of the agent's completion. */
  completionIds: Int32Array;
  /** The completion's decoded text. */
  completion: string;
  /** What the agent's critic reads for this completion. */
  critic: CriticRow;
  /** Reward from the environment (or the agent's own reward), before the KL penalty. */
  environmentReward: number;
  /** KL of the completion against the reference model; 0 without a reference. */
  referenceKl: number;
  /** environmentReward − coef · referenceKl: what the critic learns to predict. */
  reward: number;
  /** The critic's value of the sample before the update, without gradients. */
  oldValue: number;
  /** TD(0) target: reward + discount · next turn's old value (the last turn's target is its reward). */
  target: number;
  /** Undiscounted Monte-Carlo return from this turn on; logged only. */
  return: number;
  /** The sampler's log-probs of the completion, where the agent's objective records them (a clipped-ratio loss). */
  sampled?: PolicyRow["sampled"];
}

/** How a trainer's critics see an episode. */
export interface CriticView {
  /** The row the critic of `agent` reads for completion g at node. */
  row(node: RolloutNode, agent: number, g: number): CriticRow;
  /** Old values of agent's critic for rows, without gradients. */
  values(agent: number, rows: CriticRow[]): Promise<ArrayLike<number>>;
  /** One critic for every agent (MAAC): its values are asked once, for agent 0. */
  readonly shared: boolean;
}

/** The episode's nodes in turn order: the root, then (multi-turn) the single path of first children. */
function episodeNodes(root: RolloutNode): RolloutNode[] {
  const nodes: RolloutNode[] = [];
  for (let node: RolloutNode | null = root; node; node = node.children[0] ?? null) nodes.push(node);
  return nodes;
}

export async function actorCriticSamples(
  root: RolloutNode,
  itemIndex: number,
  critics: CriticView,
  settings: { numAgents: number; discount: number; referenceKlCoef: number },
): Promise<ActorCriticSample[]> {
  const nodes = episodeNodes(root);
  const width = root.completionIds[0].length;
  const agents = Array.from({ length: settings.numAgents }, (_, i) => i);
  const rows = agents.map((agent) => nodes.flatMap((node) => Array.from({ length: width }, (_, g) => critics.row(node, agent, g))));
  const shared = critics.shared ? await critics.values(0, rows[0]) : null;
  const values = await Promise.all(agents.map(async (agent) => Array.from(shared ?? (await critics.values(agent, rows[agent])))));
  const samples: ActorCriticSample[] = [];
  for (const agent of agents) {
    const valueAt = (t: number, g: number) => {
      const v = values[agent][t * width + g];
      if (!Number.isFinite(v)) throw new NonFiniteError(`the critic of agent ${agent} gave a non-finite value (${v}) at item ${itemIndex}, turn ${t + 1}`);
      return v;
    };
    for (let g = 0; g < width; g++) {
      let futureReturn = 0;
      const episode: ActorCriticSample[] = [];
      for (let t = nodes.length - 1; t >= 0; t--) {
        const node = nodes[t];
        const environmentReward = node.agentRewards ? node.agentRewards[agent][g] : node.rewards[g];
        const referenceKl = node.referenceKl[agent][g] ?? 0;
        const reward = environmentReward - settings.referenceKlCoef * referenceKl;
        futureReturn = reward + futureReturn; // only the TD target is discounted
        const target = t === nodes.length - 1 ? reward : reward + settings.discount * valueAt(t + 1, g);
        const recorded = node.samplerLogprobs?.[agent];
        episode.unshift({
          agent,
          turn: node.turn,
          itemIndex,
          envStep: node.envStep,
          promptIds: node.promptIds[agent],
          completionIds: node.completionIds[agent][g],
          completion: node.texts[agent][g],
          critic: rows[agent][t * width + g],
          environmentReward,
          referenceKl,
          reward,
          oldValue: valueAt(t, g),
          target,
          return: futureReturn,
          ...(recorded ? { sampled: { logprobs: recorded.policy[g], policySteps: recorded.updates } } : {}),
        });
      }
      samples.push(...episode);
    }
  }
  return samples;
}

/**
 * Old values of rows from one head, batched: V readouts of rows that share a prompt are computed once (the V critic
 * reads the prompt alone), Q readouts in one pass over all rows.
 */
export async function headValues(head: ValueHead, rows: CriticRow[], readout: Readout): Promise<number[]> {
  if (readout !== "v") return Array.from(await head.readout(rows.map((r) => r.prompt), rows.map((r) => r.completion), readout));
  const unique = new Map<string, number>();
  const prompts: number[][] = [];
  const index = rows.map((r) => {
    const key = r.prompt.join(",");
    if (!unique.has(key)) {
      unique.set(key, prompts.length);
      prompts.push(r.prompt);
    }
    return unique.get(key)!;
  });
  const values = await head.readout(prompts, prompts.map(() => new Int32Array(0)), "v");
  return index.map((i) => values[i]);
}
