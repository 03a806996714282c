// Where the iterative trainers' artefacts go (COMLRL-SPEC §7.3): preference_replay, reward_distributions and
// policy_checkpoints resolve, first match, from an explicit config dir, wandbConfig.outputDir/<name>,
// (configSections.output.base_dir or wandbConfig.dir)/[job_<SLURM_JOB_ID>/]<name>, else <outputDir>/<name> (CoMLRL
// uses the working directory; our trainers always have an output dir). A resumed run whose directory already holds
// files writes beside them, in a resume-* subdirectory, as its metrics do (REQUIREMENTS "Saving and continuing").
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import type { WandbConfig } from "../../../logging/wandb.js";

export type ArtefactKind = "preference_replay" | "reward_distributions" | "policy_checkpoints";

export function resolveArtefactDir(kind: ArtefactKind, explicit: string | null, wandb: WandbConfig | null | undefined, outputDir: string, env: NodeJS.ProcessEnv = process.env): string {
  if (explicit) return explicit;
  if (wandb?.outputDir) return path.join(wandb.outputDir, kind);
  const output = (wandb?.configSections?.output ?? null) as { base_dir?: unknown } | null;
  const base = typeof output?.base_dir === "string" ? output.base_dir : (wandb?.dir ?? null);
  if (base) {
    const job = env.SLURM_JOB_ID;
    return job ? path.join(base, `job_${job}`, kind) : path.join(base, kind);
  }
  return path.join(outputDir, kind);
}

/** dir itself for a fresh run; on resume, dir/<resumeTag> when dir already holds files. */
export function resumedArtefactDir(dir: string, resumeTag: string | null): string {
  if (resumeTag === null || !existsSync(dir) || readdirSync(dir).length === 0) return dir;
  return path.join(dir, resumeTag);
}
