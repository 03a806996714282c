// A resume continues the run its checkpoint was taken from only under the same config: another numGenerations, seed,
// learning rate or sampling setting would silently train something else from there on. The config snapshot in the
// checkpoint is compared field by field with the resuming trainer's; a difference is refused by name unless the
// field is one that only decides how long or how visibly the run goes on, or the caller allows it explicitly.
import { redactSecrets } from "../config/secrets.js";
import { CheckpointError } from "./manifest.js";

/**
 * Config fields a resume may change: the run's length (epochs, iterations), what is logged and evaluated, and where it
 * runs. `parallelTraining` is placement too; a data-parallel checkpoint's rank count is checked on its own, by name.
 */
export const RESUME_CHANGEABLE_FIELDS: ReadonlySet<string> = new Set([
  "numTrainEpochs",
  "numIterations",
  "loggingSteps",
  "evalInterval",
  "evalNumSamples",
  "logRewardDistribution",
  "source",
  "parallelTraining",
  "agentDevices",
  "criticDevices",
  "referenceDevices",
  "comparatorDevices",
  "rewardModelDevice",
  "comparatorApiConcurrency",
  "comparatorApiMaxRetries",
  "comparatorApiTimeout",
  "rewardTimeoutSeconds",
]);

/** JSON with keys in order, so that two snapshots compare by content whatever order their fields were set in. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return `{${entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

const describe = (value: unknown) => (value === undefined ? "unset" : canonical(value));

/**
 * Throws naming every config field whose value differs between the checkpoint's snapshot and this run's config,
 * except the changeable ones and those in `allowed`. Secret fields are compared as the checkpoint stores them (masked).
 */
export function checkResumeConfig(checkpoint: string, saved: unknown, current: object, allowed: readonly string[]): void {
  if (saved === undefined) return;
  const before = (saved ?? {}) as Record<string, unknown>;
  const now = JSON.parse(JSON.stringify(redactSecrets(current))) as Record<string, unknown>;
  const changed = [...new Set([...Object.keys(before), ...Object.keys(now)])]
    .filter((field) => !RESUME_CHANGEABLE_FIELDS.has(field) && !allowed.includes(field))
    .filter((field) => canonical(before[field] ?? null) !== canonical(now[field] ?? null))
    .sort();
  if (changed.length === 0) return;
  const details = changed.map((field) => `${field} (checkpoint ${describe(before[field])}, now ${describe(now[field])})`);
  throw new CheckpointError(
    `${checkpoint} was trained under another config: ${details.join("; ")}. Resuming would not continue that run; ` +
      `restore ${changed.length === 1 ? "this field" : "these fields"}, or allow the change explicitly (train({ allowConfigChanges: [${changed.map((f) => JSON.stringify(f)).join(", ")}] }), comlrl train --allow-config-change ${changed.join(",")})`,
  );
}
