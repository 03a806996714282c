// IAC (separate critics and shared heads, V and Q), MAAC and MAPPO learn the demo task: two writers raise their
// shared reward past what one can earn alone (cover the vowels, src/tasks/cover-vowels.ts) on a tiny model, on CPU;
// and MAPPO learns it as well as MAAC or better over 4 seeds (the figures are in docs/learning-parity.md).
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
import { MAPPOTrainer } from "../../src/trainers/actor-critic/mappo.js";
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

/** Trains, closes, and returns the mean reward of the run's first and last 10 updates. */
async function rewards(trainer: IACTrainer | MAACTrainer | MAPPOTrainer): Promise<{ first: number; last: number; updates: number }> {
  await trainer.train();
  await trainer.close();
  const perUpdate = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl")).flatMap((r) => (r.kind === "train" && typeof r["turn_1/reward_mean"] === "number" ? [r["turn_1/reward_mean"] as number] : []));
  return { first: mean(perUpdate.slice(0, 10)), last: mean(perUpdate.slice(-10)), updates: perUpdate.length };
}

async function learns(trainer: IACTrainer | MAACTrainer | MAPPOTrainer, label: string): Promise<number> {
  const { first, last, updates } = await rewards(trainer);
  expectRise(`${label} (cover-the-vowels, ${updates} updates)`, first, last, 0.2);
  expect(last).toBeGreaterThan(SOLO_CEILING);
  return last;
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

describe("MAPPO against MAAC", () => {
  const seeds = [1, 2, 3, 4];
  const standardError = (xs: number[]) => Math.sqrt(xs.reduce((a, x) => a + (x - mean(xs)) ** 2, 0) / (xs.length - 1) / xs.length);

  it(`MAPPO (its defaults: 4 passes, the clipped ratio and value loss) learns as well as MAAC or better, seeds ${seeds.join(", ")}`, async () => {
    const maac: number[] = [];
    const mappo: number[] = [];
    for (const seed of seeds) {
      maac.push((await rewards(await MAACTrainer.create(options({ criticType: "v", seed })))).last);
      mappo.push(await learns(await MAPPOTrainer.create(options({ criticType: "v", seed })), `MAPPO V, seed ${seed}`));
    }
    const show = (xs: number[]) => `${mean(xs).toFixed(3)} ± ${standardError(xs).toFixed(3)} (${xs.map((x) => x.toFixed(3)).join(", ")})`;
    console.log(`end reward (last 10 updates), seeds ${seeds.join(", ")}: MAAC ${show(maac)}; MAPPO ${show(mappo)}`);
    expect(mean(mappo)).toBeGreaterThanOrEqual(mean(maac));
  }, 900_000);
});
