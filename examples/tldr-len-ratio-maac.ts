// CoMLRL's TLDR dual-length task with MAAC: one centralized LLM critic (CoMLRL ships it for MAGRPO, IAC and MAAC).
//   npx tsx examples/tldr-len-ratio-maac.ts [--model Qwen/Qwen2.5-0.5B] [--epochs 3]
import { MAACTrainer } from "../src/index.js";
import { taskExample } from "./common.js";

const { args, inputs } = await taskExample("tldr-len-ratio", "tldr-len-ratio-maac", { epochs: 3 });
const trainer = await MAACTrainer.create({
  ...inputs,
  criticModel: args.model, // one centralized critic over both agents' prompts
  config: { numAgents: 2, numTurns: 1, numTrainEpochs: args.epochs, agentLearningRate: 5e-5, criticLearningRate: 5e-5, numGenerations: 4, maxNewTokens: 96, evalInterval: 0 },
});
await trainer.train();
await trainer.saveModel(`${args.out}/agents`);
await trainer.close();
