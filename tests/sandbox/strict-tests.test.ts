// Custom items may carry asserts the grader cannot split (one naming the code's own helper runs in the code's process,
// where the code can forge its verdict): by default they score 0 in the reward, so wrong code with a value that
// equals anything earns what the same wrong code earns honestly. strictTests: false counts them, as CoMLRL does.
import { describe, expect, it } from "vitest";
import type { Item, RewardContext } from "../../src/rollout/types.js";
import { getTask } from "../../src/tasks/registry.js";

const context = (item: Item): RewardContext => ({ itemIndex: 0, item, turn: 0, prompts: [], promptHistory: [[], []], responseHistory: [[], []] });

// The second assert names aux, which exists only in the code's process: the grader runs it there.
const item: Item = {
  prompt: "def double(x):\n    \"\"\"Twice x.\"\"\"\n",
  entry_point: "double",
  test: "def check(candidate):\n    assert candidate(2) == 4\n    assert aux(candidate(3)) == 6\n",
};
const aux = "def aux(x):\n    return x";
const honest = "def double(x):\n    return aux(x) + 1";
const forged = "def double(x):\n    class Anything(int):\n        __eq__ = lambda self, other: True\n    return Anything(aux(x) + 1)";

async function reward(options: Record<string, unknown>, main: string): Promise<number> {
  const task = getTask("humaneval", { testTimeoutMs: 2000, ...options });
  return ((await task.rewardFunc([[aux], [main]], context(item))) as number[])[0];
}

describe("strict tests", () => {
  it("by default an in-process assert scores 0: the forged answer earns the honest 1.5, not 3.5", async () => {
    const [fair, faked] = await Promise.all([reward({}, honest), reward({}, forged)]);
    expect(fair).toBeCloseTo(1.5, 12);
    expect(faked).toBeCloseTo(1.5, 12);
  });

  it("strictTests: false counts in-process asserts (the forged pass included)", async () => {
    expect(await reward({ strictTests: false }, forged)).toBeCloseTo(3.5, 12);
  });

  it("strictTests must be a boolean", () => {
    expect(() => getTask("humaneval", { strictTests: "yes" })).toThrow(/strictTests/);
  });
});
