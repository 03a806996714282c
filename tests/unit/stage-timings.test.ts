import { describe, expect, it } from "vitest";
import { StageTimings } from "../../src/trainers/lifecycle/timings.js";

describe("StageTimings", () => {
  it("counts phases into the stage entered last ('train' before any), totals per stage and phase", async () => {
    const t = new StageTimings();
    t.add("update", 0.5);
    t.enter("pairs");
    t.add("generation", 1);
    t.add("seconds", 3);
    t.enter("rl");
    t.add("generation", 2);
    t.enter("pairs");
    t.add("reward", 0.25);
    expect(t.stages).toEqual({
      train: { seconds: 0, generation: 0, reward: 0, referenceKl: 0, critic: 0, update: 0.5 },
      pairs: { seconds: 3, generation: 1, reward: 0.25, referenceKl: 0, critic: 0, update: 0 },
      rl: { seconds: 0, generation: 2, reward: 0, referenceKl: 0, critic: 0, update: 0 },
    });
    expect(t.of("dpo")).toEqual({ seconds: 0, generation: 0, reward: 0, referenceKl: 0, critic: 0, update: 0 });
    // Copies: what a caller holds does not change under it.
    const before = t.of("pairs");
    t.add("reward", 1);
    expect(before.reward).toBe(0.25);
  });

  it("time() adds the wall time of the work, also when it throws, and passes its value through", async () => {
    const t = new StageTimings();
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    expect(await t.time("critic", async () => (await sleep(20), 7))).toBe(7);
    await expect(t.time("critic", async () => (await sleep(20), Promise.reject(new Error("boom"))))).rejects.toThrow("boom");
    expect(t.of("train").critic).toBeGreaterThan(0.03);
    expect(t.of("train").critic).toBeLessThan(5);
  });
});
