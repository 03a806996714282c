// CoMLRL's quick-start, ported: two writers, the second's story should be 2–3× longer than the first's.
//   npx tsx examples/story-len-ratio.ts [--model Qwen/Qwen2.5-0.5B] [--epochs 3]
import { MAGRPOTrainer, RewardProcessors } from "../src/index.js";
import { taskExample } from "./common.js";

const { args, inputs } = await taskExample("story-len-ratio", "story-len-ratio", { epochs: 3 });
const trainer = await MAGRPOTrainer.create({
  ...inputs,
  rewardProcessor: RewardProcessors.scale(100),
  config: { numAgents: 2, numTurns: 1, numTrainEpochs: args.epochs, agentLearningRate: 5e-5, numGenerations: 8, maxNewTokens: 128, evalInterval: 0 },
});
await trainer.train();
await trainer.saveModel(`${args.out}/agents`);
await trainer.close();
