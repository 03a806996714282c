// Runs that cannot fit are refused before any model loads, naming the fields and numbers: 64 agents of a 0.36B
// shape (the out-of-memory killer ended such a run mid-load) and numGenerations 10^5 (it ended in the first
// rollout). memoryLimitBytes overrides the machine's figure for users who know better. Nothing here allocates
// what it estimates: the refusals come before loading, and the override only builds the trainer.
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir, totalmem } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { estimateMemory, modelShape, parameterCount } from "../../src/config/memory-estimate.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-memory-"));
const tiny = path.join(scratch, "tiny");
// Qwen2.5-0.5B's shape with 15 of its 24 layers: 0.36B parameters. Only its config.json exists: nothing may load it.
const shape036 = path.join(scratch, "shape-0.36b");
const QWEN_036 = {
  model_type: "qwen2", hidden_size: 896, num_hidden_layers: 15, intermediate_size: 4864, num_attention_heads: 14,
  num_key_value_heads: 2, vocab_size: 151936, tie_word_embeddings: true,
};

beforeAll(async () => {
  await createTinyModel(tiny, { seed: 3, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
  mkdirSync(shape036);
  writeFileSync(path.join(shape036, "config.json"), JSON.stringify(QWEN_036));
});

const formatters = coverVowelsFormatters((messages) => messages.map((m) => m.content).join("\n"));
const create = (agents: string[], config: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  MAGRPOTrainer.create({ agents, rewardFunc: coverVowelsRewardFunc, formatters, trainDataset: coverVowelsDataset(2), quiet: true, outputDir: path.join(scratch, "out"), config: { numTurns: 1, ...config }, ...extra });

describe("memory estimate before loading", () => {
  it("counts a Qwen2.5-shaped decoder's parameters as transformers does (tied head, GQA, gated MLP)", () => {
    // Qwen2.5-0.5B: 494,032,768 parameters, of which 24 layers × 896×2 norms and the biases are not counted here.
    const full = parameterCount(modelShape({ ...QWEN_036, num_hidden_layers: 24 }, "config.json")!);
    expect(full).toBe(151936 * 896 + 24 * (2 * 896 * 14 * 64 + 2 * 896 * 2 * 64 + 3 * 896 * 4864));
    expect(494_032_768 - full).toBe(24 * (2 * 896 + 896 + 2 * 128) + 896);
  });

  it("64 agents of a 0.36B shape are refused before loading, naming the count, parameters and bytes", async () => {
    const refused = create(Array(64).fill(shape036), { numGenerations: 2, maxNewTokens: 8 });
    await expect(refused).rejects.toThrow(/^this run would hold at least 369\.\d GB on cpu, more than this (machine|container)'s/);
    await expect(refused).rejects.toThrow(`64 trained models of 0.360B parameters (${path.join(shape036, "config.json")}: hidden_size 896, num_hidden_layers 15, vocab_size 151936) × 16 bytes (weights, gradients, AdamW's two moments)`);
    await expect(refused).rejects.toMatchObject({ name: "MemoryEstimateError", field: "memoryLimitBytes" });
  });

  it("numGenerations 100000 is refused, naming it and maxNewTokens", async () => {
    const refused = create([tiny, tiny], { numGenerations: 100_000, maxNewTokens: 256 });
    await expect(refused).rejects.toThrow(/rollout generation: numGenerations 100000 × \(prompt \d+ \+ maxNewTokens 256 tokens\) × KV cache of 1 layers \(and one layer's copy while it grows\), \+ float32 logits over \d+ tokens = \d+\.\d GB/);
  });

  it("memoryLimitBytes overrides the machine's figure, either way", async () => {
    await expect(create([tiny, tiny], { numGenerations: 2, maxNewTokens: 8 }, { memoryLimitBytes: 1e5 })).rejects.toThrow(/more than memoryLimitBytes 0\.00 GB/);
    const trainer = await create([tiny, tiny], { numGenerations: 100_000, maxNewTokens: 256 }, { memoryLimitBytes: Infinity });
    await trainer.close();
    await expect(create([tiny, tiny], { numGenerations: 2 }, { memoryLimitBytes: -1 })).rejects.toThrow("memoryLimitBytes must be a positive number of bytes");
  });

  it("a trained model's bytes per parameter follow its precision: bf16-mixed 2 + 2 + 8 + 4, pure-bf16 2 + 2 + 4, auto mixed only on a GPU", () => {
    const shape = modelShape(QWEN_036, "q")!;
    const perParameter = (dtype: string, precision: "auto" | "bf16-mixed" | "pure-bf16", device: string) => {
      const share = estimateMemory({ models: [{ shape, device, role: "actor", trained: true, loaded: false }], dtype, precision, numGenerations: 1, maxNewTokens: 1, promptTokens: 0, processBytes: 0 }).get(device)!;
      return Number(/× (\d+) bytes/.exec(share.lines[0])![1]);
    };
    expect(perParameter("bfloat16", "bf16-mixed", "cpu")).toBe(16);
    expect(perParameter("bfloat16", "pure-bf16", "cpu")).toBe(8);
    expect(perParameter("bfloat16", "auto", "cpu")).toBe(8);
    expect(perParameter("bfloat16", "auto", "cuda:0")).toBe(16);
    expect(perParameter("float32", "bf16-mixed", "cuda:0")).toBe(16);
    const mixed = estimateMemory({ models: [{ shape, device: "cuda:1", role: "actor", trained: true, loaded: false }], dtype: "bfloat16", precision: "auto", numGenerations: 1, maxNewTokens: 1, promptTokens: 0, processBytes: 0 });
    expect(mixed.get("cuda:1")!.lines[0]).toContain("bf16-mixed's float32 master weights");
  });

  it("the estimate of an ordinary tiny run is far below the machine", () => {
    const shares = estimateMemory({ models: [{ shape: modelShape(QWEN_036, "q")!, device: "cpu", role: "actor", trained: true, loaded: false }], dtype: "float32", precision: "auto", numGenerations: 4, maxNewTokens: 256, promptTokens: 64, processBytes: 0 });
    const cpu = shares.get("cpu")!;
    expect(cpu.total).toBeGreaterThan(16 * parameterCount(modelShape(QWEN_036, "q")!));
    expect(cpu.total).toBeLessThan(totalmem() * 4);
  });
});
