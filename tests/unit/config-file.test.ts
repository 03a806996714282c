// Config files: JSON with snake_case or camelCase keys, flat or in CoMLRL-style sections; errors name the file.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { centralizedMagrpoConfig, ConfigError, iacConfig, loadConfigFile, magrpoConfig, parseConfigText } from "../../src/config/index.js";
import { loadTrainConfig, trainConfigFromObject } from "../../src/cli/config-file.js";

let scratch: string;
beforeEach(() => {
  scratch = mkdtempSync(path.join(tmpdir(), "comlrl-config-"));
});
afterEach(() => rmSync(scratch, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const file = path.join(scratch, name);
  writeFileSync(file, text);
  return file;
}

describe("loadConfigFile", () => {
  it("reads a flat snake_case file into the same config as camelCase input", async () => {
    const file = write("magrpo.json", JSON.stringify({ num_generations: 8, top_k: null, agent_learning_rate: 1e-5 }));
    const raw = await loadConfigFile(file);
    expect(raw).toEqual({ num_generations: 8, top_k: null, agent_learning_rate: 1e-5 });
    expect(magrpoConfig(raw, { source: file })).toEqual(magrpoConfig({ numGenerations: 8, topK: null, agentLearningRate: 1e-5 }));
  });

  it("reads camelCase files too", async () => {
    const file = write("camel.json", JSON.stringify({ numTurns: 1 }));
    expect(magrpoConfig(await loadConfigFile(file)).numTurns).toBe(1);
  });

  it("reads one section of a sectioned file", async () => {
    const file = write("sections.json", JSON.stringify({ model: { name: "Qwen/Qwen2.5-0.5B" }, magrpo: { num_turns: 1 } }));
    expect(await loadConfigFile(file, { section: "magrpo" })).toEqual({ num_turns: 1 });
    await expect(loadConfigFile(file, { section: "iac" })).rejects.toThrow(`${file} has no "iac" section (it has "model", "magrpo")`);
  });

  it("returns a flat file whole when a section is asked for", async () => {
    const file = write("flat.json", JSON.stringify({ num_turns: 1, agent_devices: ["cpu"] }));
    expect(await loadConfigFile(file, { section: "magrpo" })).toEqual({ num_turns: 1, agent_devices: ["cpu"] });
  });

  it("field errors from a file's values name the file", async () => {
    const file = write("bad-value.json", JSON.stringify({ num_generations: 1 }));
    const raw = await loadConfigFile(file);
    expect(() => magrpoConfig(raw, { source: file })).toThrow(
      `${file}: MAGRPOConfig.numGenerations (num_generations) must be ≥ 2, got 1`,
    );
  });

  it("malformed JSON names the file, line and column", async () => {
    const file = write("broken.json", '{\n  "num_turns": 1,\n}\n');
    const error = await loadConfigFile(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(new RegExp(`^${escape(file)}:3:1: invalid JSON: `));
  });

  it("a truncated file is reported at its end", () => {
    expect(() => parseConfigText('{\n"num_turns": ', "cut.json")).toThrow("cut.json:2:14: invalid JSON: Unexpected end of JSON input");
  });

  it("names the file even when V8 gives no position", () => {
    // V8 words some errors as 'Unexpected token …, "<text>" is not valid JSON', without an offset.
    expect(() => parseConfigText('{"seed": tru}', "t.json")).toThrow(/^t\.json(:\d+:\d+)?: invalid JSON: /);
  });

  it("a byte-order mark is ignored", () => {
    expect(parseConfigText('\uFEFF{"seed": 3}', "bom.json")).toEqual({ seed: 3 });
  });

  it("the top level must be an object", () => {
    expect(() => parseConfigText("[1, 2]", "list.json")).toThrow("list.json: a config file must hold a JSON object, got an array");
    expect(() => parseConfigText("null", "null.json")).toThrow("null.json: a config file must hold a JSON object, got null");
    expect(() => parseConfigText('{"magrpo": 3}', "s.json", { section: "magrpo" })).toThrow('s.json: section "magrpo" must be an object');
  });

  it("a missing file is a ConfigError naming it", async () => {
    const file = path.join(scratch, "missing.json");
    await expect(loadConfigFile(file)).rejects.toThrow(`cannot read config file ${file}`);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

describe("YAML config files", () => {
  it("reads a CoMLRL-style sectioned YAML file like its JSON twin", async () => {
    const file = write(
      "magrpo.yaml",
      ["# CoMLRL layout", "agent_model:", "  name: Qwen/Qwen3-1.7B", "  top_k: null", "magrpo:", "  num_turns: 1", "  agent_learning_rate: 5.0e-06", "  agent_devices:", "  - cpu", "wandb:", "  tags: [magrpo, tldr]", ""].join("\n"),
    );
    expect(await loadConfigFile(file)).toEqual({
      agent_model: { name: "Qwen/Qwen3-1.7B", top_k: null },
      magrpo: { num_turns: 1, agent_learning_rate: 5e-6, agent_devices: ["cpu"] },
      wandb: { tags: ["magrpo", "tldr"] },
    });
    const section = await loadConfigFile(file, { section: "magrpo" });
    expect(magrpoConfig(section, { source: file })).toEqual(magrpoConfig({ numTurns: 1, agentLearningRate: 5e-6, agentDevices: ["cpu"] }));
    expect(parseConfigText("seed: 3\n", "c.yml")).toEqual({ seed: 3 });
  });

  it("syntax errors and duplicate keys name the file, line and column", () => {
    expect(() => parseConfigText("magrpo:\n  num_turns: 1\n  num_turns: 2\n", "dup.yaml")).toThrow(/^dup\.yaml:3:3: duplicate key "num_turns" \(a key may appear once in each mapping\)$/);
    expect(() => parseConfigText("a: [1, 2\nb: 3\n", "flow.yaml")).toThrow(/^flow\.yaml:\d+:\d+: invalid YAML: /);
  });

  it("JSON follows YAML's duplicate-key rule: a key twice in one object is refused at its line and column", () => {
    expect(() => parseConfigText('{"magrpo": {"num_turns": 1,\n  "num_turns" : 2}}', "dup.json")).toThrow(/^dup\.json:2:3: duplicate key "num_turns" \(a key may appear once in each mapping\)$/);
    expect(() => parseConfigText('{"a": "\\"b\\": 1", "b": {"a": 1}, "list": [{"a": 1}, {"a": 2}]}', "ok.json")).not.toThrow();
    expect(() => parseConfigText('{"seed": 1, "se\\u0065d": 2}', "escaped.json")).toThrow(/^escaped\.json:1:13: duplicate key "seed"/);
  });

  it("40k keys are refused quickly by count, in YAML and in JSON", () => {
    const keys = Array.from({ length: 40_000 }, (_, i) => `k${i}`);
    for (const [name, text] of [
      ["many.yaml", keys.map((k) => `${k}: 1`).join("\n")],
      ["many.json", `{${keys.map((k) => `"${k}": 1`).join(", ")}}`],
    ]) {
      const started = performance.now();
      expect(() => parseConfigText(text, name)).toThrow(new RegExp(`^${name.replace(".", "\\.")}:\\d+:\\d+: more than 10000 keys, more than a config file may hold$`));
      expect(performance.now() - started).toBeLessThan(6000);
    }
  });

  it("a 200 MB config file is refused by its size before it is read", async () => {
    const file = write("huge.yaml", "");
    const { truncateSync } = await import("node:fs");
    truncateSync(file, 200 * 1024 * 1024);
    await expect(loadConfigFile(file)).rejects.toThrow(`config file ${file} has 209715200 bytes, more than a config file may (1048576)`);
  });

  it("the top level must be a mapping", () => {
    expect(() => parseConfigText("- 1\n- 2\n", "list.yaml")).toThrow("list.yaml: a config file must hold a YAML mapping, got an array");
    expect(() => parseConfigText("", "empty.yaml")).toThrow("empty.yaml: a config file must hold a YAML mapping, got null");
  });
});

describe("training config files (loadTrainConfig)", () => {
  // LLM_Collab_Writing's configs/magrpo_tldr_config.yaml, field for field.
  const MAGRPO_TLDR = `agent_model:
  name: Qwen/Qwen3-1.7B
  type: qwen
  temperature: 0.7
  top_p: 0.9
  top_k: null
  torch_dtype: auto

agents: null

critic_model: null

critics: null

dataset:
  name: trl-lib/tldr
  type: tldr
  train_split: train[:1100]
  eval_split: test[:1100]

tokenizer:
  padding_side: left

output:
  base_dir: output_magrpo_tldr
  verbose: false
  save_final_model: true
  save_path: output_magrpo_tldr

magrpo:
  parallel_training: none
  agent_devices:
  - cuda:0
  num_turns: 1
  num_train_epochs: 2
  agent_learning_rate: 5.0e-06
  logging_steps: 50
  num_generations: 4
  max_new_tokens: 256
  joint_mode: aligned
  rollout_buffer_size: 1
  train_batch_size: 1
  advantage_normalization: true
  eval_interval: 20
  eval_num_samples: 4
  eval_batch_size: 1

reward_processor:
  enabled: true
  scale_factor: 1.0
  shift: 0.0

wandb:
  project: comlrl
  entity: OpenMLRL
  name: magrpo_tldr
  tags:
  - magrpo
  - tldr
  - multi-agent
`;

  it("reads an LLM_Collab MAGRPO config as it is", async () => {
    const file = write("magrpo_tldr_config.yaml", MAGRPO_TLDR);
    const config = await loadTrainConfig(file);
    expect(config.trainer).toBe("magrpo");
    expect(config.task).toBe("tldr");
    expect(config.model).toBe("Qwen/Qwen3-1.7B");
    expect(config.agents).toBeNull();
    expect(config.dataset).toEqual({ name: "trl-lib/tldr", trainSplit: "train[:1100]", evalSplit: "test[:1100]", revision: undefined, config: undefined });
    expect(config.output).toEqual({
      baseDir: "output_magrpo_tldr",
      verbose: false,
      saveFinalModel: true,
      savePath: "output_magrpo_tldr",
      checkpointDir: path.join("output_magrpo_tldr", "checkpoints"),
      checkpointInterval: 1,
      keepLast: undefined,
    });
    expect(config.rewardProcessor).toEqual({ scaleFactor: 1, shift: 0 });
    expect(config.wandb).toMatchObject({ project: "comlrl", entity: "OpenMLRL", name: "magrpo_tldr", tags: ["magrpo", "tldr", "multi-agent"] });
    // eval_batch_size: 1 is CoMLRL's default and what comlrl does (one item at a time): it loads and is reported.
    expect(config.ignored).toEqual(["agent_model.type", "magrpo.eval_batch_size"]);
    expect(config.trainerConfig).not.toHaveProperty("eval_batch_size");
    // The model section's sampling settings apply, as LLM_Collab's scripts apply them; the section's own fields stay.
    const magrpo = magrpoConfig(config.trainerConfig, { source: file });
    expect(magrpo).toMatchObject({ temperature: 0.7, topP: 0.9, topK: null, numTurns: 1, numTrainEpochs: 2, agentLearningRate: 5e-6, agentDevices: ["cuda:0"] });
    expect((await loadTrainConfig(file, { outputDir: "elsewhere" })).output).toMatchObject({ baseDir: "elsewhere", savePath: "output_magrpo_tldr", checkpointDir: path.join("elsewhere", "checkpoints") });
  });

  it("the trainer section's own sampling fields win; seed and torch_dtype fill in; a task module path is resolved", async () => {
    const file = write(
      "own.yaml",
      "task: ./my-task.mjs\nseed: 42\nmodel:\n  name: ./tiny\n  temperature: 0.7\n  torch_dtype: bfloat16\nmareinforce:\n  temperature: 1.0\noutput:\n  checkpoint_dir: null\n",
    );
    const config = await loadTrainConfig(file);
    expect(config.trainer).toBe("mareinforce");
    expect(config.task).toBe(path.join(scratch, "my-task.mjs"));
    expect(config.trainerConfig).toEqual({ temperature: 1.0, seed: 42, dtype: "bfloat16" });
    expect(config.output.checkpointDir).toBeNull();
    expect(config.output.baseDir).toBe(path.join("runs", "mareinforce-my-task"));
  });

  it("an unsupported CoMLRL field at any value but its default is refused with the file, the field and the reason", () => {
    const raw = (evalBatchSize: unknown) => ({ model: { name: "m" }, dataset: { type: "tldr" }, iac: { eval_batch_size: evalBatchSize } });
    const config = trainConfigFromObject(raw(4), "cfg.yaml");
    expect(config.ignored).toEqual([]);
    const error = (() => {
      try {
        iacConfig(config.trainerConfig, { source: "cfg.yaml" });
      } catch (caught) {
        return caught as ConfigError;
      }
      throw new Error("an eval_batch_size of 4 was accepted");
    })();
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.field).toBe("evalBatchSize");
    expect(error.message).toBe(
      "cfg.yaml: IACConfig.evalBatchSize (eval_batch_size) is not supported: evaluation runs its items one at a time, as CoMLRL 1.4.3 does with its default of 1; remove the field",
    );
    expect(trainConfigFromObject(raw(1), "cfg.yaml").ignored).toEqual(["iac.eval_batch_size"]);
  });

  it("a magrpo section with collaboration_mode: centralized selects centralized MAGRPO", () => {
    const config = trainConfigFromObject({ model: { name: "m" }, dataset: { type: "cover-vowels" }, magrpo: { collaboration_mode: "centralized", num_turns: 1 } }, "c.yaml");
    expect(config.trainer).toBe("centralized_magrpo");
    expect(centralizedMagrpoConfig(config.trainerConfig, { source: "c.yaml" }).collaborationMode).toBe("centralized");
  });

  it("reads the iterative trainers' sections, and names layout errors with the file", () => {
    const base = { model: { name: "m" }, dataset: { type: "tldr" } };
    const read = (raw: Record<string, unknown>) => () => trainConfigFromObject(raw, "cfg.yaml");
    expect(trainConfigFromObject({ ...base, madpo_iter: { num_iterations: 2 } }, "cfg.yaml")).toMatchObject({ trainer: "madpo_iter", trainerConfig: { num_iterations: 2 } });
    expect(trainConfigFromObject({ ...base, marlhf_iter: {} }, "cfg.yaml").trainer).toBe("marlhf_iter");
    expect(read({ ...base })).toThrow("cfg.yaml has no trainer section; add one of magrpo, mareinforce, maremax, marloo, centralized_magrpo");
    expect(read({ ...base, magrpo: {}, marloo: {} })).toThrow("cfg.yaml has several trainer sections (magrpo, marloo)");
    expect(read({ ...base, magrpoo: {} })).toThrow(/cfg\.yaml: config has no field "magrpoo" \(did you mean "magrpo"\?\)/);
    expect(read({ ...base, magrpo: {}, critic_model: { name: "c" } })).toThrow(/critic_model is for actor-critic trainers/);
    expect(read({ model: { name: "m" }, magrpo: {} })).toThrow(/cfg\.yaml: no task; set "task"/);
    expect(read({ dataset: { type: "tldr" }, magrpo: {} })).toThrow(/cfg\.yaml: no model; set model\.name/);
    expect(read({ ...base, agent_model: { name: "x" }, magrpo: {} })).toThrow(/both "agent_model" and "model" sections/);
    expect(read({ ...base, magrpo: {}, output: { verbose: "no" } })).toThrow('cfg.yaml: output.verbose must be true or false, got "no"');
    expect(read({ ...base, magrpo: {}, model: { name: "m", torch_dtype: "float16" } })).toThrow(/model\.torchDtype \(torch_dtype\) must be one of "auto", "float32", "bfloat16"/);
    expect(read({ ...base, magrpo: {}, tokenizer: { padding_side: "right" } })).toThrow(/tokenizer\.paddingSide \(padding_side\) must be one of "left"/);
  });
});

describe("config files: YAML alias bombs", () => {
  it("an alias bomb is a ConfigError naming the file, not a bare ReferenceError", () => {
    const levels = ["a: &a [x, x, x, x, x, x, x, x, x]"];
    for (let i = 1; i < 9; i++) levels.push(`${"abcdefghi"[i]}: &${"abcdefghi"[i]} [${Array(9).fill(`*${"abcdefghi"[i - 1]}`).join(", ")}]`);
    const start = Date.now();
    expect(() => parseConfigText(levels.join("\n"), "bomb.yaml")).toThrow(/^bomb\.yaml: invalid YAML: .*alias/i);
    try {
      parseConfigText(levels.join("\n"), "bomb.yaml");
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
    }
    expect(Date.now() - start).toBeLessThan(2000);
  });
});
