// Centralized MAGRPO: one joint policy writes both roles' parts of CoMLRL's story task in one completion, split
// into the roles by `<agent_0>` … `<agent_1>` sections (TaggedAdapter, the default; pass `adapter` for your own).
//   npx tsx examples/centralized-magrpo.ts [--model Qwen/Qwen2.5-0.5B] [--epochs 2]
import { CentralizedMAGRPOTrainer } from "../src/index.js";
import { taskExample } from "./common.js";

const { args, inputs } = await taskExample("story-len-ratio", "centralized-magrpo", { epochs: 2 });
const trainer = await CentralizedMAGRPOTrainer.create({
  ...inputs, // numAgents 2: the roles the one policy writes
  config: { numTrainEpochs: args.epochs, numGenerations: 4, maxNewTokens: 64, agentLearningRate: 5e-5, evalInterval: 0 },
});
await trainer.train();
await trainer.saveModel(`${args.out}/policy`);
await trainer.close();
