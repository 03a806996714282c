// The preference trainers on the demo's task, "cover the vowels", from the demo's tiny base model: MADPO (joint DPO on
// pairs ranked by the task reward) and MARLHF (a joint reward model trained on those pairs, then MAGRPO against its
// scores). Prints each run's task reward before and after training on held-out items, the reward model's held-out
// pairwise accuracy per epoch, and the time taken; writes each run's metrics under --out.
//   npx tsx examples/preference-cover-vowels.ts [--algorithm madpo|marlhf|both] [--seed 3] [--out runs/preference]
import path from "node:path";
import { parseArgs } from "node:util";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../src/tasks/cover-vowels.js";
import { createDemoBaseModel } from "../src/cli/demo.js";
import { MADPOTrainer, MARLHFTrainer, readJsonlMetrics } from "../src/index.js";

const { values } = parseArgs({
  options: { algorithm: { type: "string", default: "both" }, seed: { type: "string", default: "3" }, out: { type: "string", default: "runs/preference" } },
});
if (!["madpo", "marlhf", "both"].includes(values.algorithm!)) throw new RangeError(`--algorithm must be madpo, marlhf or both, got ${values.algorithm}`);
const seed = Number(values.seed);
const out = values.out!;
const base = path.join(out, "base-model");
const tokenizer = await createDemoBaseModel(base, 1);

const task = {
  agents: [base, base],
  rewardFunc: coverVowelsRewardFunc,
  formatters: coverVowelsFormatters((messages) => tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true })),
  evalDataset: coverVowelsDataset(64),
};
// Sampling and evaluation shared by both: four new tokens at temperature 1, eval on 64 held-out items.
const common = { maxNewTokens: 4, temperature: 1, topP: 1, topK: null, evalInterval: 0, evalNumSamples: 64, loggingSteps: 1, seed };

const trainers = {
  // 64 items × 32 joint candidates, the 16 widest-gap pairs of each, four DPO epochs.
  madpo: () =>
    MADPOTrainer.create({
      ...task,
      trainDataset: coverVowelsDataset(64),
      outputDir: path.join(out, "madpo"),
      config: { ...common, numTrainEpochs: 4, preferenceNumCandidates: 32, preferencePairsPerSample: 16, trainBatchSize: 8, agentLearningRate: 5e-3, dpoBeta: 0.2 },
    }),
  // 64 items × 32 joint candidates, 32 pairs each (a quarter of the items held out of reward-model training), four
  // reward-model epochs, then five MAGRPO epochs against the frozen reward model, held near the base policy by the
  // reference KL (without it the policy drifts to where the reward model is wrong and the task reward falls).
  marlhf: () =>
    MARLHFTrainer.create({
      ...task,
      trainDataset: coverVowelsDataset(64),
      outputDir: path.join(out, "marlhf"),
      config: {
        ...common,
        preferenceNumCandidates: 32,
        preferencePairsPerSample: 32,
        rewardNumTrainEpochs: 4,
        rewardTrainBatchSize: 16,
        rewardLearningRate: 3e-3,
        rewardHeldOutFraction: 0.25,
        rlAlgorithm: "magrpo",
        numTrainEpochs: 5,
        referenceKlEnabled: true,
        referenceKlCoef: 0.1,
        numGenerations: 8,
        rolloutBufferSize: 2,
        trainBatchSize: 2,
        agentLearningRate: 2e-3,
      },
    }),
};

const chosen = values.algorithm === "both" ? (["madpo", "marlhf"] as const) : [values.algorithm as "madpo" | "marlhf"];
for (const name of chosen) {
  const started = performance.now();
  const trainer = await trainers[name]();
  try {
    const before = (await trainer.evaluate())["eval/turn_1/reward_mean"];
    await trainer.train();
    const after = (await trainer.evaluate())["eval/turn_1/reward_mean"];
    const seconds = (performance.now() - started) / 1000;
    const accuracies = readJsonlMetrics(path.join(trainer.outputDir, "metrics.jsonl"))
      .map((r) => r["reward_model/heldout_accuracy"])
      .filter((a): a is number => typeof a === "number");
    const pairs = trainer.preferences.pairs.length;
    console.log(`${name}: ${pairs} pairs, task reward on held-out items ${before.toFixed(3)} -> ${after.toFixed(3)}, ${seconds.toFixed(0)} s`);
    if (accuracies.length) console.log(`  reward model held-out pairwise accuracy per epoch: ${accuracies.map((a) => a.toFixed(2)).join(" ")}`);
    console.log(`  metrics: ${path.join(trainer.outputDir, "metrics.jsonl")}`);
  } finally {
    await trainer.close();
  }
}
