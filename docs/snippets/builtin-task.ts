import { getTask, MAGRPOTrainer } from "../../src/index.js";

const task = getTask("tldr-len-ratio");
const trainer = await MAGRPOTrainer.create({
  agentModel: "Qwen/Qwen2.5-0.5B",
  numAgents: task.numAgents,
  rewardFunc: task.rewardFunc,
  formatters: task.formatters,
  trainDataset: task.dataset(),
  evalDataset: task.dataset({ split: "eval" }),
});
await trainer.train();
await trainer.close();
