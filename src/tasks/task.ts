// What a task is (a dataset, a shared reward, one formatter per agent, maybe a transition) and the small helpers
// every task module uses to read its options and serve its bundled items.
import type { ExternalTransition, Formatter, Item, RewardFunction } from "../rollout/types.js";

/** Which of a task's bundled items dataset() returns. */
export interface DatasetOptions {
  /** The split (default "train"). */
  split?: "train" | "eval";
  /** At most this many items (from the start: datasets are never shuffled). */
  limit?: number;
}

/** A built task: its dataset, shared reward, one formatter per agent and, for multi-turn tasks, the transition (getTask; docs/tasks-and-datasets.md). */
export interface TaskDefinition {
  /** The name it is registered under. */
  name: string;
  /** Agents the task is written for. */
  numAgents: number;
  /** One line on what the agents do and how they are rewarded. */
  description: string;
  /** The task's items (a fresh copy each call). */
  dataset(options?: DatasetOptions): Item[];
  /** The shared reward. */
  rewardFunc: RewardFunction;
  /** One formatter per agent. */
  formatters: Formatter[];
  /** The multi-turn transition; absent for single-turn tasks. */
  externalTransition?: ExternalTransition | null;
  /** The reward's [min, max] before any processor. */
  rewardRange?: [number, number];
}

/** Renders chat messages to prompt text; tasks whose prompts are chats take the tokenizer's template as an option. */
export type ChatTemplate = (messages: { role: string; content: string }[]) => string;

/** A task as registerTask takes it: a description, its options, and a factory for its definition. */
export interface TaskEntry {
  /** One line on what the task is, shown by listTasks. */
  description: string;
  /** Every option the task accepts, with what it means (shown when an unknown one is given). */
  options: Record<string, string>;
  /** Builds the task from the caller's options. */
  create(options: Record<string, unknown>): Omit<TaskDefinition, "name" | "description">;
}

/** The value of an option that must be one of `allowed`, or `fallback` when absent. */
export function choiceOption<T extends string>(task: string, options: Record<string, unknown>, key: string, allowed: readonly T[], fallback: T): T {
  const value = options[key];
  if (value === undefined) return fallback;
  if (typeof value !== "string" || !(allowed as readonly string[]).includes(value)) {
    throw new Error(`task "${task}": option ${key} must be one of ${allowed.map((a) => `"${a}"`).join(", ")}, got ${JSON.stringify(value)}`);
  }
  return value as T;
}

export function booleanOption(task: string, options: Record<string, unknown>, key: string, fallback: boolean): boolean {
  const value = options[key];
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") throw new Error(`task "${task}": option ${key} must be true or false, got ${JSON.stringify(value)}`);
  return value;
}

export function positiveNumberOption(task: string, options: Record<string, unknown>, key: string, fallback: number): number {
  const value = options[key];
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) throw new Error(`task "${task}": option ${key} must be a positive number, got ${JSON.stringify(value)}`);
  return value;
}

/** The chat template option, or one that writes each message as "role: content" lines when none is given. */
export function chatTemplateOption(task: string, options: Record<string, unknown>): ChatTemplate {
  const value = options.chatTemplate;
  if (value === undefined) return (messages) => messages.map((m) => `${m.role}: ${m.content}`).join("\n") + "\nassistant:";
  if (typeof value !== "function") throw new Error(`task "${task}": option chatTemplate must be a function (messages) => string`);
  return value as ChatTemplate;
}

/** A dataset function over a fixed list of items, honouring split and limit. */
export function bundledDataset(task: string, splits: { train: Item[]; eval: Item[] }): (options?: DatasetOptions) => Item[] {
  return ({ split = "train", limit }: DatasetOptions = {}) => {
    const items = splits[split];
    if (!items) throw new Error(`task "${task}": unknown split ${JSON.stringify(split)} (train or eval)`);
    if (limit !== undefined && (!Number.isInteger(limit) || limit < 1)) throw new Error(`task "${task}": dataset limit must be a positive integer, got ${limit}`);
    return items.slice(0, limit).map((item) => ({ ...item }));
  };
}

/** Splits bundled items into train and eval: the last quarter (at least one item) is held out for eval. */
export function heldOut(items: Item[]): { train: Item[]; eval: Item[] } {
  const evalCount = Math.max(1, Math.floor(items.length / 4));
  return { train: items.slice(0, items.length - evalCount), eval: items.slice(items.length - evalCount) };
}

export const CHAT_TEMPLATE_OPTION = "function (messages) => string: the agents' tokenizer's chat template; default plain 'role: content' lines";

