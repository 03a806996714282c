// Data-parallel stages: every rank runs its own share of a stage's steps, in one rule the ranks agree on.
import type { DistributedContext } from "../../distributed/context.js";
import { ReplicaError } from "../../distributed/replicas.js";
import type { TrainingStage } from "./stage-host.js";

/**
 * The stage as this rank runs it: step k of ⌈steps / worldSize⌉ is the stage's step (rank + k·worldSize) mod
 * steps — item b on rank b mod worldSize, the last round padded with the epoch's first items so that every rank
 * runs the same number of steps. Evaluation follows rank 0's steps, on every rank at once.
 */
export function shardStage(stage: TrainingStage, context: DistributedContext): TrainingStage {
  const { rank, worldSize } = context;
  // The shard rule needs one list of steps on every rank; a stage over data only one rank holds (a dataset that
  // differs between ranks, collected pairs not gathered) may differ in length, which would leave ranks waiting for
  // each other: say so instead.
  const checkSameSteps = async () => {
    const [most, negatedLeast] = await context.allReduce([stage.steps, -stage.steps], "max");
    if (most !== -negatedLeast) {
      throw new ReplicaError(
        `stage "${stage.name}" has ${stage.steps} steps on rank ${rank} but between ${-negatedLeast} and ${most} over the ranks: data-parallel training shards one list of steps (the dataset's items) across the ranks, and this stage's steps come from each rank's own data`,
      );
    }
  };
  return {
    name: stage.name,
    get epochs() {
      return stage.epochs;
    },
    get steps() {
      return Math.ceil(stage.steps / worldSize);
    },
    runStep: async (k) => {
      if (k === 0) await checkSameSteps();
      return stage.runStep((rank + k * worldSize) % stage.steps);
    },
    ...(stage.beginEpoch ? { beginEpoch: () => stage.beginEpoch!() } : {}),
    ...(stage.endEpoch ? { endEpoch: () => stage.endEpoch!() } : {}),
    ...(stage.evaluateBefore ? { evaluateBefore: (k: number) => stage.evaluateBefore!(k * worldSize) } : {}),
  };
}
