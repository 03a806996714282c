// Credit assignment over turns, measured: MAGRPO vs IAC vs MAAC on the vowel relay (src/tasks/vowel-relay.ts), a
// cooperative 3-round task rewarded only after the last round, at equal env steps, over several seeds. Writes each
// run's metrics, curves.jsonl (algorithm, seed, env step, eval reward), curves.svg (mean over seeds) and summary.json.
//   npx tsx examples/credit-study.ts [--seeds 3] [--env-steps 1792] [--out runs/credit-study]
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { createTinyModel, getTask, IACTrainer, MAACTrainer, MAGRPOTrainer, readJsonlMetrics, writeLineChartSvg } from "../src/index.js";

const { values } = parseArgs({ options: { seeds: { type: "string", default: "3" }, "env-steps": { type: "string", default: "1792" }, out: { type: "string", default: "runs/credit-study" } } });
const seeds = Array.from({ length: Number(values.seeds) }, (_, i) => i + 1);
const budget = Number(values["env-steps"]);
const out = values.out!;
const turns = 3;
const { rewardFunc, formatters, externalTransition, dataset } = getTask("vowel-relay", { turns });
const task = { rewardFunc, formatters, externalTransition, trainDataset: dataset(), evalDataset: dataset({ split: "eval" }) };
const items = task.trainDataset;

const base = path.join(out, "base");
const tokenizer = await createTinyModel(base, { seed: 7, hiddenSize: 32, numLayers: 1, vocabSize: 300 });

// Shared by every algorithm: sampling, learning rate, no early termination (the reward only comes at the end),
// undiscounted credit (MAGRPO's returns are undiscounted; the critics get γ = 1 to match), eval once per epoch.
const common = { numTurns: turns, maxNewTokens: 2, temperature: 1, topP: 1, topK: 0, earlyTerminationThreshold: null, agentLearningRate: 3e-3, evalInterval: items.length, evalNumSamples: 8, loggingSteps: 1 };
// Env steps per item: MAGRPO's tree with 2 generations branches at every turn (2 + 4 + 8); actor-critic follows one path.
const algorithms = {
  MAGRPO: { stepsPerItem: 2 + 4 + 8, create: (config: object, outputDir: string) => MAGRPOTrainer.create({ ...task, agentModel: base, numAgents: 2, outputDir, quiet: true, config: { ...common, numGenerations: 2, rolloutBufferSize: 2, ...config } }) },
  IAC: { stepsPerItem: turns, create: (config: object, outputDir: string) => IACTrainer.create({ ...task, agentModel: base, criticModel: base, tokenizer, numAgents: 2, outputDir, quiet: true, config: { ...common, numGenerations: 1, rolloutBufferSize: 12, criticLearningRate: 3e-3, discount: 1, ...config } }) },
  MAAC: { stepsPerItem: turns, create: (config: object, outputDir: string) => MAACTrainer.create({ ...task, agentModel: base, criticModel: base, tokenizer, numAgents: 2, outputDir, quiet: true, config: { ...common, numGenerations: 1, rolloutBufferSize: 12, criticLearningRate: 3e-3, discount: 1, ...config } }) },
};

const curves: Array<{ algorithm: string; seed: number; envStep: number; reward: number }> = [];
const timings: Record<string, number[]> = {};
for (const [name, algorithm] of Object.entries(algorithms)) {
  const epochs = Math.ceil(budget / (algorithm.stepsPerItem * items.length));
  for (const seed of seeds) {
    const dir = path.join(out, `${name}-seed${seed}`);
    const started = performance.now();
    const trainer = await algorithm.create({ numTrainEpochs: epochs, seed }, dir);
    await trainer.train();
    await trainer.evaluate();
    await trainer.close();
    const seconds = (performance.now() - started) / 1000;
    (timings[name] ??= []).push(seconds);
    for (const record of readJsonlMetrics(path.join(dir, "metrics.jsonl"))) {
      const reward = record[`eval/turn_1/expected_return`];
      if (record.kind === "eval" && typeof reward === "number") curves.push({ algorithm: name, seed, envStep: record.step, reward });
    }
    const last = curves.filter((c) => c.algorithm === name && c.seed === seed).at(-1);
    console.log(`${name} seed ${seed}: ${epochs} epochs, ${trainer.progress.envStep} env steps, final eval reward ${last?.reward.toFixed(3)}, ${seconds.toFixed(0)} s`);
  }
}

mkdirSync(out, { recursive: true });
writeFileSync(path.join(out, "curves.jsonl"), curves.map((c) => JSON.stringify(c)).join("\n") + "\n");
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const sd = (xs: number[]) => Math.sqrt(mean(xs.map((x) => (x - mean(xs)) ** 2)));
const summary = Object.keys(algorithms).map((name) => {
  const mine = curves.filter((c) => c.algorithm === name);
  const steps = [...new Set(mine.map((c) => c.envStep))].sort((a, b) => a - b);
  const finals = seeds.map((seed) => mine.filter((c) => c.seed === seed).at(-1)!.reward);
  return {
    algorithm: name,
    points: steps.map((step) => [step, mean(mine.filter((c) => c.envStep === step).map((c) => c.reward))] as [number, number]),
    finalMean: mean(finals),
    finalSd: sd(finals),
    finals,
    initial: mean(mine.filter((c) => c.envStep === steps[0]).map((c) => c.reward)),
    secondsPerRun: mean(timings[name]),
  };
});
writeFileSync(path.join(out, "summary.json"), JSON.stringify(summary.map(({ points: _points, ...rest }) => rest), null, 2) + "\n");
await writeLineChartSvg(path.join(out, "curves.svg"), summary.map((s) => ({ name: s.algorithm, points: s.points })), {
  title: `Vowel relay (3 rounds, reward at the end), mean of ${seeds.length} seeds`,
  xLabel: "env steps",
  yLabel: "eval reward",
  yMin: 0,
  yMax: 1,
  references: [{ y: 0.6, label: "one writer alone" }],
});
for (const s of summary) console.log(`${s.algorithm}: ${s.initial.toFixed(3)} -> ${s.finalMean.toFixed(3)} ± ${s.finalSd.toFixed(3)} (finals ${s.finals.map((f) => f.toFixed(2)).join(", ")}), ${s.secondsPerRun.toFixed(0)} s per run`);
