// Shared bits of the examples: argument parsing, JSONL datasets, and a model to train when none is named.
import { readFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { createTinyModel, type Item } from "../src/index.js";

export function readJsonl(file: string): Item[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.trim())
    .map((line, i) => {
      try {
        return JSON.parse(line) as Item;
      } catch (error) {
        throw new Error(`${file}:${i + 1}: ${(error as Error).message}`);
      }
    });
}

export const dataFile = (name: string) => path.join(path.dirname(new URL(import.meta.url).pathname), "data", name);

/** --model (a hub id like Qwen/Qwen2.5-0.5B or a local HF dir; default: a tiny model made here), --epochs, --out. */
export async function exampleArgs(name: string, defaults: { epochs: number }) {
  const { values } = parseArgs({
    options: {
      model: { type: "string" },
      epochs: { type: "string", default: String(defaults.epochs) },
      out: { type: "string", default: path.join("runs", name) },
    },
  });
  let model = values.model;
  if (!model) {
    model = path.join(values.out!, "tiny-model");
    await createTinyModel(model, { seed: 1 });
    console.log(`no --model given: training a tiny model made in ${model}`);
  }
  return { model, epochs: Number(values.epochs), out: values.out! };
}
