// Shared bits of the examples: argument parsing, JSONL datasets, a model to train when none is named, and the
// trainer inputs every registered-task example starts from.
import { readFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { createTinyModel, getTask, type Item } from "../src/index.js";

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

/**
 * --model (a hub id like Qwen/Qwen2.5-0.5B or a local HF dir; default: $COMLRL_MODEL, else a tiny model made here),
 * --epochs, --items (train on the first n items only: a quick run), --out.
 */
export async function exampleArgs(name: string, defaults: { epochs: number }) {
  const { values } = parseArgs({
    options: {
      model: { type: "string" },
      epochs: { type: "string", default: String(defaults.epochs) },
      items: { type: "string" },
      out: { type: "string", default: path.join("runs", name) },
    },
  });
  let model = values.model ?? process.env.COMLRL_MODEL;
  if (!model) {
    model = path.join(values.out!, "tiny-model");
    await createTinyModel(model, { seed: 1 });
    console.log(`no --model given: training a tiny model made in ${model}`);
  }
  const items = values.items === undefined ? undefined : Number(values.items);
  if (items !== undefined && !(Number.isInteger(items) && items >= 1)) throw new RangeError(`--items must be a positive integer, got ${values.items}`);
  return { model, epochs: Number(values.epochs), items, out: values.out! };
}

/**
 * An example on a registered task: its arguments, and the trainer inputs it shares with every such example (two
 * agents of --model on the task's first --items items, reward and formatters, writing into --out).
 */
export async function taskExample(taskName: string, exampleName: string, defaults: { epochs: number }) {
  const task = getTask(taskName);
  const args = await exampleArgs(exampleName, defaults);
  const inputs = {
    agentModel: args.model,
    numAgents: 2,
    rewardFunc: task.rewardFunc,
    formatters: task.formatters,
    trainDataset: task.dataset({ limit: args.items }),
    outputDir: args.out,
  };
  return { args, inputs };
}
