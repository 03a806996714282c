// `comlrl train --config`: real training runs of a tiny model from YAML config files — a built-in task, checkpoints
// and resume, the saved agents — and a user's task module reading its data with loadDataset from a local directory.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { expect, it, vi } from "vitest";
import { runTrain } from "../../src/cli/train.js";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { scratchWithTinyModel } from "../support/scratch.js";

const { scratch, modelDir } = scratchWithTinyModel("comlrl-train-cmd-");

function write(name: string, text: string): string {
  const file = path.join(scratch, name);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  return file;
}

/** A config in LLM_Collab's layout for the built-in cover-vowels task, `epochs` passes over its items. */
function coverVowelsConfig(out: string, epochs: number): string {
  return `agent_model:
  name: ${modelDir}
  temperature: 1.0
  top_p: 1.0
  top_k: 0
dataset:
  type: cover-vowels
seed: 5
output:
  base_dir: ${out}
  verbose: false
magrpo:
  num_turns: 1
  num_train_epochs: ${epochs}
  num_generations: 4
  max_new_tokens: 3
  agent_learning_rate: 1.0e-3
  logging_steps: 1
  eval_interval: 0
`;
}

async function quietly<T>(run: () => Promise<T>): Promise<{ result: T; lines: string[] }> {
  const lines: string[] = [];
  const log = vi.spyOn(console, "log").mockImplementation((...args) => void lines.push(args.join(" ")));
  try {
    return { result: await run(), lines };
  } finally {
    log.mockRestore();
  }
}

it("trains a built-in task from a YAML file, checkpoints, resumes with more epochs, and saves the agents", async () => {
  const out = path.join(scratch, "run");
  const first = await quietly(() => runTrain({ config: write("cv1.yaml", coverVowelsConfig(out, 1)), wandb: false, quiet: false }));
  expect(first.lines.join("\n")).toMatch(/MAGRPOTrainer on task "cover-vowels", 2 agents, 16 train items/);
  expect(readdirSync(path.join(out, "checkpoints"))).toEqual(["checkpoint-1"]);
  const stepsAfterOne = Math.max(...readJsonlMetrics(path.join(out, "metrics.jsonl")).map((r) => r.step));
  expect(stepsAfterOne).toBeGreaterThan(0);

  // The same run raised to 2 epochs continues from checkpoint-1 rather than starting over.
  const second = await quietly(() => runTrain({ config: write("cv2.yaml", coverVowelsConfig(out, 2)), resume: "latest", wandb: false, quiet: false }));
  const text = second.lines.join("\n");
  expect(text).toMatch(/comlrl train: 2 epochs, \d+ env steps/);
  const envSteps = Number(/2 epochs, (\d+) env steps/.exec(text)![1]);
  expect(envSteps).toBe(2 * stepsAfterOne);
  expect(readdirSync(path.join(out, "checkpoints")).sort()).toEqual(["checkpoint-1", "checkpoint-2"]);
  // A restart from scratch would also end at twice the steps; a resume logs only the second epoch, in a folder of its own.
  const resumed = readdirSync(out).filter((name) => name.startsWith("resume-"));
  expect(resumed).toEqual([expect.stringMatching(/^resume-1-/)]);
  const resumedSteps = readJsonlMetrics(path.join(out, resumed[0]!, "metrics.jsonl")).map((r) => r.step);
  expect(Math.min(...resumedSteps)).toBeGreaterThan(stepsAfterOne);
  for (const agent of ["agent_0", "agent_1"]) expect(existsSync(path.join(out, "final_model", agent, "model.safetensors"))).toBe(true);
}, 120_000);

it("trains a user's task module on a local dataset directory read by split", async () => {
  write("data/train.jsonl", ["alpha", "beta", "gamma", "delta", "epsilon"].map((word) => JSON.stringify({ prompt: word })).join("\n"));
  write("data/test.jsonl", JSON.stringify({ prompt: "zeta" }));
  write(
    "tasks/echo.mjs",
    `export const seen = [];
export const dataset = [{ prompt: "unused" }];
export const formatters = [(item) => "Say " + item.prompt, (item) => "Repeat " + item.prompt];
export function rewardFunc(completions, context) {
  seen.push(context.item.prompt);
  return completions[0].map((a, j) => (a.length === completions[1][j].length ? 1 : 0));
}
`,
  );
  const out = path.join(scratch, "module-run");
  const config = write(
    "module.yaml",
    `task: tasks/echo.mjs
model:
  name: ${modelDir}
dataset:
  name: ${path.join(scratch, "data")}
  train_split: train[1:4]
output:
  base_dir: ${out}
  verbose: false
  save_final_model: false
  checkpoint_dir: null
marloo:
  num_turns: 1
  num_train_epochs: 1
  num_generations: 2
  max_new_tokens: 2
  eval_interval: 0
`,
  );
  const { lines } = await quietly(() => runTrain({ config, wandb: false, quiet: false }));
  expect(lines.join("\n")).toMatch(/MARLOOTrainer on task "echo\.mjs", 2 agents, 3 train items/);
  const { seen } = (await import(path.join(scratch, "tasks", "echo.mjs"))) as { seen: string[] };
  expect([...new Set(seen)]).toEqual(["beta", "gamma", "delta"]);
  expect(existsSync(path.join(out, "metrics.jsonl"))).toBe(true);
  expect(existsSync(path.join(out, "final_model"))).toBe(false);
  expect(readFileSync(path.join(out, "metrics.jsonl"), "utf8").length).toBeGreaterThan(0);
}, 120_000);

/** A cover-vowels run of `section` with the fields given, the model section shared by its actors (and critics). */
function sectionConfig(out: string, section: string, fields: string, extra = ""): string {
  return `agent_model:
  name: ${modelDir}
  temperature: 1.0
  top_p: 1.0
  top_k: 0
${extra}dataset:
  type: cover-vowels
seed: 5
output:
  base_dir: ${out}
  verbose: false
${section}:
  num_turns: 1
  num_train_epochs: 1
  max_new_tokens: 3
  agent_learning_rate: 1.0e-3
  logging_steps: 1
  eval_interval: 0
${fields}`;
}

it("trains IAC with a critic per agent from critic_model, and saves agents with their critics", async () => {
  const out = path.join(scratch, "iac-run");
  const config = write("iac.yaml", sectionConfig(out, "iac", "  num_generations: 2\n  rollout_buffer_size: 4\n  critic_learning_rate: 2.0e-3\n", `critic_model:\n  name: ${modelDir}\n`));
  const { lines } = await quietly(() => runTrain({ config, wandb: false, quiet: false }));
  expect(lines.join("\n")).toMatch(/IACTrainer on task "cover-vowels", 2 agents, 16 train items/);
  const updates = readJsonlMetrics(path.join(out, "metrics.jsonl")).filter((r) => r.kind === "update");
  expect(updates.some((r) => typeof r["agent_1/critic/loss"] === "number")).toBe(true);
  expect(readdirSync(path.join(out, "checkpoints"))).toEqual(["checkpoint-1"]);
  for (const agent of ["agent_0", "agent_1"]) expect(existsSync(path.join(out, "final_model", agent, "critic", "value_head.pt"))).toBe(true);
  const noCritic = write("iac-no-critic.yaml", sectionConfig(path.join(scratch, "iac-none"), "iac", ""));
  await expect(runTrain({ config: noCritic, wandb: false, quiet: true })).rejects.toThrow(/iac-no-critic\.yaml: iac needs critics; set critic_model\.name/);
  const critic = write("magrpo-critic.yaml", sectionConfig(path.join(scratch, "magrpo-critic"), "magrpo", "", `critic_model:\n  name: ${modelDir}\n`));
  await expect(runTrain({ config: critic, wandb: false, quiet: true })).rejects.toThrow(/critic_model is for actor-critic trainers \(iac, maac, mappo, marlhf, marlhf_iter\); magrpo has no critic/);
}, 120_000);

it("trains MAPPO from its section, one critic per agent from critic_model, and saves agents and critics", async () => {
  const out = path.join(scratch, "mappo-run");
  const fields = "  num_generations: 2\n  rollout_buffer_size: 4\n  num_iterations: 2\n  gae_lambda: 0.9\n  centralized_critic: false\n  loss_type: grpo\n";
  const config = write("mappo.yaml", sectionConfig(out, "mappo", fields, `critic_model:\n  name: ${modelDir}\n`));
  const { lines } = await quietly(() => runTrain({ config, wandb: false, quiet: false }));
  expect(lines.join("\n")).toMatch(/MAPPOTrainer on task "cover-vowels", 2 agents, 16 train items/);
  const updates = readJsonlMetrics(path.join(out, "metrics.jsonl")).filter((r) => r.kind === "update");
  expect(updates.some((r) => typeof r["critic_1/loss"] === "number")).toBe(true);
  for (const dir of ["critic_0", "critic_1"]) expect(existsSync(path.join(out, "final_model", dir, "value_head.pt"))).toBe(true);
  const noCritic = write("mappo-no-critic.yaml", sectionConfig(path.join(scratch, "mappo-none"), "mappo", ""));
  await expect(runTrain({ config: noCritic, wandb: false, quiet: true })).rejects.toThrow(/mappo-no-critic\.yaml: mappo needs critics; set critic_model\.name/);
  const typo = write("mappo-typo.yaml", sectionConfig(path.join(scratch, "mappo-typo"), "mappo", "  gae_lamda: 0.9\n", `critic_model:\n  name: ${modelDir}\n`));
  await expect(runTrain({ config: typo, wandb: false, quiet: true })).rejects.toThrow(/mappo-typo\.yaml.*gae_lamda.*gae_lambda/);
}, 120_000);

it("trains MADPO from pairs it collects, with snake_case fields validated against the file", async () => {
  const out = path.join(scratch, "madpo-run");
  const fields = "  preference_num_candidates: 4\n  preference_pairs_per_sample: 2\n  train_batch_size: 4\n  dpo_beta: 0.5\n";
  const { lines } = await quietly(() => runTrain({ config: write("madpo.yaml", sectionConfig(out, "madpo", fields)), wandb: false, quiet: false }));
  expect(lines.join("\n")).toMatch(/MADPOTrainer on task "cover-vowels", 2 agents, 16 train items/);
  const metrics = readJsonlMetrics(path.join(out, "metrics.jsonl"));
  expect(metrics.some((r) => r["pairs/total"] !== undefined)).toBe(true);
  expect(metrics.filter((r) => r.kind === "update" && typeof r["agent_0/loss"] === "number").length).toBeGreaterThan(0);
  for (const agent of ["agent_0", "agent_1"]) expect(existsSync(path.join(out, "final_model", agent, "model.safetensors"))).toBe(true);
  const bad = write("madpo-bad.yaml", sectionConfig(path.join(scratch, "madpo-bad"), "madpo", "  dpo_beta: 0\n"));
  await expect(runTrain({ config: bad, wandb: false, quiet: true })).rejects.toThrow(/madpo-bad\.yaml.*dpoBeta|madpo-bad\.yaml.*dpo_beta/);
}, 120_000);

it("madpo_iter and marlhf_iter sections train the iterative trainers: replay shards per iteration, the agents saved", async () => {
  const common = "  num_iterations: 2\n  preference_num_candidates: 4\n  preference_pairs_per_sample: 2\n  train_batch_size: 4\n";
  for (const [section, extra, name] of [
    ["madpo_iter", "", "MADPOIterTrainer"],
    ["marlhf_iter", "  num_generations: 2\n  reward_num_train_epochs: 1\n  reward_train_batch_size: 4\n  reward_held_out_fraction: 0\n", "MARLHFIterTrainer"],
  ]) {
    const out = path.join(scratch, `${section}-run`);
    const { lines } = await quietly(() => runTrain({ config: write(`${section}.yaml`, sectionConfig(out, section, common + extra)), wandb: false, quiet: false }));
    expect(lines.join("\n")).toMatch(new RegExp(`${name} on task "cover-vowels", 2 agents`));
    const metrics = readJsonlMetrics(path.join(out, "metrics.jsonl"));
    expect(metrics.filter((r) => r["iter/current_iteration"] !== undefined).map((r) => r["iter/current_iteration"])).toEqual([1, 2]);
    for (const agent of ["agent_0", "agent_1"]) expect(existsSync(path.join(out, "final_model", agent, "model.safetensors"))).toBe(true);
  }
}, 180_000);

it("refuses a trainer section whose agent count disagrees with the task before loading anything", async () => {
  const wrongCount = write("count.yaml", `model:\n  name: ${modelDir}\ndataset:\n  type: cover-vowels\nmagrpo:\n  num_agents: 3\n`);
  await expect(runTrain({ config: wrongCount, wandb: false, quiet: true })).rejects.toThrow(/magrpo\.num_agents is 3, but task "cover-vowels" has 2 agents/);
});
