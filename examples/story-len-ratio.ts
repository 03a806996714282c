// CoMLRL's quick-start, ported: two writers, the second's story should be 2–3× longer than the first's.
//   npx tsx examples/story-len-ratio.ts [--model Qwen/Qwen2.5-0.5B] [--epochs 3]
import { MAGRPOTrainer, RewardProcessors, type RewardFunction } from "../src/index.js";
import { dataFile, exampleArgs, readJsonl } from "./common.js";

/** 1 inside the band 2 ≤ len₂/len₁ ≤ 3, exp(−distance to the band) outside; 0 when the first story is empty. */
export function storyLengthRatioReward(first: string, second: string): number {
  if (first.length === 0) return 0;
  const ratio = second.length / first.length;
  if (ratio >= 2 && ratio <= 3) return 1;
  return Math.exp(-(ratio < 2 ? 2 - ratio : ratio - 3));
}

const reward: RewardFunction = (completions) => completions[0].map((a, j) => storyLengthRatioReward(a, completions[1][j]));

const args = await exampleArgs("story-len-ratio", { epochs: 3 });
const trainer = await MAGRPOTrainer.create({
  agentModel: args.model,
  numAgents: 2,
  rewardFunc: reward,
  rewardProcessor: RewardProcessors.scale(100),
  formatters: [(item) => `${item.prompt} Keep it short.`, (item) => `${item.prompt} Make it detailed.`],
  trainDataset: readJsonl(dataFile("story-prompts.jsonl")),
  outputDir: args.out,
  config: { numAgents: 2, numTurns: 1, numTrainEpochs: args.epochs, agentLearningRate: 5e-5, numGenerations: 8, maxNewTokens: 128, evalInterval: 0 },
});
await trainer.train();
await trainer.saveModel(`${args.out}/agents`);
await trainer.close();
