// CoMLRL's quick-start, ported: two writers, the second's story should be 2–3× longer than the first's.
//   npx tsx examples/story-len-ratio.ts [--model Qwen/Qwen2.5-0.5B] [--epochs 3]
import { getTask, MAGRPOTrainer, RewardProcessors } from "../src/index.js";
import { exampleArgs } from "./common.js";

const task = getTask("story-len-ratio");
const args = await exampleArgs("story-len-ratio", { epochs: 3 });
const trainer = await MAGRPOTrainer.create({
  agentModel: args.model,
  numAgents: 2,
  rewardFunc: task.rewardFunc,
  rewardProcessor: RewardProcessors.scale(100),
  formatters: task.formatters,
  trainDataset: task.dataset({ limit: args.items }),
  outputDir: args.out,
  config: { numAgents: 2, numTurns: 1, numTrainEpochs: args.epochs, agentLearningRate: 5e-5, numGenerations: 8, maxNewTokens: 128, evalInterval: 0 },
});
await trainer.train();
await trainer.saveModel(`${args.out}/agents`);
await trainer.close();
