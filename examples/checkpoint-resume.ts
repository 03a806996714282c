// Checkpoints and exact resume: train one epoch with checkpoints on, then a new trainer continues from the latest
// checkpoint to the second epoch, and readRunMetrics stitches both runs' metrics into one stream.
//   npx tsx examples/checkpoint-resume.ts [--model DIR] [--out runs/checkpoint-resume]
import { MAGRPOTrainer, readCheckpointMetadata, readRunMetrics } from "../src/index.js";
import { taskExample } from "./common.js";

const { args, inputs } = await taskExample("cover-vowels", "checkpoint-resume", { epochs: 2 });
const checkpointDir = `${args.out}/checkpoints`;
const create = (numTrainEpochs: number) =>
  MAGRPOTrainer.create({
    ...inputs,
    quiet: true,
    config: { numTurns: 1, numTrainEpochs, numGenerations: 4, maxNewTokens: 3, agentLearningRate: 1e-3, evalInterval: 0, seed: 5 },
  });

const first = await create(1);
await first.train({ checkpointDir, checkpointInterval: 1, keepLast: 2 });
await first.close();
console.log("checkpoint:", readCheckpointMetadata(`${checkpointDir}/checkpoint-1`).progress);

// numTrainEpochs counts every epoch, so raising it on resume trains the ones still to do.
const resumed = await create(args.epochs);
await resumed.train({ checkpointDir, resumeFromCheckpoint: "latest" });
await resumed.close();
const rewards = readRunMetrics(args.out).filter((r) => r.kind === "train").map((r) => r["turn_1/reward_mean"]);
console.log(`${rewards.length} train records over both runs`);
