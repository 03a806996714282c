// GGUF export end to end: the demo's tiny model and a tiny Llama, trained a few steps, saved through the trainer's component registry
// as model.gguf (f16, bf16, q8_0), runs in llama.cpp (node-llama-cpp) with our greedy tokens: f16 over all 24 tokens of
// every prompt, bf16 and q8_0 the first token (how far each agrees is logged). The same for the real SmolLM2-135M,
// loaded from its own GGUF file.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createDemoBaseModel } from "../../src/demo/recipes.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import type { GgufDtype } from "../../src/models/gguf/export.js";
import { Optimizer } from "../../src/models/optimizer.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { TINY_ENGLISH_CORPUS } from "../../src/models/tiny-tokenizer.js";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { ComponentRegistry } from "../../src/components/registry.js";
import { causalLMModule, GGUF_EXPORT_FILE } from "../../src/models/components.js";
import { agreeingPrefix, importNodeLlamaCpp, llamaCppGreedy, nodeLlamaCppMissing } from "../support/node-llama-cpp.js";
import { SMOLLM2_GGUF, smollm2Missing } from "../support/smollm2.js";

const NEW_TOKENS = 24;
const DTYPES: GgufDtype[] = ["f16", "bf16", "q8_0"];

if (nodeLlamaCppMissing) console.warn(`gguf-llama-cpp tests skipped: ${nodeLlamaCppMissing}`);

async function ourGreedy(model: CausalLM, prompts: number[][]): Promise<number[][]> {
  // End-of-text tokens do not stop it, as they do not stop llama.cpp above (yieldEogToken).
  const generation = await model.generate(prompts, { maxNewTokens: NEW_TOKENS, topK: 0, repetitionPenalty: 1, eosTokenIds: [] });
  return generation.completions.map((row) => Array.from(row));
}

/** How much of llama.cpp's greedy continuation from a file of each type must equal ours: every token, the first, or
 * none (only logged). */
type Agreement = Record<GgufDtype, "all" | "first" | "logged">;

/**
 * Compares llama.cpp's greedy tokens from each exported file with ours, logging how far each agrees; and checks what
 * llama.cpp reads of the tokenizer: its ids for the prompts' texts are ours, the chat template is the tokenizer's.
 */
async function compareExports(
  files: Record<GgufDtype, string>,
  model: CausalLM,
  tokenizer: ComlrlTokenizer,
  texts: string[],
  what: string,
  required: Agreement,
): Promise<void> {
  const prompts = texts.map((text) => tokenizer.encode(text, { addSpecialTokens: false }));
  const ours = await ourGreedy(model, prompts);
  for (const dtype of DTYPES) {
    const { greedy, tokenized } = await llamaCppGreedy(files[dtype], prompts, NEW_TOKENS, texts);
    expect(tokenized, `${dtype}: llama.cpp's tokenization`).toEqual(prompts);
    const agreeing = greedy.map((row, i) => agreeingPrefix(row, ours[i]!));
    console.log(`${what} ${dtype}: llama.cpp's greedy tokens agree with ours for ${agreeing.join(", ")} of ${NEW_TOKENS} tokens`);
    if (required[dtype] === "all") expect(greedy).toEqual(ours);
    if (required[dtype] === "first") for (const [i, row] of greedy.entries()) expect(row[0], `${dtype} prompt ${i}`).toBe(ours[i]![0]);
  }
  const { metadata } = await (await importNodeLlamaCpp()).readGgufFileInfo(files.f16);
  expect(metadata.tokenizer.chat_template).toBe(tokenizer.chatTemplateSource);
}

/** A few causal-LM steps on the tokenizer's own corpus: a trained model whose greedy choices are decided, not the
 * near-ties of small random weights. */
async function trainOnCorpus(model: CausalLM, tokenizer: ComlrlTokenizer): Promise<void> {
  const optimizer = new Optimizer(model, { lr: 1e-2 });
  const rows = TINY_ENGLISH_CORPUS.map((text) => tokenizer.encode(text, { addSpecialTokens: false }));
  const width = Math.max(...rows.map((r) => r.length));
  const ids = new Int32Array(rows.length * width).fill(tokenizer.padTokenId);
  const attentionMask = new Int32Array(rows.length * width);
  rows.forEach((row, r) => {
    ids.set(row, r * width);
    attentionMask.fill(1, r * width, r * width + row.length);
  });
  for (let step = 0; step < 30; step++) {
    await model.zeroGrad();
    await model.causalLMLossBackward({ ids, attentionMask, batch: rows.length, length: width });
    await optimizer.step();
  }
  optimizer.dispose();
}

// The demo's model (Qwen2, q/k as HF stores them) and a Llama one (q/k rows permuted for llama.cpp's rotary layout).
const FAMILIES = {
  "the demo's tiny Qwen2 model": (dir: string) => createDemoBaseModel(dir, 7),
  "a tiny Llama model": (dir: string) => createTinyModel(dir, { modelType: "llama", seed: 7, hiddenSize: 64, numLayers: 2 }),
};

describe.skipIf(nodeLlamaCppMissing !== null)("an exported GGUF runs in llama.cpp with our greedy tokens", () => {
  const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-gguf-llama-"));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  for (const [what, create] of Object.entries(FAMILIES)) {
    it(`${what}, trained a few steps, saved as model.gguf in f16, bf16 and q8_0`, async () => {
      const dir = path.join(scratch, what.replace(/\W+/g, "-"));
      const tokenizer = await create(path.join(dir, "base"));
      using model = await CausalLM.load(path.join(dir, "base"));
      await trainOnCorpus(model, tokenizer);
      const registry = new ComponentRegistry();
      registry.register({ name: "agent_0", module: causalLMModule(model, tokenizer), ownsModule: false, exportDir: "agent_0" });
      const files = {} as Record<GgufDtype, string>;
      for (const dtype of DTYPES) {
        await registry.exportTo(path.join(dir, dtype), { format: "gguf", dtype });
        files[dtype] = path.join(dir, dtype, "agent_0", GGUF_EXPORT_FILE);
      }
      const chat = tokenizer.applyChatTemplate([{ role: "user", content: "How many apples are in the basket?" }], { addGenerationPrompt: true });
      const texts = ["The cat sat on the", "Once upon a time, there was", chat, "Twelve eggs make a"];
      await compareExports(files, model, tokenizer, texts, what, { f16: "all", bf16: "first", q8_0: "first" });
    });
  }
});

if (smollm2Missing) console.warn(`SmolLM2 GGUF round trip skipped: ${smollm2Missing}`);

describe.skipIf(nodeLlamaCppMissing !== null || smollm2Missing !== null)("the real SmolLM2-135M-Instruct round trip", () => {
  it("loaded from its GGUF, exported again, runs in llama.cpp with our greedy tokens", async () => {
    const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-gguf-smollm2-"));
    try {
      using model = await CausalLM.load(SMOLLM2_GGUF);
      const tokenizer = await ComlrlTokenizer.fromDirectory(SMOLLM2_GGUF);
      const files = {} as Record<GgufDtype, string>;
      for (const dtype of DTYPES) files[dtype] = (await model.exportGguf(path.join(scratch, `smollm2-${dtype}.gguf`), { dtype, tokenizer })).file;
      const texts = ["What is the capital of France?", "Write a haiku about the sea.", "List three prime numbers."].map((content) =>
        tokenizer.applyChatTemplate([{ role: "user", content }], { addGenerationPrompt: true }),
      );
      // q8_0 is logged only: llama.cpp quantizes the activations to 8 bits in its Q8_0 (and Q4_1) products, and SmolLM2
      // answers the first prompt otherwise then ("L'Étoile, la …" for "The capital of France is Paris."), as the
      // Q4_1 file it ships does, though the exported Q8_0 weights are within 0.4% of the f16 ones (gguf-py dequantized).
      await compareExports(files, model, tokenizer, texts, "SmolLM2-135M-Instruct", { f16: "all", bf16: "all", q8_0: "logged" });
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 600_000);
});
