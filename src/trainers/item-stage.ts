// The stage MAGRPO and the actor-critic trainers share: epochs over the train items, each item rolled out and its
// samples buffered per agent, agents updated once their buffers hold rolloutBufferSize samples (the rest at the
// epoch's end), evaluation every evalInterval items, and the progress bar showing the last 50 rewards.
import type { Item } from "../rollout/types.js";
import type { TrainingStage } from "./trainer.js";

export interface BufferedItemStage<S extends { agent: number }> {
  items: Item[];
  epochs: number;
  evalInterval: number;
  hasEvalData: boolean;
  bufferSize: number;
  buffers: S[][];
  collect(items: Item[], firstItemIndex: number): Promise<S[]>;
  /** Updates the agents whose buffers hold at least `minimum` samples. */
  drain(minimum: number): Promise<void>;
  /** The rewards the progress bar averages. */
  shownRewards(samples: S[]): number[];
}

const WINDOW = 50;

export function bufferedItemStage<S extends { agent: number }>(stage: BufferedItemStage<S>): TrainingStage {
  const recent: number[] = [];
  return {
    name: "train",
    epochs: stage.epochs,
    steps: stage.items.length,
    evaluateBefore: (b) => stage.evalInterval > 0 && b % stage.evalInterval === 0 && stage.hasEvalData,
    runStep: async (b) => {
      const samples = await stage.collect([stage.items[b]], b);
      recent.push(...stage.shownRewards(samples));
      recent.splice(0, Math.max(0, recent.length - WINDOW));
      for (const sample of samples) stage.buffers[sample.agent].push(sample);
      await stage.drain(stage.bufferSize);
      return { [`reward (last ${WINDOW})`]: recent.length ? recent.reduce((a, r) => a + r, 0) / recent.length : 0 };
    },
    endEpoch: () => stage.drain(1),
  };
}
