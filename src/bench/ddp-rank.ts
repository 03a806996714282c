// One process of the data-parallel demo-epoch bench (started by ddp.ts, as a rank when the torchrun variables are
// set): node ddp-rank.js <baseDir> <outDir> <items> <repeats> <scoring>. Rank 0 (or the only process) writes
// <outDir>/result.json: per-epoch seconds and phases, and the gradient all-reduces' count, bytes and time.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { demoTrainerOptions } from "../demo/recipes.js";
import { DistributedContext } from "../distributed/context.js";
import { ComlrlTokenizer } from "../models/tokenizer.js";
import { MAGRPOTrainer } from "../trainers/reinforce/magrpo.js";
import { PerCompletionMAGRPOTrainer } from "./per-completion.js";
import { secondsSince } from "./stats.js";

const [baseDir, outDir, items, repeats, scoring] = process.argv.slice(2);
const ddp = process.env.WORLD_SIZE !== undefined;
const dist = ddp ? await DistributedContext.fromEnvironment() : null;
const tokenizer = await ComlrlTokenizer.fromDirectory(baseDir);

async function epoch(run: string, count: number) {
  const options = demoTrainerOptions(baseDir, tokenizer, { outputDir: path.join(outDir, run), epochs: 1, seed: 7, quiet: true, items: count });
  const trainer = await (scoring === "perCompletion" ? PerCompletionMAGRPOTrainer : MAGRPOTrainer).create({ ...options, config: { ...options.config, ...(ddp ? { parallelTraining: "ddp" } : {}) } });
  try {
    const before = dist ? { ...dist.stats } : null;
    const started = performance.now();
    await trainer.train();
    const seconds = secondsSince(started);
    const after = dist?.stats;
    const [envSteps] = dist ? await dist.allReduce([trainer.progress.envStep], "sum") : [trainer.progress.envStep];
    const reductions = after && before ? after.gradientReductions - before.gradientReductions : 0;
    const communication = after && before ? { reductions, bytes: after.gradientBytes - before.gradientBytes, seconds: after.gradientSeconds - before.gradientSeconds } : null;
    return { seconds, timings: trainer.timings.of("train"), envSteps, communication };
  } finally {
    await trainer.close();
  }
}

// Warm-up: one item through a first trainer, so the timed epochs do not pay for the process's first calls.
await epoch("warm-up", 1);
const samples: Record<string, number[]> = { seconds: [], generation: [], reward: [], scoring: [], update: [], other: [], allReduceSeconds: [] };
const details: Record<string, number> = { envSteps: 0 };
for (let r = 0; r < Number(repeats); r++) {
  const run = await epoch(`run-${r}`, Number(items));
  const { generation, reward, referenceKl: scoring, update } = run.timings;
  Object.entries({ seconds: run.seconds, generation, reward, scoring, update, other: run.seconds - generation - reward - scoring - update }).forEach(([phase, value]) => samples[phase].push(value));
  details.envSteps = run.envSteps;
  if (run.communication) {
    samples.allReduceSeconds.push(run.communication.seconds);
    Object.assign(details, { allReducesPerEpoch: run.communication.reductions, allReduceBytesPerStep: run.communication.bytes / Math.max(1, run.communication.reductions) });
  }
}
if (!dist || dist.isMain) writeFileSync(path.join(outDir, "result.json"), JSON.stringify({ samples, details }));
