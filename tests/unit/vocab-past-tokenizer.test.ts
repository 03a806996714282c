// A model whose embedding table is larger than its tokenizer (Qwen2.5: 151,936 rows over 151,665 tokens) samples ids
// the tokenizer has no token for; they decode to nothing, as in transformers, and training goes on. Here the tiny
// model has twice its tokenizer's rows, so about half of what a random model samples is such an id.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { buildConfigJson } from "../../src/models/config.js";
import { buildByteLevelBpeTokenizer } from "../../src/models/tiny-tokenizer.js";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-vocab-"));
const dir = path.join(scratch, "padded");
let tokenizer: ComlrlTokenizer;

beforeAll(async () => {
  const files = buildByteLevelBpeTokenizer({ vocabSize: 512 });
  tokenizer = ComlrlTokenizer.fromJson({ tokenizerJson: files.tokenizerJson, tokenizerConfig: files.tokenizerConfig, source: dir });
  const shape = { vocabSize: 2 * tokenizer.vocabSize, hiddenSize: 32, intermediateSize: 64, numLayers: 1, numHeads: 2, numKvHeads: 1, ropeTheta: 1e4, rmsNormEps: 1e-6, tieWordEmbeddings: true };
  const config = buildConfigJson("qwen2", shape, { bosTokenId: tokenizer.bosTokenId, eosTokenId: tokenizer.eosTokenIds[0]!, padTokenId: tokenizer.padTokenId });
  const model = CausalLM.create(config, { seed: 3 });
  await model.save(dir, { tokenizer });
  model.dispose();
});

describe("a vocabulary larger than the tokenizer's", () => {
  it("the model samples ids past the tokenizer, which decode to nothing", async () => {
    const model = await CausalLM.fromDirectory(dir, { seed: 1 });
    const prompt = tokenizer.encode("Once upon a time");
    const { completions } = await model.generate([prompt], { maxNewTokens: 8, numReturnSequences: 4, doSample: true });
    model.dispose();
    const past = completions.flatMap((row) => [...row]).filter((id) => id >= tokenizer.vocabSize);
    expect(past.length).toBeGreaterThan(0);
    const known = completions.map((row) => [...row].filter((id) => id < tokenizer.vocabSize));
    completions.forEach((row, i) => expect(tokenizer.decode(row)).toBe(tokenizer.decode(known[i]!)));
  });

  it("MAGRPO trains a step end to end on such a model", async () => {
    const seen: string[] = [];
    const trainer = await MAGRPOTrainer.create({
      agents: [dir, dir],
      rewardFunc: (completions) => {
        seen.push(...completions.flat());
        return completions[0]!.map((a, j) => Math.min(a.length, completions[1]![j]!.length) / 10);
      },
      trainDataset: [{ prompt: "Once upon a time" }, { prompt: "The red fox" }],
      outputDir: path.join(scratch, "run"),
      quiet: true,
      config: { numTurns: 1, numTrainEpochs: 1, numGenerations: 4, maxNewTokens: 8, temperature: 1, topP: 1, topK: 0, evalInterval: 0, loggingSteps: 1, seed: 2 },
    });
    await trainer.train();
    await trainer.close();
    expect(seen.length).toBe(2 * 2 * 4);
    const updates = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl")).filter((r) => r.kind === "train" && typeof r["turn_1/reward_mean"] === "number");
    expect(updates.length).toBeGreaterThan(0);
  });
});
