// The Dec-POMDP vocabulary shared by rollouts and trainers: items, formatters, rewards, transitions, samples.

/** A dataset item: a plain object. `prompt` is the conventional field the default formatter and transitions use. */
export type Item = Record<string, unknown>;

/** Maps an item (and, from turn 2 on, the transition's prompt) to one agent's prompt text. */
export type Formatter = (item: Item, externalPrompt?: string) => string;

/** What a reward function is told besides the completions: the item, turn and each agent's prompts and history. */
export interface RewardContext {
  /** Index of the item in its dataset. */
  itemIndex: number;
  /** The item itself. */
  item: Item;
  /** 0-based turn. */
  turn: number;
  /** Each agent's prompt at this node. */
  prompts: string[];
  /** Per agent, the prompts and responses of earlier turns along this branch. */
  promptHistory: string[][];
  /** Per agent, its responses of earlier turns along this branch. */
  responseHistory: string[][];
}

/**
 * The shared reward: completions[agent][j] is agent's part of joint action j; returns one number per joint action.
 * Called once per node with all of its joint actions (or once per joint action, see `rewardBatching`).
 */
export type RewardFunction = (completions: string[][], context: RewardContext) => number[] | number | Promise<number[] | number>;

/** Maps a reward before training (RewardProcessors has the usual ones). */
export type RewardProcessor = (reward: number) => number;

/** What an external transition receives after a turn, for one joint action. */
export interface TransitionInput {
  /** The item's prompt field ("" when it is not a string). */
  prompt: string;
  /** Each agent's completion in this joint action. */
  agentCompletions: string[];
  /** The agent count. */
  numAgents: number;
  /** Per agent, the prompts of every turn so far on this branch, the one just completed included. */
  promptHistoryPerAgent: string[][];
  /** Per agent, its responses of every turn so far on this branch. */
  responseHistoryPerAgent: string[][];
  /** The dataset item. */
  item: Item;
}

/** Produces each agent's next-turn prompt from the branch so far (feedback, role swap, "revise your answer"). */
export type ExternalTransition = (input: TransitionInput) => string[] | Promise<string[]>;

/** Log-probs of sampled tokens under the policy's own distribution (before temperature, top-k, top-p). */
export interface SamplerLogprobs {
  /** One array per completion, one log-prob per completion token. */
  readonly policy: Float32Array[];
  /** One array per completion: the log-probs under the distribution sampled from, after temperature and filtering. */
  readonly processed: Float32Array[];
  /** The agent's optimizer steps when they were sampled: equal to the current count, the trainer's parameters are the sampler's. */
  readonly updates: number;
}

/** What one agent trains on from one node: its prompt, its K completions and their credited returns. */
export interface NodeSample {
  /** The agent (0-based). */
  agent: number;
  /** The turn (0-based). */
  turn: number;
  /** The prompt's token ids. */
  promptIds: number[];
  /** The K completions' token ids. */
  completionIds: Int32Array[];
  /** The credited return of each completion. */
  returns: number[];
  /** Per completion Σ_t k3 KL to the reference (zeros when reference KL is off). */
  referenceKl: number[];
  /** The sampler's log-probs of the completion tokens, when the agent records them (clipped-ratio objectives). */
  samplerLogprobs?: SamplerLogprobs;
  /** Mean immediate reward of the node's joint actions. */
  nodeMeanReward: number;
  /** Mean return of the node's joint actions. */
  nodeMeanReturn: number;
  /** The env-step counter when the node was expanded. */
  envStep: number;
}
