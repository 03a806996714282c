// CoMLRL's TLDR dual-length task, ported: a concise summary (~220 characters) and a detailed one 2–3× longer.
//   npx tsx examples/tldr-len-ratio.ts [--model Qwen/Qwen2.5-0.5B] [--epochs 3]
import { MAGRPOTrainer } from "../src/index.js";
import { taskExample } from "./common.js";

const { args, inputs } = await taskExample("tldr-len-ratio", "tldr-len-ratio", { epochs: 3 });
const trainer = await MAGRPOTrainer.create({
  ...inputs,
  config: { numAgents: 2, numTurns: 1, numTrainEpochs: args.epochs, agentLearningRate: 5e-5, numGenerations: 4, maxNewTokens: 96, evalInterval: 0 },
});
await trainer.train();
await trainer.saveModel(`${args.out}/agents`);
await trainer.close();
