// A reward function whose promise never settles used to end the process with exit code 13 and no message (Node's
// "unsettled top-level await"): every call is now bounded by rewardTimeoutSeconds, and the error names the item and
// turn. The CLI case runs in a child, where the silent exit happened.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { magrpoConfig } from "../../src/config/index.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { computeRewards, RewardProcessors, withRewardTimeout } from "../../src/rollout/rewards.js";
import type { RewardContext, RewardFunction } from "../../src/rollout/types.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-reward-timeout-"));
const modelDir = path.join(scratch, "tiny");
const context = { itemIndex: 3, item: { prompt: "p" }, turn: 0, prompts: ["a", "b"], promptHistory: [[], []], responseHistory: [[], []] } as unknown as RewardContext;
const never: RewardFunction = () => new Promise<number[]>(() => {});

beforeAll(async () => {
  await createTinyModel(modelDir, { seed: 3, hiddenSize: 32, numLayers: 1 });
});

describe("reward timeout", () => {
  it("a call that never settles is stopped after rewardTimeoutSeconds, naming the item and turn", async () => {
    await expect(computeRewards(withRewardTimeout(never, 0.2), [["x", "y"], ["z", "w"]], context, "node", RewardProcessors.identity())).rejects.toThrow(
      "reward function did not settle within 0.2 s (rewardTimeoutSeconds) at item 3, turn 1, joint actions 0..1",
    );
  });

  it("a call that settles in time is unchanged, and the function's own properties read through", async () => {
    const slow = Object.assign(async (completions: string[][]) => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      return completions[0].map(() => 1);
    }, { rewardRange: [0, 1] });
    const bounded = withRewardTimeout(slow, 5);
    expect(await computeRewards(bounded, [["x", "y"], ["z", "w"]], context, "jointAction", RewardProcessors.identity())).toEqual([1, 1]);
    expect((bounded as unknown as { rewardRange: number[] }).rewardRange).toEqual([0, 1]);
  });

  it("is a config field of every trainer, 600 s by default, refused when not positive", () => {
    expect(magrpoConfig({}).rewardTimeoutSeconds).toBe(600);
    expect(magrpoConfig({ reward_timeout_seconds: 2 }).rewardTimeoutSeconds).toBe(2);
    expect(() => magrpoConfig({ rewardTimeoutSeconds: 0 })).toThrow(/rewardTimeoutSeconds/);
  });

  it("comlrl train with a reward that never settles exits 1 with a message naming the item, not 13 in silence", () => {
    mkdirSync(path.join(scratch, "tasks"));
    writeFileSync(
      path.join(scratch, "tasks", "hang.mjs"),
      `export const dataset = [{ prompt: "a" }, { prompt: "b" }];
export const formatters = [(item) => item.prompt, (item) => item.prompt];
export function rewardFunc() { return new Promise(() => {}); }
`,
    );
    const config = path.join(scratch, "hang.yaml");
    writeFileSync(
      config,
      `task: ${path.join(scratch, "tasks", "hang.mjs")}\nmodel:\n  name: ${modelDir}\noutput:\n  base_dir: ${path.join(scratch, "hang-run")}\n  verbose: false\n  save_final_model: false\n  checkpoint_dir: null\n` +
        `magrpo:\n  num_turns: 1\n  num_train_epochs: 1\n  num_generations: 2\n  max_new_tokens: 2\n  eval_interval: 0\n  reward_timeout_seconds: 1\n`,
    );
    const run = spawnSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "train", "--config", config, "--quiet", "--no-wandb"], { encoding: "utf8", timeout: 90_000 });
    expect(run.signal, run.stderr).toBeNull();
    expect(run.status, run.stderr).toBe(1);
    expect(run.stderr).toMatch(/reward function did not settle within 1 s \(rewardTimeoutSeconds\) at item \d+, turn 1/);
  }, 120_000);
});
