// The preference trainers on the demo's task, "cover the vowels", from the demo's tiny base model (recipes in
// src/demo/preference.ts): MADPO and MARLHF. Prints each run's task reward on 64 held-out items before and after
// training, the reward model's held-out pairwise accuracy per epoch, and the training time; writes metrics under --out.
//   npx tsx examples/preference-cover-vowels.ts [--algorithm madpo|marlhf|both] [--seed 3] [--items 64] [--out runs/preference]
// (--items: train and held-out items each; fewer make a quick run, not the measured recipe.)
import path from "node:path";
import { parseArgs } from "node:util";
import { createDemoBaseModel } from "../src/demo/recipes.js";
import { madpoDemoOptions, marlhfDemoOptions, trainMeasuringTaskReward } from "../src/demo/preference.js";
import { MADPOTrainer, MARLHFTrainer, readJsonlMetrics } from "../src/index.js";

const { values } = parseArgs({
  options: {
    algorithm: { type: "string", default: "both" },
    seed: { type: "string", default: "3" },
    items: { type: "string", default: "64" },
    out: { type: "string", default: "runs/preference" },
  },
});
if (!["madpo", "marlhf", "both"].includes(values.algorithm!)) throw new RangeError(`--algorithm must be madpo, marlhf or both, got ${values.algorithm}`);
const out = values.out!;
const base = path.join(out, "base-model");
const tokenizer = await createDemoBaseModel(base, 1);
const items = Number(values.items);
const run = (name: string) => ({ outputDir: path.join(out, name), seed: Number(values.seed), quiet: false, items });
const trainers = {
  madpo: () => MADPOTrainer.create(madpoDemoOptions(base, tokenizer, run("madpo"))),
  marlhf: () => MARLHFTrainer.create(marlhfDemoOptions(base, tokenizer, run("marlhf"))),
};

const chosen = values.algorithm === "both" ? (["madpo", "marlhf"] as const) : [values.algorithm as "madpo" | "marlhf"];
for (const name of chosen) {
  const trainer = await trainers[name]();
  try {
    const { before, after, seconds } = await trainMeasuringTaskReward(trainer);
    const accuracies = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl"))
      .map((r) => r["reward_model/heldout_accuracy"])
      .filter((a): a is number => typeof a === "number");
    console.log(`${name}: ${trainer.preferences.pairs.length} pairs, task reward on held-out items ${before.toFixed(3)} -> ${after.toFixed(3)}, ${seconds.toFixed(0)} s`);
    if (accuracies.length) console.log(`  reward model held-out pairwise accuracy per epoch: ${accuracies.map((a) => a.toFixed(2)).join(" ")}`);
    console.log(`  metrics: ${path.join(trainer.outputDir, "metrics.jsonl")}`);
  } finally {
    await trainer.close();
  }
}
