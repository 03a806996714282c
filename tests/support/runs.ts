// What the end-to-end trainer tests share around their runs: a scratch folder with a tiny base model, made once per
// test file, fresh folders inside it for every run, and the options of a task played by two agents of that model.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll } from "vitest";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import type { Formatter, Item, RewardFunction } from "../../src/rollout/types.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";

/** The preference tests' settings for a quick run: 4 new tokens sampled from the whole distribution, a step per 2 samples, every step logged. */
export const QUICK_PREFERENCE_RUN = { maxNewTokens: 4, temperature: 1, topP: 1, topK: 0, agentLearningRate: 1e-3, trainBatchSize: 2, loggingSteps: 1, seed: 3 } as const;

/** A task as the trainers' options give it. */
export interface TwoAgentTask {
  rewardFunc: RewardFunction;
  trainDataset: Item[];
  formatters?: Formatter | Formatter[];
  evalDataset?: Item[];
}

export interface TinyRuns {
  /** The test file's scratch folder. */
  readonly scratch: string;
  /** The base model's folder (written before the file's tests run). */
  readonly base: string;
  /** The base model's tokenizer (once the file's tests run). */
  readonly tokenizer: ComlrlTokenizer;
  /** A folder in the scratch folder that no other call names: `name-N`. */
  dir(name: string): string;
  /** Trainer options for `task` played by two agents of the base model, quiet, writing to a fresh folder. */
  twoAgents<T extends TwoAgentTask>(task: T): T & { agents: string[]; outputDir: string; quiet: true };
  /** The cover-vowels task on its first `items` items (and `evalItems` for evaluation), prompts in the chat template. */
  coverVowels(items: number, evalItems?: number): TwoAgentTask;
}

/** Registers a beforeAll that writes the base model with `makeBase` into a new scratch folder named after `prefix`. */
export function tinyRuns(prefix: string, makeBase: (dir: string) => Promise<ComlrlTokenizer>): TinyRuns {
  const scratch = mkdtempSync(path.join(tmpdir(), prefix));
  const base = path.join(scratch, "base");
  let tokenizer: ComlrlTokenizer | undefined;
  let made = 0;
  beforeAll(async () => {
    tokenizer = await makeBase(base);
  }, 60_000);
  const runs: TinyRuns = {
    scratch,
    base,
    get tokenizer() {
      if (!tokenizer) throw new Error("the base model is written in beforeAll: read the tokenizer inside a test");
      return tokenizer;
    },
    dir: (name) => path.join(scratch, `${name}-${made++}`),
    twoAgents: (task) => ({ agents: [base, base], ...task, outputDir: runs.dir("run"), quiet: true }),
    coverVowels: (items, evalItems) => ({
      rewardFunc: coverVowelsRewardFunc,
      formatters: coverVowelsFormatters((m) => runs.tokenizer.applyChatTemplate(m, { addGenerationPrompt: true })),
      trainDataset: coverVowelsDataset(items),
      ...(evalItems === undefined ? {} : { evalDataset: coverVowelsDataset(evalItems) }),
    }),
  };
  return runs;
}
