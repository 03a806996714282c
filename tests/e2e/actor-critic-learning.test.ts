// IAC (separate critics and shared heads, V and Q) and MAAC learn the demo task: two writers raise their shared
// reward past what one can earn alone (cover the vowels, src/tasks/cover-vowels.ts) on a tiny model, on CPU.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { IACConfigInput, MAACConfigInput } from "../../src/config/index.js";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc, SOLO_CEILING } from "../../src/tasks/cover-vowels.js";
import { IACTrainer } from "../../src/trainers/actor-critic/iac.js";
import { MAACTrainer } from "../../src/trainers/actor-critic/maac.js";
import type { ActorCriticOptions } from "../../src/trainers/actor-critic/learner.js";
import { expectRise } from "../support/learning.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-ac-learn-"));
const base = path.join(scratch, "base");
let tokenizer: ComlrlTokenizer;
beforeAll(async () => {
  tokenizer = await createTinyModel(base, { seed: 7, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
});

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Fields both IAC and MAAC take, so that one options builder serves both trainers. */
type SharedConfig = IACConfigInput & MAACConfigInput;

function options(config: SharedConfig, criticModel: string | null = base): ActorCriticOptions<SharedConfig> {
  return {
    agentModel: base,
    criticModel,
    numAgents: 2,
    rewardFunc: coverVowelsRewardFunc,
    formatters: coverVowelsFormatters((m) => tokenizer.applyChatTemplate(m, { addGenerationPrompt: true })),
    trainDataset: coverVowelsDataset(16),
    outputDir: path.join(scratch, `run-${Math.random().toString(36).slice(2)}`),
    quiet: true,
    config: { numTurns: 1, numTrainEpochs: 15, numGenerations: 8, maxNewTokens: 4, temperature: 1, topP: 1, topK: 0, agentLearningRate: 3e-3, criticLearningRate: 3e-3, rolloutBufferSize: 16, evalInterval: 0, seed: 7, ...config },
  };
}

async function learns(trainer: IACTrainer | MAACTrainer, label: string): Promise<void> {
  await trainer.train();
  await trainer.close();
  const rewards = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl")).flatMap((r) => (r.kind === "train" && typeof r["turn_1/reward_mean"] === "number" ? [r["turn_1/reward_mean"] as number] : []));
  const first = mean(rewards.slice(0, 10));
  const last = mean(rewards.slice(-10));
  expectRise(`${label} (cover-the-vowels, ${rewards.length} updates)`, first, last, 0.2);
  expect(last).toBeGreaterThan(SOLO_CEILING);
}

describe("actor-critic trainers learn the cooperative task", () => {
  it("IAC with separate V critics", async () => {
    await learns(await IACTrainer.create(options({ criticType: "v" })), "IAC separate V");
  }, 300_000);

  it("IAC with value heads on the actors, Q readouts", async () => {
    await learns(await IACTrainer.create(options({ criticType: "q", useSeparateCritic: false }, null)), "IAC shared Q");
  }, 300_000);

  it("MAAC with a centralized V critic", async () => {
    await learns(await MAACTrainer.create(options({ criticType: "v" })), "MAAC V");
  }, 300_000);
});
