// Datasets as a hostile user gives them: a split of thousands of shards under a low open-file limit, null items, and
// rows without the prompt the built-in tasks and the default formatter make prompts from. Each loads, or is refused
// naming the row and field, before any model is loaded.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { runTrain } from "../../src/cli/train.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";
import { coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { illTyped } from "../support/ill-typed.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-dataset-rows-"));
const modelDir = path.join(scratch, "tiny");

beforeAll(async () => {
  await createTinyModel(modelDir, { seed: 3, hiddenSize: 32, numLayers: 1 });
});

describe("many shards", () => {
  it("a split of 1500 shards loads under an open-file limit of 128", () => {
    const dir = path.join(scratch, "sharded");
    const shards = 1500;
    mkdirSync(path.join(dir, "data"), { recursive: true });
    for (let i = 0; i < shards; i++) {
      const name = `train-${String(i).padStart(5, "0")}-of-${String(shards).padStart(5, "0")}.jsonl`;
      writeFileSync(path.join(dir, "data", name), `{"prompt": "row ${i}"}\n`);
    }
    const body = `import { loadDataset } from ${JSON.stringify(path.resolve("src/data/load.ts"))};
      const rows = await loadDataset(${JSON.stringify(dir)}, { split: "train" });
      console.log(rows.length, rows.at(-1).prompt);`;
    const lowLimit = 'ulimit -n 128 && exec "$0" "$@"';
    const run = spawnSync("bash", ["-c", lowLimit, process.execPath, "--import", "tsx", "--input-type=module", "-e", body], { encoding: "utf8", timeout: 120_000 });
    expect(run.stderr).not.toMatch(/EMFILE/);
    expect(run.stdout.trim()).toBe(`${shards} row ${shards - 1}`);
  }, 150_000);
});

describe("items the trainer is given", () => {
  const create = (trainDataset: unknown[], formatters: null | ((item: Record<string, unknown>) => string) = null) =>
    MAGRPOTrainer.create({
      agents: [modelDir, modelDir],
      rewardFunc: coverVowelsRewardFunc,
      formatters,
      trainDataset: illTyped(trainDataset),
      outputDir: path.join(scratch, "items"),
      quiet: true,
      config: { numTurns: 1, numGenerations: 2, maxNewTokens: 2 },
    });

  it("a null item is refused naming its row", async () => {
    await expect(create([{ prompt: "a" }, null])).rejects.toThrow("trainDataset row 1 is null: every item must be an object of fields");
  });

  it("an item without prompt is refused naming its row and the field, when the default formatter makes the prompts", async () => {
    await expect(create([{ prompt: "a" }, { question: "b" }])).rejects.toThrow("trainDataset row 1 has no field prompt: the prompts are made from it");
  });

  it("items without prompt are fine when the formatters read other fields", async () => {
    const trainer = await create([{ question: "b" }], (item) => String(item.question));
    await trainer.close();
  });

  it("comlrl train with a built-in task refuses a dataset row without prompt, naming the dataset, split and row", async () => {
    const data = path.join(scratch, "no-prompt");
    mkdirSync(data);
    writeFileSync(path.join(data, "train.jsonl"), `{"prompt": "ok"}\n{"text": "no prompt here"}\n`);
    const config = path.join(scratch, "no-prompt.yaml");
    writeFileSync(
      config,
      `agent_model:\n  name: ${modelDir}\ndataset:\n  type: cover-vowels\n  name: ${data}\n  train_split: train\n  eval_split: null\noutput:\n  base_dir: ${path.join(scratch, "no-prompt-run")}\n  verbose: false\nmagrpo:\n  num_generations: 2\n  max_new_tokens: 2\n`,
    );
    await expect(runTrain({ config, wandb: false, quiet: true })).rejects.toThrow(`dataset ${data} split train row 1 has no field prompt`);
  });
});
