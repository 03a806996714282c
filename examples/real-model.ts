// A real pretrained model on a real task: two copies of SmolLM2-135M-Instruct (or any causal LM: a hub id, an HF
// directory or a .gguf file) learn the paragraph-summary collaboration with MAGRPO — writer 0 sums a paragraph up in
// one sentence, writer 1 gives a detailed account of it — and are saved as HF directories. docs/performance.md times
// this task against CoMLRL, docs/learning-parity.md has its learning curve.
//   scripts/fetch-smollm2.sh && npx tsx examples/real-model.ts [--model FILE.gguf|DIR|HUB_ID] [--epochs 4] [--items 8]
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { ComlrlTokenizer, getTask, MAGRPOTrainer, resolveModelSource } from "../src/index.js";
import { exampleArgs } from "./common.js";

// Where scripts/fetch-smollm2.sh puts the model; the default here when neither --model nor COMLRL_MODEL names one.
const SMOLLM2 = path.join(process.env.COMLRL_SMOLLM2_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), ".cache"), "comlrl", "smollm2"), "SmolLM2-135M-Instruct.Q4_1.gguf");
if (process.env.COMLRL_MODEL === undefined && existsSync(SMOLLM2)) process.env.COMLRL_MODEL = SMOLLM2;

const args = await exampleArgs("real-model", { epochs: 4 });
const tokenizer = await ComlrlTokenizer.fromDirectory(await resolveModelSource(args.model));
const task = getTask("paragraph-summary", { chatTemplate: (messages: { role: string; content: string }[]) => tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true }) });
const trainer = await MAGRPOTrainer.create({
  agentModel: args.model,
  numAgents: 2,
  tokenizer,
  rewardFunc: task.rewardFunc,
  formatters: task.formatters,
  trainDataset: task.dataset({ limit: args.items ?? 8 }),
  outputDir: args.out,
  // The learning curve's settings (docs/learning-parity.md): 4 samples of up to 48 tokens per writer and item.
  config: { numAgents: 2, numTurns: 1, numTrainEpochs: args.epochs, numGenerations: 4, maxNewTokens: 48, temperature: 1, topP: 1, topK: 0, agentLearningRate: 2e-5, evalInterval: 0 },
});
await trainer.train();
await trainer.saveModel(path.join(args.out, "agents"));
await trainer.close();
console.log(`trained agents saved under ${path.join(args.out, "agents")}`);
