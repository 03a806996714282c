// `comlrl train --config` with .gguf files as the agents' and the critic's model (a tiny Llama written as llama.cpp
// writes one, tests/golden/gguf): IAC trains from them, and the saved agents are Hugging Face directories with the
// config the file's metadata gave, which load back.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, expect, it, vi } from "vitest";
import { runTrain } from "../../src/cli/train.js";
import { CausalLM } from "../../src/models/causal-lm.js";

const ggufFile = path.join(import.meta.dirname, "..", "golden", "gguf", "tiny-llama.gguf");
const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-gguf-train-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const file = path.join(scratch, name);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  return file;
}

it("trains IAC from a YAML file whose agent_model and critic_model are .gguf files, and saves loadable agents", async () => {
  write("data/train.jsonl", ["alpha", "beta"].map((word) => JSON.stringify({ prompt: word })).join("\n"));
  write(
    "tasks/echo.mjs",
    `export const dataset = [];
export const formatters = [(item) => "Say " + item.prompt, (item) => "Repeat " + item.prompt];
export const rewardFunc = (completions) => completions[0].map((a, j) => Number(a.length === completions[1][j].length));
`,
  );
  const out = path.join(scratch, "run");
  // YAML is a superset of JSON: the config as an object.
  const settings = {
    task: "tasks/echo.mjs",
    agent_model: { name: ggufFile },
    critic_model: { name: ggufFile },
    dataset: { name: path.join(scratch, "data"), train_split: "train" },
    seed: 5,
    output: { base_dir: out, verbose: false, checkpoint_dir: null },
    iac: { num_turns: 1, num_train_epochs: 1, num_generations: 2, max_new_tokens: 2, agent_learning_rate: 1e-3, critic_learning_rate: 1e-3, eval_interval: 0 },
  };
  const config = write("iac.yaml", JSON.stringify(settings, null, 2));
  const lines: string[] = [];
  const log = vi.spyOn(console, "log").mockImplementation((...args) => void lines.push(args.join(" ")));
  try {
    await runTrain({ config, wandb: false, quiet: false });
  } finally {
    log.mockRestore();
  }
  expect(lines.join("\n")).toMatch(/IACTrainer on task "echo\.mjs", 2 agents, 2 train items/);
  expect(readFileSync(path.join(out, "metrics.jsonl"), "utf8").length).toBeGreaterThan(0);
  const saved = path.join(out, "final_model", "agent_0");
  expect(existsSync(path.join(saved, "model.safetensors"))).toBe(true);
  const config0 = JSON.parse(readFileSync(path.join(saved, "config.json"), "utf8")) as Record<string, unknown>;
  expect(config0).toMatchObject({ model_type: "llama", hidden_size: 256, num_hidden_layers: 2, num_key_value_heads: 2, tie_word_embeddings: false });
  const reloaded = await CausalLM.load(saved);
  const original = await CausalLM.load(ggufFile);
  try {
    expect(reloaded.info().parameterCount).toBe(original.info().parameterCount);
  } finally {
    reloaded.dispose();
    original.dispose();
  }
}, 300_000);
