// Centralized MAGRPO: one joint policy writes both roles' parts of CoMLRL's story task in one completion, split
// into the roles by `<agent_0>` … `<agent_1>` sections (TaggedAdapter, the default; pass `adapter` for your own).
//   npx tsx examples/centralized-magrpo.ts [--model Qwen/Qwen2.5-0.5B] [--epochs 2]
import { CentralizedMAGRPOTrainer, getTask } from "../src/index.js";
import { exampleArgs } from "./common.js";

const task = getTask("story-len-ratio");
const args = await exampleArgs("centralized-magrpo", { epochs: 2 });
const trainer = await CentralizedMAGRPOTrainer.create({
  agentModel: args.model,
  numAgents: 2, // roles written by the one policy
  rewardFunc: task.rewardFunc,
  formatters: task.formatters,
  trainDataset: task.dataset({ limit: args.items }),
  outputDir: args.out,
  config: { numTrainEpochs: args.epochs, numGenerations: 4, maxNewTokens: 64, agentLearningRate: 5e-5, evalInterval: 0 },
});
await trainer.train();
await trainer.saveModel(`${args.out}/policy`);
await trainer.close();
