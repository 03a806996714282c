// `comlrl train --config` on the papers' tasks, offline on a tiny model: the TLDR writing task and the HumanEval
// coding task, whose rewards run the model's code in the bubblewrap sandbox. Rewards must be finite and in range.
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { expect, it, vi } from "vitest";
import { runTrain } from "../../src/cli/train.js";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { scratchWithTinyModel } from "../support/scratch.js";

const { scratch, modelDir } = scratchWithTinyModel("comlrl-train-tasks-");

function config(task: string, out: string, extra = ""): string {
  const file = path.join(scratch, `${task}.yaml`);
  mkdirSync(scratch, { recursive: true });
  writeFileSync(
    file,
    `agent_model:
  name: ${modelDir}
task: ${task}
${extra}seed: 5
output:
  base_dir: ${out}
  verbose: false
magrpo:
  num_turns: 1
  num_train_epochs: 1
  num_generations: 2
  max_new_tokens: 8
  agent_learning_rate: 1.0e-3
  logging_steps: 1
  eval_interval: 0
`,
  );
  return file;
}

async function trainAndReadRewards(task: string, extra = ""): Promise<number[]> {
  const out = path.join(scratch, task);
  const log = vi.spyOn(console, "log").mockImplementation(() => {});
  try {
    await runTrain({ config: config(task, out, extra), wandb: false, quiet: true });
  } finally {
    log.mockRestore();
  }
  expect(existsSync(path.join(out, "final_model", "agent_1", "model.safetensors"))).toBe(true);
  return readJsonlMetrics(path.join(out, "metrics.jsonl")).flatMap((r) => (r.kind === "train" && typeof r["turn_1/reward_mean"] === "number" ? [r["turn_1/reward_mean"] as number] : []));
}

it("trains the TLDR writing task from a config file", async () => {
  const rewards = await trainAndReadRewards("tldr");
  expect(rewards.length).toBeGreaterThan(0);
  for (const r of rewards) expect(r >= 0 && r <= 3).toBe(true);
}, 300_000);

it("trains the HumanEval coding task from a config file, the model's code run in the sandbox", async () => {
  const rewards = await trainAndReadRewards("humaneval", "task_options:\n  mode: plain\n  testTimeoutMs: 2000\n");
  expect(rewards.length).toBeGreaterThan(0);
  for (const r of rewards) expect(r >= 0 && r <= 4).toBe(true);
}, 300_000);
