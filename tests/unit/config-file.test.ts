// Config files: JSON with snake_case or camelCase keys, flat or in CoMLRL-style sections; errors name the file.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError, loadConfigFile, magrpoConfig, parseConfigText } from "../../src/config/index.js";

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
    expect(() => parseConfigText("magrpo:\n  num_turns: 1\n  num_turns: 2\n", "dup.yaml")).toThrow(/^dup\.yaml:3:3: invalid YAML: Map keys must be unique$/);
    expect(() => parseConfigText("a: [1, 2\nb: 3\n", "flow.yaml")).toThrow(/^flow\.yaml:\d+:\d+: invalid YAML: /);
  });

  it("the top level must be a mapping", () => {
    expect(() => parseConfigText("- 1\n- 2\n", "list.yaml")).toThrow("list.yaml: a config file must hold a YAML mapping, got an array");
    expect(() => parseConfigText("", "empty.yaml")).toThrow("empty.yaml: a config file must hold a YAML mapping, got null");
  });
});
