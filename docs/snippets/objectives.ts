import { MAGRPOTrainer, type MAGRPOTrainerOptions } from "../../src/index.js";

declare const task: Omit<MAGRPOTrainerOptions, "config">; // agents, reward, formatters and data, as on the MAGRPO page

// One objective per agent: each field takes one value for all agents or a list with one per agent.
await MAGRPOTrainer.create({
  ...task,
  config: { lossType: ["dapo", "grpo"], importanceSamplingLevel: ["token", "sequence"], numIterations: 2, epsilonHigh: 0.28 },
});
