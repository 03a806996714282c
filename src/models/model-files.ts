// The files of a Hugging Face model directory: which safetensors hold the weights, and its JSON files read safely.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { irregularFileKind } from "../util/regular-file.js";
import { MAX_JSON_DEPTH, ModelLoadError, nestingDepth } from "./weights-check.js";

/** A FIFO or device read whole would block the load forever. */
export function requireRegularFile(file: string): string {
  const irregular = irregularFileKind(file);
  if (irregular) throw new ModelLoadError(`${file} is not a regular file (${irregular})`);
  return file;
}

/** A model directory's JSON file (config.json, an index), read as an object; what is wrong with it names the file. */
export function readJson(file: string): Record<string, unknown> {
  requireRegularFile(file);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new ModelLoadError(`${file}: cannot read (${(error as Error).message})`);
  }
  // Shallow in every real model; a deep one would overflow the stack wherever a value of it is shown in an error.
  if (nestingDepth(text, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) throw new ModelLoadError(`${file}: nests deeper than ${MAX_JSON_DEPTH} levels: not a model's JSON file`);
  try {
    const value = JSON.parse(text);
    if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error("not a JSON object");
    return value as Record<string, unknown>;
  } catch (error) {
    throw new ModelLoadError(`${file}: malformed JSON (${(error as Error).message})`);
  }
}

/** The safetensors files of an HF directory: model.safetensors, or the shards its index names. */
export function weightFiles(dir: string): string[] {
  const single = path.join(dir, "model.safetensors");
  if (existsSync(single)) return [requireRegularFile(single)];
  const indexFile = path.join(dir, "model.safetensors.index.json");
  if (existsSync(indexFile)) {
    const weightMap = readJson(indexFile).weight_map;
    if (typeof weightMap !== "object" || weightMap === null || Array.isArray(weightMap)) throw new ModelLoadError(`${indexFile}: weight_map is missing`);
    const shards = new Set<string>();
    for (const [tensor, file] of Object.entries(weightMap)) {
      // A shard is a file of this directory: an index may not reach another model's, or any file on the machine.
      const shard = typeof file === "string" && file !== "" ? path.resolve(dir, file) : null;
      if (shard === null || path.relative(path.resolve(dir), shard).split(path.sep)[0] === "..") {
        throw new ModelLoadError(`${indexFile}: weight_map[${JSON.stringify(tensor)}] must name a shard file inside ${dir}, got ${JSON.stringify(file)}`);
      }
      shards.add(shard);
    }
    for (const shard of shards) if (!existsSync(shard)) throw new ModelLoadError(`${indexFile}: shard ${shard} does not exist`);
    return [...shards].map(requireRegularFile);
  }
  const other = ["pytorch_model.bin", "model.bin"].find((name) => existsSync(path.join(dir, name)));
  throw new ModelLoadError(
    other
      ? `${dir}: only ${other} was found; comlrl reads safetensors (convert with transformers' save_pretrained(safe_serialization=True))`
      : `${dir}: no model.safetensors or model.safetensors.index.json`,
  );
}
