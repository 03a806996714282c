// Prompts bounded by the model's positions and the tokenizer's model_max_length: truncated from the tokenizer's
// truncation side by default (CoMLRL tokenizes with truncation), refused naming the item and agent under
// promptOverflow "error". A prompt past max_position_embeddings once sampled and trained silently past the
// positions; a 2 MB one asked for terabytes of attention scores.
import { readFileSync, writeFileSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-prompt-length-"));
const tiny = path.join(scratch, "tiny");
const POSITIONS = 64;
const long = "a long prompt about vowels and consonants, ".repeat(200);
let tokenizer: ComlrlTokenizer;

beforeAll(async () => {
  tokenizer = await createTinyModel(tiny, { seed: 3, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
  const config = JSON.parse(readFileSync(path.join(tiny, "config.json"), "utf8"));
  writeFileSync(path.join(tiny, "config.json"), JSON.stringify({ ...config, max_position_embeddings: POSITIONS }));
});

const create = (config: Record<string, unknown>) =>
  MAGRPOTrainer.create({
    agents: [tiny, tiny], rewardFunc: coverVowelsRewardFunc, trainDataset: [{ prompt: "short" }, { prompt: long }], quiet: true, outputDir: path.join(scratch, "out"),
    config: { numTurns: 1, numGenerations: 2, maxNewTokens: 8, numTrainEpochs: 1, evalInterval: 0, ...config },
  });

describe("prompt length", () => {
  it("truncates by default to what max_position_embeddings leave after maxNewTokens, from the tokenizer's truncation side", async () => {
    const trainer = await create({});
    try {
      const full = tokenizer.encode(long);
      expect(full.length).toBeGreaterThan(POSITIONS);
      const sampled = await trainer.agents[0]!.sample([long, "short"], 2);
      expect(sampled.promptIds[0]).toEqual(full.slice(0, POSITIONS - 8));
      expect(sampled.promptIds[1]).toEqual(tokenizer.encode("short"));
      // A 2 MB prompt is cut like any other, not turned into a 2-million-token attention.
      const huge = await trainer.agents[0]!.sample(["x".repeat(2 * 2 ** 20)], 2);
      expect(huge.promptIds[0]!.length).toBe(POSITIONS - 8);
    } finally {
      await trainer.close();
    }
  }, 60_000);

  it("maxPromptTokens sets a smaller limit", async () => {
    const trainer = await create({ maxPromptTokens: 20 });
    try {
      expect((await trainer.agents[0]!.sample([long], 2)).promptIds[0]).toEqual(tokenizer.encode(long).slice(0, 20));
    } finally {
      await trainer.close();
    }
  }, 60_000);

  it('promptOverflow "error" stops the run at the item, naming it, the agent and the limit', async () => {
    const trainer = await create({ promptOverflow: "error" });
    try {
      // A rollout buffer's items are sampled in one call (items 0–1 here), so the error names the items of that call.
      await expect(trainer.train()).rejects.toThrow(
        new RegExp(`^items 0–1, agent 0, turn 1: the prompt of ${tokenizer.encode(long).length} tokens \\("a long prompt about vowels.*"…\\) is over the 56 a prompt may have \\(max_position_embeddings 64 − maxNewTokens 8\\); shorten it, or set promptOverflow "truncate"$`),
      );
    } finally {
      await trainer.close();
    }
  }, 60_000);

  it("a maxNewTokens that leaves no position for a prompt is an error naming both", async () => {
    const trainer = await create({ maxNewTokens: POSITIONS });
    try {
      await expect(trainer.agents[0]!.sample(["short"], 2)).rejects.toThrow("maxNewTokens 64 leaves no position for a prompt: the model has max_position_embeddings 64");
    } finally {
      await trainer.close();
    }
  }, 60_000);

  it("the config refuses a promptOverflow it does not know", async () => {
    await expect(create({ promptOverflow: "drop" })).rejects.toThrow(/promptOverflow must be one of "truncate", "error"/);
  });
});
