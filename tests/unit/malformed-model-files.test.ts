// Malformed files a model or checkpoint directory can hold, each refused with an error naming the file and the
// field, not a bare TypeError: a rope_parameters layer kind that is not an object, a model.safetensors.index.json
// whose weight_map names a number or a file outside the model directory, and a checkpoint manifest that is null or
// has a null entry.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CheckpointError, verifyManifest, writeManifest } from "../../src/checkpoint/manifest.js";
import { ConfigError } from "../../src/config/fields.js";
import { weightFiles } from "../../src/models/model-files.js";
import { parseModelConfig } from "../../src/models/config.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-malformed-"));
const gemma3 = (): Record<string, unknown> => JSON.parse(readFileSync(path.join(import.meta.dirname, "..", "golden", "gemma3_text", "config.json"), "utf8"));

describe("malformed model files", () => {
  it("a rope_parameters layer kind that is null or not an object names the field", () => {
    for (const value of [null, 3, [1]]) {
      const raw = { ...gemma3(), rope_parameters: { full_attention: value, sliding_attention: { rope_type: "default", rope_theta: 10000 } } };
      expect(() => parseModelConfig(raw, "m/config.json")).toThrow(ConfigError);
      expect(() => parseModelConfig(raw, "m/config.json")).toThrow(`rope_parameters.full_attention must be an object of rope parameters, got ${JSON.stringify(value)}`);
    }
  });

  it("a weight_map that names a number, nothing, or a file outside the model directory is refused naming the tensor", () => {
    const model = path.join(scratch, "model");
    mkdirSync(model);
    writeFileSync(path.join(scratch, "outside.safetensors"), "not the model's");
    const index = path.join(model, "model.safetensors.index.json");
    const cases: Array<[unknown, string]> = [
      [7, "7"],
      ["", '""'],
      ["../outside.safetensors", '"../outside.safetensors"'],
      [path.join(scratch, "outside.safetensors"), JSON.stringify(path.join(scratch, "outside.safetensors"))],
    ];
    for (const [shard, shown] of cases) {
      writeFileSync(index, JSON.stringify({ weight_map: { "model.embed_tokens.weight": shard } }));
      expect(() => weightFiles(model), shown).toThrow(`${index}: weight_map["model.embed_tokens.weight"] must name a shard file inside ${model}, got ${shown}`);
    }
    writeFileSync(path.join(model, "model-00001-of-00001.safetensors"), "shard");
    writeFileSync(index, JSON.stringify({ weight_map: { a: "model-00001-of-00001.safetensors", b: "./model-00001-of-00001.safetensors" } }));
    expect(weightFiles(model)).toEqual([path.join(model, "model-00001-of-00001.safetensors")]);
  });
});

describe("a malformed checkpoint manifest", () => {
  it("a null manifest, a null files map or a null entry is a CheckpointError naming the manifest", async () => {
    const dir = path.join(scratch, "checkpoint");
    mkdirSync(dir);
    writeFileSync(path.join(dir, "state.json"), "{}");
    await writeManifest(dir);
    const manifestFile = path.join(dir, "manifest.json");
    const written = JSON.parse(readFileSync(manifestFile, "utf8"));
    const cases: Array<[unknown, RegExp]> = [
      [null, /manifest\.json: not a checkpoint manifest/],
      [{ ...written, files: [1] }, /manifest\.json: not a checkpoint manifest/],
      [{ ...written, files: { "state.json": null } }, /manifest\.json: entry "state\.json" must be \{ size, sha256 \}, got null/],
      [{ ...written, files: { "state.json": { size: "2", sha256: 1 } } }, /manifest\.json: entry "state\.json" must be \{ size, sha256 \}/],
    ];
    for (const [manifest, message] of cases) {
      writeFileSync(manifestFile, JSON.stringify(manifest));
      await expect(verifyManifest(dir)).rejects.toThrow(CheckpointError);
      await expect(verifyManifest(dir)).rejects.toThrow(message);
    }
  });
});
