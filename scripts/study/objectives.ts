// The objectives study (docs/objectives-study.md): each objective of the MAGRPO family trained over several seeds on
// the demo task (cover the vowels, the demo's own model and recipe) and on the vowel relay (3 rounds, rewarded only
// at the end: the credit study's MAGRPO recipe). Records the mean train reward of every epoch and the wall time per
// epoch of every run, and writes docs/data/objectives-study-<task>.json (a perf-table with the curves beside it);
// scripts/study/objectives-plot.ts draws the curves from those files.
//   npx tsx scripts/study/objectives.ts [--seeds 3] [--demo-epochs 10] [--relay-epochs 8] [--parallel 2]
//       [--objectives comlrl,grpo,...] [--tasks demo,relay] [--out runs/objectives-study] [--data docs/data] [--from-results]
// Every run is a child process with one intra-op thread (COMLRL_NUM_THREADS=1); --parallel of them at a time.
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { createDemoBaseModel, demoTrainerOptions } from "../../src/demo/recipes.js";
import { createTinyModel, getTask, MAGRPOTrainer, readJsonlMetrics, runtimeInfo } from "../../src/index.js";

/** Each objective as the study trains it: TRL's settings of that method, two updates per rollout for the ratio losses. */
export const OBJECTIVES: Record<string, { config: Record<string, unknown>; description: string }> = {
  comlrl: { config: {}, description: "CoMLRL's on-policy sum (the default): one update per rollout, CoMLRL's advantages" },
  grpo: { config: { lossType: "grpo", scaleRewards: "group", numIterations: 2 }, description: "grpo, group-scaled advantages, ε 0.2, 2 iterations" },
  dapo: { config: { lossType: "dapo", scaleRewards: "group", epsilonHigh: 0.28, zeroVarianceFilter: 0, numIterations: 2 }, description: "dapo, clip-higher 0.28, zero-variance filter, 2 iterations" },
  dr_grpo: { config: { lossType: "dr_grpo", scaleRewards: "none", numIterations: 2 }, description: "dr_grpo, unscaled advantages, 2 iterations" },
  gspo: { config: { lossType: "grpo", importanceSamplingLevel: "sequence", scaleRewards: "group", epsilon: 3e-4, epsilonHigh: 4e-4, numIterations: 2 }, description: "grpo with sequence ratios, ε 3e-4 / 4e-4 (GSPO's), 2 iterations" },
  cispo: { config: { lossType: "cispo", scaleRewards: "group", epsilonHigh: 5, numIterations: 2 }, description: "cispo, ratio cap 5, 2 iterations" },
};

/** The tasks: the rewarded turn's reward_mean is the curve. */
const TASKS = {
  demo: { title: "cover the vowels (the demo: 1 turn, 16 items, 8 generations)", rewardKey: "turn_1/reward_mean", soloCeiling: 0.6 },
  relay: { title: "vowel relay (3 rounds, reward only at the end, 16 items, 2 generations per node)", rewardKey: "turn_3/reward_mean", soloCeiling: 0.6 },
} as const;
type TaskName = keyof typeof TASKS;

interface RunResult {
  task: TaskName;
  objective: string;
  seed: number;
  /** Mean of the rewarded turn's reward_mean over each epoch's train records. */
  epochRewards: number[];
  secondsPerEpoch: number;
}

const { values } = parseArgs({
  options: {
    seeds: { type: "string", default: "3" },
    "demo-epochs": { type: "string", default: "10" },
    "relay-epochs": { type: "string", default: "8" },
    parallel: { type: "string", default: "2" },
    objectives: { type: "string", default: Object.keys(OBJECTIVES).join(",") },
    tasks: { type: "string", default: Object.keys(TASKS).join(",") },
    out: { type: "string", default: "runs/objectives-study" },
    data: { type: "string", default: "docs/data" },
    // Writes the data files again from the runs' results under --out, without training.
    "from-results": { type: "boolean", default: false },
    // Internal: one run, in a child process.
    run: { type: "string" },
  },
});
const out = path.resolve(values.out!);
const epochsOf = (task: TaskName) => Number(task === "demo" ? values["demo-epochs"] : values["relay-epochs"]);
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
// Sample standard deviation over seeds (n − 1).
const sd = (xs: readonly number[]) => Math.sqrt(xs.reduce((a, x) => a + (x - mean(xs)) ** 2, 0) / Math.max(1, xs.length - 1));

async function trainOne(task: TaskName, objective: string, seed: number): Promise<RunResult> {
  const epochs = epochsOf(task);
  const outputDir = path.join(out, task, `${objective}-seed${seed}`);
  const objectiveConfig = OBJECTIVES[objective].config;
  let trainer: MAGRPOTrainer;
  if (task === "demo") {
    // Each run writes its own copy of the (deterministic) base model, so that parallel runs never share a file.
    const baseDir = path.join(outputDir, "base");
    const tokenizer = await createDemoBaseModel(baseDir, 7);
    const options = demoTrainerOptions(baseDir, tokenizer, { outputDir, epochs, seed, quiet: true });
    trainer = await MAGRPOTrainer.create({ ...options, sampleLogInterval: 0, config: { ...options.config, ...objectiveConfig } });
  } else {
    const baseDir = path.join(outputDir, "base");
    await createTinyModel(baseDir, { seed: 7, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
    const { rewardFunc, formatters, externalTransition, dataset } = getTask("vowel-relay", { turns: 3 });
    trainer = await MAGRPOTrainer.create({
      rewardFunc, formatters, externalTransition, trainDataset: dataset(), agentModel: baseDir, numAgents: 2, outputDir, quiet: true,
      config: {
        numTurns: 3, maxNewTokens: 2, temperature: 1, topP: 1, topK: 0, earlyTerminationThreshold: null, agentLearningRate: 3e-3, evalInterval: 0, loggingSteps: 1,
        numGenerations: 2, rolloutBufferSize: 2, numTrainEpochs: epochs, seed, ...objectiveConfig,
      },
    });
  }
  const started = performance.now();
  await trainer.train();
  const seconds = (performance.now() - started) / 1000;
  const stepsPerEpoch = trainer.progress.envStep / epochs;
  await trainer.close();
  const key = TASKS[task].rewardKey;
  const byEpoch: number[][] = Array.from({ length: epochs }, () => []);
  for (const record of readJsonlMetrics(path.join(outputDir, "metrics.jsonl"))) {
    const reward = record[key];
    if (record.kind !== "train" || typeof reward !== "number") continue;
    byEpoch[Math.min(epochs - 1, Math.floor((record.step - 1) / stepsPerEpoch))].push(reward);
  }
  return { task, objective, seed, epochRewards: byEpoch.map(mean), secondsPerEpoch: seconds / epochs };
}

/** Runs `jobs` as child processes, `parallel` at a time, each with one intra-op thread. */
async function runAll(jobs: string[], parallel: number): Promise<RunResult[]> {
  const results: RunResult[] = [];
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const job = jobs[next++];
      const resultFile = path.join(out, "results", `${job.replace(/:/g, "-")}.json`);
      const started = performance.now();
      await new Promise<void>((resolve, reject) => {
        const child = spawn(process.execPath, [...process.execArgv, process.argv[1], "--run", job, "--out", out, "--demo-epochs", values["demo-epochs"]!, "--relay-epochs", values["relay-epochs"]!], {
          env: { ...process.env, COMLRL_NUM_THREADS: "1" },
          stdio: ["ignore", "inherit", "inherit"],
        });
        child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`run ${job} exited with ${code}`))));
      });
      const result = JSON.parse(readFileSync(resultFile, "utf8")) as RunResult;
      results.push(result);
      console.log(`${job}: final epoch reward ${result.epochRewards.at(-1)!.toFixed(3)}, ${result.secondsPerEpoch.toFixed(1)} s/epoch (${((performance.now() - started) / 1000).toFixed(0)} s with loading)`);
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return results;
}

/** The study's table and curves for one task, as a docs/data perf-table file. */
function taskData(task: TaskName, results: RunResult[], seeds: number[], objectives: string[], command: string) {
  const epochs = epochsOf(task);
  const mine = (objective: string) => seeds.map((seed) => results.find((r) => r.task === task && r.objective === objective && r.seed === seed)!);
  // The final reward: the mean over the last two epochs of each run, then mean ± sd over seeds.
  const finalOf = (r: RunResult) => mean(r.epochRewards.slice(-2));
  const info = runtimeInfo();
  return {
    title: `Objectives on ${TASKS[task].title}, ${epochs} epochs, ${seeds.length} seeds each`,
    machine: `${os.cpus().length}-core ${os.cpus()[0]?.model.trim() ?? "CPU"} VM shared with other jobs (timings noisy); libtorch ${info.torchVersion} CPU, fp32, 1 intra-op thread per run, 2 runs at a time`,
    date: new Date().toISOString().slice(0, 10),
    command,
    conditions: `Rewards are the mean train reward of an epoch (the agents learn within epoch 1 already). Final: each run's mean over its last 2 epochs; over all epochs: each run's mean over every epoch (how fast it learned); then mean ± sample sd over the seeds (${seeds.join(", ")}). Seconds per epoch: train() wall time / epochs, mean over seeds.`,
    columns: ["objective", "settings", "epoch 1", "over all epochs (mean ± sd)", "final (mean ± sd)", "final per seed", "s / epoch"],
    rows: objectives.map((objective) => {
      const runs = mine(objective);
      const finals = runs.map(finalOf);
      const overall = runs.map((r) => mean(r.epochRewards));
      return [
        objective,
        OBJECTIVES[objective].description,
        mean(runs.map((r) => r.epochRewards[0])).toFixed(3),
        `${mean(overall).toFixed(3)} ± ${sd(overall).toFixed(3)}`,
        `${mean(finals).toFixed(3)} ± ${sd(finals).toFixed(3)}`,
        finals.map((f) => f.toFixed(2)).join(", "),
        mean(runs.map((r) => r.secondsPerEpoch)).toFixed(1),
      ];
    }),
    soloCeiling: TASKS[task].soloCeiling,
    curves: objectives.map((objective) => ({ objective, seeds: mine(objective).map((r) => ({ seed: r.seed, epochRewards: r.epochRewards, secondsPerEpoch: r.secondsPerEpoch })) })),
  };
}

if (values.run) {
  const [task, objective, seed] = values.run.split(":");
  const result = await trainOne(task as TaskName, objective, Number(seed));
  mkdirSync(path.join(out, "results"), { recursive: true });
  writeFileSync(path.join(out, "results", `${values.run.replace(/:/g, "-")}.json`), JSON.stringify(result) + "\n");
} else {
  const seeds = Array.from({ length: Number(values.seeds) }, (_, i) => i + 1);
  const objectives = values.objectives!.split(",");
  const tasks = values.tasks!.split(",") as TaskName[];
  for (const o of objectives) if (!(o in OBJECTIVES)) throw new Error(`--objectives: unknown objective "${o}" (known: ${Object.keys(OBJECTIVES).join(", ")})`);
  for (const t of tasks) if (!(t in TASKS)) throw new Error(`--tasks: unknown task "${t}" (known: ${Object.keys(TASKS).join(", ")})`);
  // Seeds outermost, objectives alternating, so that load on the shared machine falls on every objective alike.
  const jobs = tasks.flatMap((task) => seeds.flatMap((seed) => objectives.map((objective) => `${task}:${objective}:${seed}`)));
  const results = values["from-results"]
    ? jobs.map((job) => JSON.parse(readFileSync(path.join(out, "results", `${job.replace(/:/g, "-")}.json`), "utf8")) as RunResult)
    : await runAll(jobs, Number(values.parallel));
  const command = `npx tsx scripts/study/objectives.ts ${process.argv.slice(2).join(" ")}`.trim();
  mkdirSync(values.data!, { recursive: true });
  for (const task of tasks) {
    const file = path.join(values.data!, `objectives-study-${task}.json`);
    writeFileSync(file, JSON.stringify(taskData(task, results, seeds, objectives, command), null, 2) + "\n");
    console.log(`wrote ${file}`);
  }
}
