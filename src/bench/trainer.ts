// The whole trainer: one MAGRPO epoch of the demo (two tiny agents, cover-the-vowels), timed end to end and split
// into the trainer's own phase timings. Run once with batched scoring and once per completion, the baseline the
// batched update has to beat.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createDemoBaseModel, demoTrainerOptions } from "../demo/recipes.js";
import { MAGRPOTrainer } from "../trainers/reinforce/magrpo.js";
import { PerCompletionMAGRPOTrainer } from "./per-completion.js";
import { measureLayoutEpoch } from "./ddp.js";
import { secondsSince } from "./stats.js";
import { PHASE_PEAK_PREFIX, type TrainerCase, type WorkerOutput } from "./types.js";
import type { Trainer } from "../trainers/lifecycle/trainer.js";

const SEED = 7;

/** Each "stage/phase" peak resident MiB of a trainer's run, as samples keyed PHASE_PEAK_PREFIX + "stage/phase". */
export function phasePeaks(trainer: Trainer): Record<string, number> {
  return Object.fromEntries(
    Object.keys(trainer.timings.stages).flatMap((stage) =>
      Object.entries(trainer.timings.memory?.of(stage) ?? {}).map(([phase, m]) => [`${PHASE_PEAK_PREFIX}${stage}/${phase}`, m.peakRssBytes / 2 ** 20]),
    ),
  );
}

/** Adds one run's phase peaks to the benchmark's samples. */
export function addPhasePeaks(samples: Record<string, number[]>, peaks: Record<string, number>): void {
  for (const [key, value] of Object.entries(peaks)) (samples[key] ??= []).push(value);
}

/** The trainer places its agents by its config's defaults (as the demo does), so the suite's device is not used. */
export async function measureTrainerEpoch(spec: TrainerCase): Promise<WorkerOutput> {
  if (spec.layout) return measureLayoutEpoch({ ...spec, layout: spec.layout });
  const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-bench-trainer-"));
  try {
    const baseDir = path.join(scratch, "base-model");
    const tokenizer = await createDemoBaseModel(baseDir, SEED);
    const epoch = async (run: string, items: number) => {
      const options = demoTrainerOptions(baseDir, tokenizer, { outputDir: path.join(scratch, run), epochs: 1, seed: SEED, quiet: true, items });
      const trainer = await (spec.scoring === "perCompletion" ? PerCompletionMAGRPOTrainer : MAGRPOTrainer).create(options);
      try {
        const started = performance.now();
        await trainer.train();
        return { seconds: secondsSince(started), timings: trainer.timings.of("train"), envSteps: trainer.progress.envStep, peaks: phasePeaks(trainer) };
      } finally {
        await trainer.close();
      }
    };
    // Warm-up: one item through a first trainer, so the timed epochs do not pay for the process's first calls.
    await epoch("warm-up", 1);
    const samples: Record<string, number[]> = { seconds: [], generation: [], reward: [], scoring: [], update: [], other: [] };
    let envSteps = 0;
    for (let r = 0; r < spec.repeats; r++) {
      const run = await epoch(`run-${r}`, spec.items);
      const { generation, reward, referenceKl: scoring, update } = run.timings;
      Object.entries({ seconds: run.seconds, generation, reward, scoring, update, other: run.seconds - generation - reward - scoring - update }).forEach(
        ([phase, value]) => samples[phase].push(value),
      );
      addPhasePeaks(samples, run.peaks);
      envSteps = run.envSteps;
    }
    return { samples, details: { envSteps } };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
