// CoMLRL's TLDR dual-length task with IAC: an independent LLM critic per agent (CoMLRL ships it for MAGRPO, IAC and MAAC).
//   npx tsx examples/tldr-len-ratio-iac.ts [--model Qwen/Qwen2.5-0.5B] [--epochs 3]
import { IACTrainer } from "../src/index.js";
import { taskExample } from "./common.js";

const { args, inputs } = await taskExample("tldr-len-ratio", "tldr-len-ratio-iac", { epochs: 3 });
const trainer = await IACTrainer.create({
  ...inputs,
  criticModel: args.model, // one separate critic per agent (useSeparateCritic: true), fed its actor's token ids
  config: { numAgents: 2, numTurns: 1, numTrainEpochs: args.epochs, agentLearningRate: 5e-5, criticLearningRate: 5e-5, numGenerations: 4, maxNewTokens: 96, evalInterval: 0 },
});
await trainer.train();
await trainer.saveModel(`${args.out}/agents`);
await trainer.close();
