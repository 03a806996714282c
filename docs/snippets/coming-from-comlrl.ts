// comlrl (this package)
import { MAGRPOTrainer, type Item, type RewardFunction } from "../../src/index.js";

declare const items: Item[]; // your dataset: plain objects, `prompt` by convention

const reward: RewardFunction = ([summary, detailed]) => summary.map((a, j) => Math.min(a.length, detailed[j].length) / 100);

const trainer = await MAGRPOTrainer.create({
  agentModel: "Qwen/Qwen2.5-0.5B", numAgents: 2, rewardFunc: reward,
  formatters: [(item) => `Summarise: ${item.prompt}`, (item) => `Explain: ${item.prompt}`],
  trainDataset: items, config: { numTurns: 1, numGenerations: 4, maxNewTokens: 96 },
});
await trainer.train();
await trainer.saveModel("out/agents");
await trainer.close();
