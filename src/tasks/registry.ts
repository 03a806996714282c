// The named tasks `comlrl train --config` and the examples build on, looked up by name and built from task options.
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "./cover-vowels.js";
import { CODE_REWARD_MAX, codeFormatters, codingEnvironment, type CodeTransitionMode } from "./coding.js";
import { arxivAbstracts } from "./data/arxiv-abstracts.js";
import { coopHumanEvalProblems } from "./data/coophumaneval.js";
import { humanEvalProblems } from "./data/humaneval.js";
import { paragraphs } from "./data/paragraphs.js";
import { storyPrompts } from "./data/story-prompts.js";
import { tldrPosts } from "./data/tldr-posts.js";
import {
  storyLengthRatioFormatters,
  storyLengthRatioRewardFunc,
  tldrDualLengthFormatters,
  tldrDualLengthRewardFunc,
} from "./length-ratio.js";
import { paragraphSummaryFormatters, paragraphSummaryRewardFunc } from "./paragraph-summary.js";
import { closestField } from "../config/fields.js";
import type { Formatter, Item, RewardFunction } from "../rollout/types.js";
import type { SandboxMode } from "../sandbox/sandbox.js";
import {
  booleanOption,
  bundledDataset,
  CHAT_TEMPLATE_OPTION,
  chatTemplateOption,
  choiceOption,
  heldOut,
  positiveNumberOption,
  type TaskDefinition,
  type TaskEntry,
} from "./task.js";
import { vowelRelayDataset, vowelRelayFormatters, vowelRelayReward, vowelRelayTransition } from "./vowel-relay.js";
import { ARXIV_REWARD, arxivFormatters, TLDR_REWARD, tldrFormatters, writingRewardFunc, type WritingRewardSpec } from "./writing.js";

export type { ChatTemplate, DatasetOptions, TaskDefinition, TaskEntry } from "./task.js";

const coverVowelsTask: TaskEntry = {
  description: "The demo task: two writers each contribute three letters and share the fraction of the five vowels covered.",
  options: { chatTemplate: CHAT_TEMPLATE_OPTION },
  create: (options) => {
    const all = coverVowelsDataset(16);
    return {
      numAgents: 2,
      dataset: bundledDataset("cover-vowels", { train: all, eval: all.slice(0, 8) }),
      rewardFunc: coverVowelsRewardFunc,
      formatters: coverVowelsFormatters(chatTemplateOption("cover-vowels", options)),
      externalTransition: null,
      rewardRange: [0, 1],
    };
  },
};

const paragraphSummaryTask: TaskEntry = {
  description: "Writing for a small instruct model: a one-sentence summary of a paragraph and a detailed account of it; reward in [0, 1].",
  options: { chatTemplate: CHAT_TEMPLATE_OPTION },
  create: (options) => ({
    numAgents: 2,
    dataset: bundledDataset("paragraph-summary", heldOut(paragraphs)),
    rewardFunc: paragraphSummaryRewardFunc,
    formatters: paragraphSummaryFormatters(chatTemplateOption("paragraph-summary", options)),
    externalTransition: null,
    rewardRange: [0, 1],
  }),
};

const writingTask = (name: string, description: string, items: Item[], spec: WritingRewardSpec, formatters: Formatter[]): TaskEntry => ({
  description,
  options: {},
  create: () => ({
    numAgents: 2,
    dataset: bundledDataset(name, heldOut(items)),
    rewardFunc: writingRewardFunc(spec),
    formatters,
    externalTransition: null,
    rewardRange: [0, 3],
  }),
});

const lengthTask = (name: string, description: string, items: Item[], rewardFunc: RewardFunction, formatters: Formatter[], rewardRange: [number, number]): TaskEntry => ({
  description,
  options: {},
  create: () => ({ numAgents: 2, dataset: bundledDataset(name, heldOut(items)), rewardFunc, formatters, externalTransition: null, rewardRange }),
});

const codingTask = (name: string, description: string, items: Item[]): TaskEntry => ({
  description,
  options: {
    mode: 'multi-turn transition: "level_feedback" (default; syntax and test diagnostics fed back) or "plain" (previous code, "revise")',
    shift: "true: subtract 4, so the reward lies in [-4, 0] (default false: [0, 4])",
    sandbox: '"bwrap" (default: contained) or "none" (runs model code unconfined on this machine; an explicit opt-out)',
    testTimeoutMs: "each test's timeout in ms (default 10000)",
    maxTimeouts: "timed-out tests after which the rest are skipped (default 3)",
    strictTests: "true (default): asserts the grader cannot split, run in the code's own process where it could forge them, score 0; false counts them",
  },
  create: (options) => {
    const shift = booleanOption(name, options, "shift", false);
    const environment = codingEnvironment({
      mode: choiceOption<CodeTransitionMode>(name, options, "mode", ["level_feedback", "plain"], "level_feedback"),
      shift,
      sandbox: choiceOption<SandboxMode>(name, options, "sandbox", ["bwrap", "none"], "bwrap"),
      testTimeoutMs: positiveNumberOption(name, options, "testTimeoutMs", 10_000),
      maxTimeouts: positiveNumberOption(name, options, "maxTimeouts", 3),
      strictTests: booleanOption(name, options, "strictTests", true),
    });
    return {
      numAgents: 2,
      dataset: bundledDataset(name, heldOut(items)),
      rewardFunc: environment.rewardFunc,
      formatters: codeFormatters,
      externalTransition: environment.externalTransition,
      rewardRange: shift ? [-CODE_REWARD_MAX, 0] : [0, CODE_REWARD_MAX],
    };
  },
});

const vowelRelayTask: TaskEntry = {
  description: "Multi-turn, sparse: two writers add one letter per round, rewarded only after the last round by the vowels covered.",
  options: { turns: "rounds per episode (default 3; the reward comes after the last)" },
  create: (options) => {
    const turns = positiveNumberOption("vowel-relay", options, "turns", 3);
    if (!Number.isInteger(turns) || turns < 2) throw new Error(`task "vowel-relay": option turns must be an integer ≥ 2, got ${turns}`);
    const all = vowelRelayDataset(16);
    return {
      numAgents: 2,
      dataset: bundledDataset("vowel-relay", { train: all, eval: all.slice(0, 8) }),
      rewardFunc: vowelRelayReward(turns),
      formatters: vowelRelayFormatters,
      externalTransition: vowelRelayTransition,
      rewardRange: [0, 1],
    };
  },
};

const registry = new Map<string, TaskEntry>();

/** Adds a task under a name; a second task under the same name is a programming error. */
export function registerTask(name: string, entry: TaskEntry): void {
  if (registry.has(name)) throw new Error(`task "${name}" is already registered`);
  registry.set(name, entry);
}

/** The names of the registered tasks, sorted. */
export function listTasks(): string[] {
  return [...registry.keys()].sort();
}

/** The options the task called `name` accepts, each with what it means (the docs' task table lists them). */
export function taskOptions(name: string): Readonly<Record<string, string>> {
  const entry = registry.get(name);
  if (!entry) throw new Error(`unknown task "${name}"; known tasks: ${listTasks().join(", ")}`);
  return entry.options;
}

/** The task called `name`, built with `options`; an unknown name or option is an error listing the known ones. */
export function getTask(name: string, options: Record<string, unknown> = {}): TaskDefinition {
  const entry = registry.get(name);
  if (!entry) {
    const suggestion = closestField(name, listTasks());
    throw new Error(`unknown task "${name}"${suggestion ? ` (did you mean "${suggestion}"?)` : ""}; known tasks: ${listTasks().join(", ")}`);
  }
  for (const key of Object.keys(options)) {
    if (!Object.hasOwn(entry.options, key)) {
      const known = Object.entries(entry.options).map(([k, meaning]) => `${k} (${meaning})`);
      throw new Error(`task "${name}" has no option "${key}"; its options: ${known.length > 0 ? known.join("; ") : "none"}`);
    }
  }
  return { name, description: entry.description, ...entry.create(options) };
}


registerTask("cover-vowels", coverVowelsTask);
registerTask("vowel-relay", vowelRelayTask);
registerTask(
  "tldr",
  writingTask("tldr", "Writing/TLDR: a concise summary and a detailed expansion of a post; level-gated reward, max 3.", tldrPosts, TLDR_REWARD, tldrFormatters),
);
registerTask(
  "arxiv",
  writingTask("arxiv", "Writing/arXiv expansion: background and motivation, then methodology and implications, from an abstract; level-gated reward, max 3.", arxivAbstracts, ARXIV_REWARD, arxivFormatters),
);
registerTask("paragraph-summary", paragraphSummaryTask);
registerTask(
  "humaneval",
  codingTask("humaneval", "Coding/HumanEval: an aux agent writes a helper, a main agent the entry point; level-structured reward, max 4, tests run sandboxed.", humanEvalProblems),
);
registerTask(
  "coophumaneval",
  codingTask("coophumaneval", "Coding/CoopHumanEval: problems that split into a helper and a main function; the HumanEval reward, max 4, tests run sandboxed.", coopHumanEvalProblems),
);
registerTask(
  "story-len-ratio",
  lengthTask("story-len-ratio", "Two stories, the second 2–3× as long as the first (1 in the band, exp(−distance) outside).", storyPrompts, storyLengthRatioRewardFunc, storyLengthRatioFormatters, [0, 1]),
);
registerTask(
  "tldr-len-ratio",
  lengthTask("tldr-len-ratio", "A ~220-character summary and a detailed one 2–3× longer; reward in [−1, 1].", tldrPosts, tldrDualLengthRewardFunc, tldrDualLengthFormatters, [-1, 1]),
);
