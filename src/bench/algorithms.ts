// The other trainers, one epoch of the demo task each (the demo's two tiny agents on cover-the-vowels), split by the
// trainer's own stage timings: IAC and MAAC (critics from the base model) into generation, reward, critic (old-value
// readouts) and update; MADPO into pair collection (generation, reward) and DPO updates; MARLHF into pair
// collection, its reward model's epoch and the RL epoch against it (whose reward is the reward model's scoring).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createDemoBaseModel, demoTrainerOptions } from "../demo/recipes.js";
import type { ComlrlTokenizer } from "../models/tokenizer.js";
import { IACTrainer, type IACTrainerOptions } from "../trainers/actor-critic/iac.js";
import { MAACTrainer, type MAACTrainerOptions } from "../trainers/actor-critic/maac.js";
import { MADPOTrainer } from "../trainers/preference/madpo.js";
import { MARLHFTrainer } from "../trainers/preference/marlhf.js";
import type { Phase } from "../trainers/lifecycle/timings.js";
import type { Trainer } from "../trainers/lifecycle/trainer.js";
import { secondsSince } from "./stats.js";
import { addPhasePeaks, phasePeaks } from "./trainer.js";
import { ALGORITHM_PHASES, type AlgorithmCase, type WorkerOutput } from "./types.js";

const SEED = 7;

interface Epoch {
  seconds: number;
  phases: Record<string, number>;
  envSteps: number;
  /** Peak resident MiB per "stage/phase" (phasePeaks). */
  peaks: Record<string, number>;
}

type Build = (base: string, tokenizer: ComlrlTokenizer, outputDir: string, items: number) => Promise<Trainer & { progress: { envStep: number } }>;

function demoTask(base: string, tokenizer: ComlrlTokenizer, outputDir: string, items: number) {
  const { config, sampleLogInterval: _samples, ...task } = demoTrainerOptions(base, tokenizer, { outputDir, epochs: 1, seed: SEED, quiet: true, items });
  return { task, config: config as Record<string, unknown> };
}

const ACTOR_CRITIC = { numGenerations: 4, rolloutBufferSize: 4, trainBatchSize: 4 };
const PREFERENCE = { preferenceNumCandidates: 8, preferencePairsPerSample: 4, trainBatchSize: 4 };

/**
 * Each trainer's config on the demo task: the demo's MAGRPO config with the bench's overrides (also what
 * scripts/reference/compare-speed-ours.ts runs against CoMLRL).
 */
export function algorithmConfig(algorithm: AlgorithmCase["algorithm"] | "magrpo", demo: Record<string, unknown>): Record<string, unknown> {
  const { numGenerations: _k, rolloutBufferSize: _buffer, ...withoutRollouts } = demo;
  switch (algorithm) {
    case "magrpo":
      return demo;
    case "iac":
    case "maac":
      return { ...demo, ...ACTOR_CRITIC };
    case "madpo":
      return { ...withoutRollouts, ...PREFERENCE };
    case "marlhf":
      return { ...demo, ...PREFERENCE, rewardNumTrainEpochs: 1, rewardTrainBatchSize: 4, rewardHeldOutFraction: 0, rewardLearningRate: 1e-3 };
  }
}

const actorCritic =
  (algorithm: "iac" | "maac", create: (options: IACTrainerOptions & MAACTrainerOptions) => Promise<IACTrainer | MAACTrainer>): Build =>
  (base, tokenizer, outputDir, items) => {
    const { task, config } = demoTask(base, tokenizer, outputDir, items);
    return create({ ...task, tokenizer, criticModel: base, config: algorithmConfig(algorithm, config) });
  };

const BUILDS: Record<AlgorithmCase["algorithm"], Build> = {
  iac: actorCritic("iac", (o) => IACTrainer.create(o)),
  maac: actorCritic("maac", (o) => MAACTrainer.create(o)),
  madpo: (base, tokenizer, outputDir, items) => {
    const { task, config } = demoTask(base, tokenizer, outputDir, items);
    return MADPOTrainer.create({ ...task, config: algorithmConfig("madpo", config) });
  },
  marlhf: (base, tokenizer, outputDir, items) => {
    const { task, config } = demoTask(base, tokenizer, outputDir, items);
    return MARLHFTrainer.create({ ...task, config: algorithmConfig("marlhf", config) });
  },
};

/** The epoch's seconds by ALGORITHM_PHASES: "stage/phase" read from the trainer's timings, other = the rest. */
function phasesOf(algorithm: AlgorithmCase["algorithm"], trainer: Trainer, seconds: number): Record<string, number> {
  const phases: Record<string, number> = {};
  for (const key of ALGORITHM_PHASES[algorithm]) {
    if (key === "other") continue;
    const [stage, phase] = key.split("/") as [string, Phase];
    phases[key] = trainer.timings.of(stage)[phase];
  }
  phases.other = seconds - Object.values(phases).reduce((a, b) => a + b, 0);
  return phases;
}

export async function measureAlgorithmEpoch(spec: AlgorithmCase): Promise<WorkerOutput> {
  const scratch = mkdtempSync(path.join(tmpdir(), `comlrl-bench-${spec.algorithm}-`));
  try {
    const baseDir = path.join(scratch, "base-model");
    const tokenizer = await createDemoBaseModel(baseDir, SEED);
    const epoch = async (run: string, items: number): Promise<Epoch> => {
      const trainer = await BUILDS[spec.algorithm](baseDir, tokenizer, path.join(scratch, run), items);
      try {
        const clock = performance.now();
        await trainer.train();
        const seconds = secondsSince(clock);
        await trainer.close();
        return { seconds, phases: phasesOf(spec.algorithm, trainer, seconds), envSteps: trainer.progress.envStep, peaks: phasePeaks(trainer) };
      } catch (error) {
        await trainer.close();
        throw error;
      }
    };
    if (spec.warmUp) await epoch("warm-up", 1);
    const samples: Record<string, number[]> = { seconds: [], ...Object.fromEntries(ALGORITHM_PHASES[spec.algorithm].map((phase) => [phase, []])) };
    let envSteps = 0;
    for (let r = 0; r < spec.repeats; r++) {
      const run = await epoch(`run-${r}`, spec.items);
      samples.seconds.push(run.seconds);
      for (const phase of ALGORITHM_PHASES[spec.algorithm]) samples[phase].push(run.phases[phase]);
      addPhasePeaks(samples, run.peaks);
      envSteps = run.envSteps;
    }
    return { samples, details: { envSteps } };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
