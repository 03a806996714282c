// The MAGRPO rollout tree (COMLRL-SPEC §3.2): at every node each agent samples K completions for its prompt, joint
// actions are formed (aligned: K; cross: K^N), the shared reward scores them, and — unless the node's mean reward
// passes the early-termination threshold — every joint action spawns a child through the external transition.
// Nodes are expanded level by level so that all of a level's prompts go to each agent in one generation call; their
// env steps are numbered depth first afterwards, as CoMLRL's recursive expansion counts them.
import { formatPrompt } from "./formatters.js";
import { PromptLengthError } from "./prompt-length.js";
import { computeAgentRewards, computeRewards } from "./rewards.js";
import type { ExternalTransition, Formatter, Item, NodeSample, RewardFunction, RewardProcessor, SamplerLogprobs } from "./types.js";
import { mean } from "../util/mean.js";

/** What the tree needs from an agent: K samples for each of several prompts, and optionally KL to a reference. */
export interface RolloutPolicy {
  /** Samples k completions for each prompt. */
  sample(prompts: string[], k: number): Promise<SampledCompletions>;
  /** Per prompt and completion, the KL of the completion against the reference model. */
  referenceKl?(promptIds: number[][], completions: Int32Array[][]): Promise<number[][]>;
}

/** What a policy sampled: per prompt, its token ids and k completions as ids and text. */
export interface SampledCompletions {
  /** Each prompt's token ids. */
  promptIds: number[][];
  /** [prompt][k] */
  completionIds: Int32Array[][];
  /** Decoded completions, [prompt][k]. */
  texts: string[][];
  /** [prompt], when the policy records its log-probs. */
  logprobs?: SamplerLogprobs[];
}

export interface RolloutSettings {
  numGenerations: number;
  numTurns: number;
  jointMode: "aligned" | "cross";
  earlyTerminationThreshold: number | null;
  externalPromptPassthrough: boolean;
  rewardBatching: "node" | "jointAction";
  /**
   * Actor-critic rewards (aligned joint actions only): the reward function may give one value per agent too, kept
   * per agent in node.agentRewards; node.rewards is then their mean per joint action.
   */
  perAgentRewards?: boolean;
  /**
   * What the transition's prompt history records for the turns after the first: the formatted turn prompts (CoMLRL
   * 1.4.3's IAC and MAAC) instead of the transition's own prompts (its MAGRPO family; the default).
   */
  formattedPromptHistory?: boolean;
}

/** Where rollouts time their phases (a trainer's StageTimings). */
export interface RolloutTimer {
  /** Runs work, counting its seconds into phase. */
  time<T>(phase: "generation" | "referenceKl" | "reward", work: () => Promise<T>): Promise<T>;
}

/** Everything a rollout runs against: the agents' policies, their prompt formatters, the reward and the transition. */
export interface RolloutEnvironment {
  /** One policy per agent. */
  policies: RolloutPolicy[];
  /** One prompt formatter per agent. */
  formatters: Formatter[];
  /** Scores the joint actions. */
  rewardFunc: RewardFunction;
  /** Transforms raw rewards before they are used (scaling, clipping). */
  rewardProcessor: RewardProcessor;
  /** Builds the next turn's prompts in multi-turn rollouts; null for single-turn ones. */
  externalTransition: ExternalTransition | null;
  /** Runs the agents' generation calls together (agents on distinct devices) or one after another. */
  concurrent: boolean;
  /** Where rollouts time their phases; untimed without it. */
  timings?: RolloutTimer;
}

function timed<T>(timings: RolloutTimer | undefined, phase: Parameters<RolloutTimer["time"]>[0], work: () => Promise<T>): Promise<T> {
  return timings ? timings.time(phase, work) : work();
}

export interface RolloutNode {
  turn: number;
  /** Each agent's formatted prompt. */
  prompts: string[];
  /** What the history records for this turn: the root's formatted prompts, later the transition's raw prompts (or, with formattedPromptHistory, the formatted ones). */
  historyPrompts: string[];
  promptIds: number[][];
  /** [agent][k] */
  completionIds: Int32Array[][];
  texts: string[][];
  referenceKl: number[][];
  /** [agent], where that agent records its log-probs. */
  samplerLogprobs?: (SamplerLogprobs | undefined)[];
  /** [jointAction][agent] = index of that agent's completion. */
  jointActions: number[][];
  rewards: number[];
  /** [agent][jointAction] with perAgentRewards; null otherwise. */
  agentRewards: number[][] | null;
  returns: number[];
  /** children[j]: the node spawned by joint action j, or null (last turn or early termination). */
  children: (RolloutNode | null)[];
  envStep: number;
  promptHistory: string[][];
  responseHistory: string[][];
}

export interface Rollout {
  root: RolloutNode;
  envSteps: number;
  samples: NodeSample[];
}

function jointActionsFor(mode: "aligned" | "cross", numAgents: number, k: number): number[][] {
  if (numAgents === 1 || mode === "aligned") return Array.from({ length: k }, (_, j) => Array(numAgents).fill(j));
  let combos: number[][] = [[]];
  for (let agent = 0; agent < numAgents; agent++) combos = combos.flatMap((c) => Array.from({ length: k }, (_, i) => [...c, i]));
  return combos;
}

/** fn for agents 0..count−1, all at once (agents on distinct devices) or one after another; results in agent order. */
export async function forEachAgent<T>(count: number, concurrent: boolean, fn: (agent: number) => Promise<T>): Promise<T[]> {
  if (concurrent) return Promise.all(Array.from({ length: count }, (_, i) => fn(i)));
  const out: T[] = [];
  for (let i = 0; i < count; i++) out.push(await fn(i));
  return out;
}

/**
 * Samples the first-turn prompts of several items in one generation call per agent and returns, per item, an
 * environment whose policies answer that item's first-turn sample() from it (later turns, and any other call, go to
 * the agent's own policy). One call over the items of a rollout buffer streams each weight once per decode step for
 * all of their rows, where a call per item streams it once per item: decoding on a CPU is bound by that stream. Only
 * valid while the agents' parameters stay the same across the items (no update between them); the draws come from the
 * same streams as per-item calls, in another order.
 */
export async function presampleRoots(items: Item[], firstItemIndex: number, env: RolloutEnvironment, settings: RolloutSettings): Promise<RolloutEnvironment[]> {
  const numAgents = env.policies.length;
  const prompts = env.formatters.map((f, agent) => items.map((item) => formatPrompt(f, item, agent)));
  const sampled = await timed(env.timings, "generation", () =>
    forEachAgent(numAgents, env.concurrent, (agent) => env.policies[agent].sample(prompts[agent], settings.numGenerations).catch((error: unknown) => {
      if (error instanceof PromptLengthError) throw new PromptLengthError(`items ${firstItemIndex}–${firstItemIndex + items.length - 1}, agent ${agent}, turn 1: ${error.message}`);
      throw error;
    })),
  );
  return items.map((_, i) => ({
    ...env,
    policies: env.policies.map((policy, agent): RolloutPolicy => {
      const own: SampledCompletions = {
        promptIds: [sampled[agent].promptIds[i]],
        completionIds: [sampled[agent].completionIds[i]],
        texts: [sampled[agent].texts[i]],
        ...(sampled[agent].logprobs ? { logprobs: [sampled[agent].logprobs![i]] } : {}),
      };
      let unused = true;
      return {
        sample: (asked, k) => {
          if (unused && k === settings.numGenerations && asked.length === 1 && asked[0] === prompts[agent][i]) {
            unused = false;
            return Promise.resolve(own);
          }
          return policy.sample(asked, k);
        },
        ...(policy.referenceKl ? { referenceKl: policy.referenceKl.bind(policy) } : {}),
      };
    }),
  }));
}

interface PendingNode {
  turn: number;
  prompts: string[];
  historyPrompts: string[];
  promptHistory: string[][];
  responseHistory: string[][];
  attach: (node: RolloutNode) => void;
}

/** Builds the whole tree for one item; env steps are numbered from firstEnvStep + 1. */
export async function rolloutItem(item: Item, itemIndex: number, env: RolloutEnvironment, settings: RolloutSettings, firstEnvStep: number): Promise<Rollout> {
  const numAgents = env.policies.length;
  const k = settings.numGenerations;
  // Set by the first level's attach; a property, as the compiler does not follow a local assigned inside a closure.
  const made: { root?: RolloutNode } = {};
  const rootPrompts = env.formatters.map((f, agent) => formatPrompt(f, item, agent));
  let level: PendingNode[] = [
    {
      turn: 0,
      prompts: rootPrompts,
      historyPrompts: rootPrompts,
      promptHistory: Array.from({ length: numAgents }, () => []),
      responseHistory: Array.from({ length: numAgents }, () => []),
      attach: (node) => (made.root = node),
    },
  ];

  while (level.length > 0) {
    const sampled = await timed(env.timings, "generation", () =>
      forEachAgent(numAgents, env.concurrent, (agent) => env.policies[agent].sample(level.map((n) => n.prompts[agent]), k).catch((error: unknown) => {
        if (error instanceof PromptLengthError) throw new PromptLengthError(`item ${itemIndex}, agent ${agent}, turn ${level[0]!.turn + 1}: ${error.message}`);
        throw error;
      })),
    );
    const kls = await timed(env.timings, "referenceKl", () =>
      forEachAgent(numAgents, env.concurrent, async (agent) => {
        const policy = env.policies[agent];
        return policy.referenceKl ? policy.referenceKl(sampled[agent].promptIds, sampled[agent].completionIds) : level.map(() => Array(k).fill(0));
      }),
    );
    const next: PendingNode[] = [];
    for (let n = 0; n < level.length; n++) {
      const pending = level[n];
      const node: RolloutNode = {
        turn: pending.turn,
        prompts: pending.prompts,
        historyPrompts: pending.historyPrompts,
        promptIds: sampled.map((s) => s.promptIds[n]),
        completionIds: sampled.map((s) => s.completionIds[n]),
        texts: sampled.map((s) => s.texts[n]),
        referenceKl: kls.map((kl) => kl[n]),
        ...(sampled.some((s) => s.logprobs) ? { samplerLogprobs: sampled.map((s) => s.logprobs?.[n]) } : {}),
        jointActions: jointActionsFor(settings.jointMode, numAgents, k),
        rewards: [],
        agentRewards: null,
        returns: [],
        children: [],
        envStep: 0,
        promptHistory: pending.promptHistory,
        responseHistory: pending.responseHistory,
      };
      const jointTexts = Array.from({ length: numAgents }, (_, agent) => node.jointActions.map((ja) => node.texts[agent][ja[agent]]));
      const context = { itemIndex, item, turn: node.turn, prompts: node.prompts, promptHistory: node.promptHistory, responseHistory: node.responseHistory };
      if (settings.perAgentRewards) {
        if (settings.jointMode !== "aligned") throw new Error("per-agent rewards need aligned joint actions");
        const perAgent = await timed(env.timings, "reward", () => computeAgentRewards(env.rewardFunc, jointTexts, context, env.rewardProcessor));
        node.agentRewards = perAgent;
        node.rewards = node.jointActions.map((_, j) => mean(perAgent.map((r) => r[j])));
      } else {
        node.rewards = await timed(env.timings, "reward", () => computeRewards(env.rewardFunc, jointTexts, context, settings.rewardBatching, env.rewardProcessor));
      }
      node.children = node.jointActions.map(() => null);
      pending.attach(node);

      const terminated = settings.earlyTerminationThreshold !== null && mean(node.rewards) > settings.earlyTerminationThreshold;
      if (terminated || node.turn + 1 >= settings.numTurns) continue;
      if (!env.externalTransition) throw new Error("Multi-turn rollouts require an externalTransition");
      for (let j = 0; j < node.jointActions.length; j++) {
        const responses = jointTexts.map((texts) => texts[j]);
        const promptHistory = node.promptHistory.map((h, agent) => [...h, node.historyPrompts[agent]]);
        const responseHistory = node.responseHistory.map((h, agent) => [...h, responses[agent]]);
        const nextPrompts = await env.externalTransition({
          prompt: typeof item.prompt === "string" ? item.prompt : "",
          agentCompletions: responses,
          numAgents,
          promptHistoryPerAgent: promptHistory,
          responseHistoryPerAgent: responseHistory,
          item,
        });
        if (!Array.isArray(nextPrompts) || nextPrompts.length !== numAgents || nextPrompts.some((p) => typeof p !== "string")) {
          throw new Error(
            `External transition must return per-agent prompts: ${numAgents} strings expected at item ${itemIndex}, turn ${node.turn + 1}, joint action ${j}`,
          );
        }
        const prompts = nextPrompts.map((p, agent) =>
          settings.externalPromptPassthrough ? p : formatPrompt(env.formatters[agent], { ...item, prompt: p, _original_prompt: item.prompt }, agent, p),
        );
        next.push({
          turn: node.turn + 1,
          prompts,
          historyPrompts: settings.formattedPromptHistory ? prompts : nextPrompts,
          promptHistory,
          responseHistory,
          attach: (child) => (node.children[j] = child),
        });
      }
    }
    level = next;
  }

  const tree = made.root;
  if (!tree) throw new Error("rollout: the first turn made no root node");
  const lastEnvStep = numberEnvSteps(tree, firstEnvStep);
  computeReturns(tree);
  return { root: tree, envSteps: lastEnvStep - firstEnvStep, samples: collectSamples(tree, numAgents) };
}

/**
 * Numbers the nodes' env steps as CoMLRL counts them, depth first (a node, then its children's subtrees in order): a
 * node's step is the count of joint actions evaluated up to and including it. The tree is expanded level by level
 * (one generation call per level), so the steps are assigned once it is whole. Returns the last step.
 */
function numberEnvSteps(node: RolloutNode, before: number): number {
  node.envStep = before + node.jointActions.length;
  let step = node.envStep;
  for (const child of node.children) if (child) step = numberEnvSteps(child, step);
  return step;
}

/** Undiscounted returns: R_j = r_j + mean(returns of the node spawned by j), post-order. */
export function computeReturns(node: RolloutNode): void {
  node.returns = node.rewards.map((r, j) => {
    const child = node.children[j];
    if (!child) return r;
    computeReturns(child);
    return r + mean(child.returns);
  });
}

/** Per-agent credit: aligned gives completion k the return of joint action k; cross sums over combos using k. */
export function creditReturns(node: RolloutNode, agent: number, k: number): number[] {
  const credit = Array(k).fill(0);
  node.jointActions.forEach((ja, j) => (credit[ja[agent]] += node.returns[j]));
  return credit;
}

/** One sample per agent per node, post-order, as the spec's buffers receive them. */
function collectSamples(root: RolloutNode, numAgents: number): NodeSample[] {
  const samples: NodeSample[] = [];
  const visit = (node: RolloutNode) => {
    for (const child of node.children) if (child) visit(child);
    const k = node.completionIds[0].length;
    for (let agent = 0; agent < numAgents; agent++) {
      samples.push({
        agent,
        turn: node.turn,
        promptIds: node.promptIds[agent],
        completionIds: node.completionIds[agent],
        returns: creditReturns(node, agent, k),
        referenceKl: node.referenceKl[agent],
        ...(node.samplerLogprobs?.[agent] ? { samplerLogprobs: node.samplerLogprobs[agent] } : {}),
        nodeMeanReward: mean(node.rewards),
        nodeMeanReturn: mean(node.returns),
        envStep: node.envStep,
      });
    }
  };
  visit(root);
  return samples;
}

/** The root's completions as rows of a sample table: one per agent per joint action, with the shared reward. */
export function sampleRows(root: RolloutNode): Array<{ turn: number; agent: number; prompt: string; completion: string; reward: number }> {
  return root.jointActions.flatMap((ja, j) =>
    ja.map((k, agent) => ({ turn: root.turn + 1, agent, prompt: root.prompts[agent], completion: root.texts[agent][k], reward: root.rewards[j] })),
  );
}
