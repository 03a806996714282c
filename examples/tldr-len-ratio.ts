// CoMLRL's TLDR dual-length task, ported: a concise summary (~220 characters) and a detailed one 2–3× longer.
//   npx tsx examples/tldr-len-ratio.ts [--model Qwen/Qwen2.5-0.5B] [--epochs 3]
import { MAGRPOTrainer, type RewardFunction } from "../src/index.js";
import { dataFile, exampleArgs, readJsonl } from "./common.js";

const clamp = (x: number) => Math.max(-1, Math.min(1, x));

/** Mean of a ratio score (1 in [2, 3], linear decay outside, floor −1) and a short-length score, in [−1, 1]. */
export function tldrDualLengthReward(concise: string, detailed: string): number {
  if (concise.length === 0 || detailed.length === 0) return -1;
  const ratio = detailed.length / concise.length;
  const ratioScore = ratio < 2 ? 1 - (2 - ratio) / 2 : ratio > 3 ? 1 - (ratio - 3) / 3 : 1;
  const shortScore = clamp(1 - Math.abs(concise.length - 220) / 110);
  return clamp((Math.max(-1, ratioScore) + shortScore) / 2);
}

const reward: RewardFunction = (completions) => completions[0].map((a, j) => tldrDualLengthReward(a, completions[1][j]));

const args = await exampleArgs("tldr-len-ratio", { epochs: 3 });
const trainer = await MAGRPOTrainer.create({
  agentModel: args.model,
  numAgents: 2,
  rewardFunc: reward,
  formatters: [
    (item) => `Summarize concisely in about 220 characters:\n${item.prompt}\nTL;DR:`,
    (item) => `Summarize in detail, two to three times longer than a short summary:\n${item.prompt}\nSummary:`,
  ],
  trainDataset: readJsonl(dataFile("tldr-posts.jsonl")),
  outputDir: args.out,
  config: { numAgents: 2, numTurns: 1, numTrainEpochs: args.epochs, agentLearningRate: 5e-5, numGenerations: 4, maxNewTokens: 96, evalInterval: 0 },
});
await trainer.train();
await trainer.saveModel(`${args.out}/agents`);
await trainer.close();
