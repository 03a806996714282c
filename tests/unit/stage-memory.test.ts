import { describe, expect, it } from "vitest";
import type { MemoryWindow } from "../../src/native/binding.js";
import { StageMemory } from "../../src/trainers/lifecycle/memory.js";
import { StageTimings } from "../../src/trainers/lifecycle/timings.js";

const MIB = 1024 * 1024;

/** Windows whose peaks come from a script, one per call (the constructor's first call opens the first window). */
function scripted(peaksMiB: number[], cuda: Array<Array<[number, number]>> = []) {
  let call = 0;
  return (): MemoryWindow => {
    const i = call++;
    const peak = (peaksMiB[i - 1] ?? 0) * MIB;
    return {
      residentBytes: peak,
      peakResidentBytes: peak,
      processPeakResidentBytes: Math.max(...peaksMiB) * MIB,
      cudaMemory: (cuda[i - 1] ?? []).map(([allocated, reserved], d) => ({ device: `cuda:${d}`, allocatedBytes: 0, reservedBytes: 0, peakAllocatedBytes: allocated * MIB, peakReservedBytes: reserved * MIB })),
    };
  };
}

describe("StageMemory", () => {
  it("counts each window's peak towards the innermost phase open, 'other' between phases, per step and per stage", async () => {
    // Windows closed in order: other (before generation), generation, other, update, backward, update, optimizer, update, other (takeStep).
    const memory = new StageMemory(scripted([100, 300, 120, 130, 900, 140, 700, 150, 110]));
    await memory.within("generation", async () => {});
    await memory.within("update", async () => {
      await memory.within("backward", async () => {});
      await memory.within("optimizer", async () => {});
    });
    expect(memory.takeStep()).toEqual({
      peak_rss_mib: 900,
      "peak_rss_mib/other": 120,
      "peak_rss_mib/generation": 300,
      "peak_rss_mib/update": 150,
      "peak_rss_mib/backward": 900,
      "peak_rss_mib/optimizer": 700,
    });
    expect(memory.of("train").backward?.peakRssBytes).toBe(900 * MIB);
    expect(memory.of("rl")).toEqual({});
  });

  it("starts every step afresh, keeps the stage's maximum, and splits stages", async () => {
    const memory = new StageMemory(scripted([50, 400, 60, 10, 15, 200, 30]));
    await memory.within("generation", async () => {});
    expect(memory.takeStep()).toEqual({ peak_rss_mib: 400, "peak_rss_mib/other": 60, "peak_rss_mib/generation": 400 });
    memory.enter("pairs"); // closes the window since takeStep (10) into train
    await memory.within("generation", async () => {});
    expect(memory.takeStep()).toEqual({ peak_rss_mib: 200, "peak_rss_mib/other": 30, "peak_rss_mib/generation": 200 });
    expect(memory.of("train").generation?.peakRssBytes).toBe(400 * MIB);
    expect(memory.of("pairs").generation?.peakRssBytes).toBe(200 * MIB);
    expect(memory.of("pairs").other?.peakRssBytes).toBe(30 * MIB);
  });

  it("reports each CUDA device's peak allocated and reserved bytes overall and per phase", async () => {
    const memory = new StageMemory(scripted([100, 200, 100], [[[1, 2], [3, 4]], [[10, 20], [5, 6]], [[2, 3], [1, 1]]]));
    await memory.within("backward", async () => {});
    expect(memory.takeStep()).toEqual({
      peak_rss_mib: 200,
      "peak_rss_mib/other": 100,
      "peak_rss_mib/backward": 200,
      "cuda:0/peak_allocated_mib": 10,
      "cuda:0/peak_reserved_mib": 20,
      "cuda:0/peak_allocated_mib/other": 2,
      "cuda:0/peak_reserved_mib/other": 3,
      "cuda:0/peak_allocated_mib/backward": 10,
      "cuda:0/peak_reserved_mib/backward": 20,
      "cuda:1/peak_allocated_mib": 5,
      "cuda:1/peak_reserved_mib": 6,
      "cuda:1/peak_allocated_mib/other": 3,
      "cuda:1/peak_reserved_mib/other": 4,
      "cuda:1/peak_allocated_mib/backward": 5,
      "cuda:1/peak_reserved_mib/backward": 6,
    });
  });

  it("is what StageTimings' timed phases measure, the stage total ('seconds') left to 'other'", async () => {
    const memory = new StageMemory(scripted([10, 20, 30, 40, 50]));
    const timings = new StageTimings(memory);
    await timings.time("seconds", () => timings.time("reward", async () => 1));
    await timings.measure("optimizer", async () => {});
    expect(memory.takeStep()).toEqual({ peak_rss_mib: 50, "peak_rss_mib/other": 50, "peak_rss_mib/reward": 20, "peak_rss_mib/optimizer": 40 });
    expect(timings.of("train").reward).toBeGreaterThanOrEqual(0);
  });
});
