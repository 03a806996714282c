// Dropout where CoMLRL's trainers put their models in train mode: a Hub GPT-2 config (attn_pdrop / resid_pdrop /
// embd_pdrop 0.1) loads and trains with a rising reward; MAGRPO, MADPO, the iterative trainers and MARLHF's reward
// model update differently with a rate above 0, IAC and MAAC (which never call train()) bit-identically; exact
// resume holds with dropout on.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";
import { makeBase, makeTrainer } from "../support/checkpoint-run.js";
import { createHubGpt2 } from "../support/hub-gpt2.js";
import { expectRise } from "../support/learning.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-dropout-"));
const plainBase = path.join(scratch, "plain");
const droppingBase = path.join(scratch, "dropping");
let tokenizer: ComlrlTokenizer;

beforeAll(async () => {
  tokenizer = await makeBase(plainBase);
  await makeBase(droppingBase);
  // The same weights with Qwen2's attention_dropout: what a Hub config with a nonzero rate says.
  const file = path.join(droppingBase, "config.json");
  writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, "utf8")), attention_dropout: 0.2 }, null, 2));
}, 120_000);

const bits = (weights: Float32Array[]) => weights.map((w) => Buffer.from(w.buffer).toString("base64"));
async function trainedWeights(base: string, kind: string, epochs = 1, resume?: string): Promise<Float32Array[]> {
  const out = path.join(scratch, `${kind}-${path.basename(base)}-${Math.random().toString(36).slice(2)}`);
  const trainer = await makeTrainer(base, tokenizer, out, epochs, {}, kind);
  try {
    await trainer.train(resume ? { checkpointDir: resume, resumeFromCheckpoint: "latest" } : {});
    return trainer.weights();
  } finally {
    await trainer.close();
  }
}

describe("dropout in the trainers", () => {
  it("a Hub GPT-2 config (attn_pdrop, resid_pdrop, embd_pdrop 0.1) loads and MAGRPO trains it with the reward rising", async () => {
    const dir = path.join(scratch, "gpt2");
    const gpt2Tokenizer = await createHubGpt2(dir, { seed: 7 });
    const model = await CausalLM.load(dir);
    expect(model.config).toMatchObject({ modelType: "gpt2", attentionDropout: 0.1, residualDropout: 0.1, embeddingDropout: 0.1 });
    model.dispose();
    const trainer = await MAGRPOTrainer.create({
      agents: [dir, dir],
      rewardFunc: coverVowelsRewardFunc,
      formatters: coverVowelsFormatters((m) => gpt2Tokenizer.applyChatTemplate(m, { addGenerationPrompt: true })),
      trainDataset: coverVowelsDataset(16),
      outputDir: path.join(scratch, "gpt2-run"),
      quiet: true,
      config: { numTurns: 1, numTrainEpochs: 20, numGenerations: 8, maxNewTokens: 4, temperature: 1, topP: 1, topK: 0, agentLearningRate: 2e-3, rolloutBufferSize: 2, trainBatchSize: 2, loggingSteps: 1, evalInterval: 0, seed: 7 },
    });
    expect(trainer.agents.every((a) => a.model.info().training)).toBe(true);
    await trainer.train();
    await trainer.close();
    const rewards = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl"))
      .filter((r) => r.kind === "train" && typeof r["turn_1/reward_mean"] === "number")
      .map((r) => r["turn_1/reward_mean"] as number);
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const first = mean(rewards.slice(0, 20));
    const last = mean(rewards.slice(-20));
    expectRise(`Hub GPT-2 with dropout 0.1 (cover-the-vowels, ${rewards.length} updates)`, first, last, 0.15);
  }, 600_000);

  // MARLHF (MAAC): agents in MAAC never enter train mode, so any difference is the reward model's dropout.
  for (const kind of ["MAGRPO", "CentralizedMAGRPO", "MADPO", "MADPOIter", "MARLHF (MAAC)"]) {
    it(`${kind}: a dropout rate above 0 changes the update`, async () => {
      expect(bits(await trainedWeights(droppingBase, kind))).not.toEqual(bits(await trainedWeights(plainBase, kind)));
    }, 300_000);
  }

  for (const kind of ["IAC (shared heads)", "MAAC"]) {
    it(`${kind}: never in train mode, so the same weights bit for bit with or without a dropout rate`, async () => {
      expect(bits(await trainedWeights(droppingBase, kind))).toEqual(bits(await trainedWeights(plainBase, kind)));
    }, 300_000);
  }

  for (const kind of ["MAGRPO", "MADPO"]) {
    it(`${kind}: exact resume with dropout on: 1 epoch, then resume to 3, bit-identical to 3 straight`, async () => {
      const straight = await trainedWeights(droppingBase, kind, 3);
      const out = path.join(scratch, `${kind}-resumed`);
      const checkpoints = path.join(out, "checkpoints");
      const first = await makeTrainer(droppingBase, tokenizer, out, 1, {}, kind);
      await first.train({ checkpointDir: checkpoints });
      await first.close();
      const checkpoint = readdirSync(checkpoints).find((d) => d.startsWith("checkpoint-"))!;
      expect(readdirSync(path.join(checkpoints, checkpoint), { recursive: true }).some((f) => String(f).endsWith("generator-dropout.bin"))).toBe(true);
      const second = await makeTrainer(droppingBase, tokenizer, out, 3, {}, kind);
      await second.train({ checkpointDir: checkpoints, resumeFromCheckpoint: "latest" });
      expect(bits(second.weights())).toEqual(bits(straight));
      await second.close();
    }, 300_000);
  }

  it("a checkpoint's dropout stream is required only where the model drops; a changed rate is refused by name", async () => {
    const checkpointOf = async (base: string, name: string) => {
      const out = path.join(scratch, name);
      const trainer = await makeTrainer(base, tokenizer, out, 1, {}, "MAGRPO");
      await trainer.train({ checkpointDir: path.join(out, "checkpoints") });
      await trainer.close();
      const checkpoints = path.join(out, "checkpoints");
      const dropoutFiles = readdirSync(checkpoints, { recursive: true }).map(String).filter((f) => f.endsWith("generator-dropout.bin"));
      expect(dropoutFiles.length).toBe(2);
      // As a checkpoint written without the stream: its file gone and not in the manifest.
      for (const file of dropoutFiles) {
        rmSync(path.join(checkpoints, file));
        const [checkpoint, ...inside] = file.split(path.sep);
        const manifestFile = path.join(checkpoints, checkpoint, "manifest.json");
        const manifest = JSON.parse(readFileSync(manifestFile, "utf8")) as { files: Record<string, unknown> };
        delete manifest.files[inside.join("/")];
        writeFileSync(manifestFile, JSON.stringify(manifest));
      }
      return { out, checkpoints };
    };
    const resume = async (base: string, { out, checkpoints }: { out: string; checkpoints: string }) => {
      const trainer = await makeTrainer(base, tokenizer, out, 2, {}, "MAGRPO");
      try {
        await trainer.train({ checkpointDir: checkpoints, resumeFromCheckpoint: "latest" });
      } finally {
        await trainer.close();
      }
    };
    // Without dropout the stream is never drawn from: a checkpoint without its file resumes.
    await resume(plainBase, await checkpointOf(plainBase, "no-dropout-stream"));
    await expect(resume(droppingBase, await checkpointOf(droppingBase, "missing-dropout-stream"))).rejects.toThrow(/generator-dropout\.bin is missing/);
    await expect(resume(droppingBase, await checkpointOf(plainBase, "rate-changed"))).rejects.toThrow(/agent_0 differs/);
  }, 300_000);
});
