// Weights & Biases runs through the official JavaScript client, @wandb/sdk. The package is imported only when a run
// is started, so installs that never use W&B do not need it to load.
//
// What @wandb/sdk 0.5.1 does with the options it is given: `project`, `entity`, `id`, `name` and `config` reach the
// server; `tags`, `dir` and `resume` are accepted but not sent (they are passed on for later versions that do). A run
// id that already exists is reopened, which is what `resume: "allow"` asks for — but the SDK does not ask how many
// history rows that run already has and numbers its uploads from row 0, so how the server merges the resumed rows
// is up to the server; metrics.jsonl keeps the complete record either way. It has no offline mode — with
// WANDB_MODE=offline it still contacts the server to create the run — so wandbSkipReason() turns W&B off instead.
import type wandbSdk from "@wandb/sdk";
import { redactSecrets } from "../config/secrets.js";
import { makeDirsSync } from "../util/make-dirs.js";

type WandbSdk = typeof wandbSdk;
type WandbRun = Awaited<ReturnType<WandbSdk["init"]>>;
export type WandbInitOptions = NonNullable<Parameters<WandbSdk["init"]>[0]>;
type WandbSettings = NonNullable<WandbInitOptions["settings"]>;

/** W&B's resume mode for a run id, as wandb.init takes it. */
export type WandbResume = boolean | "allow" | "must" | "never" | "auto";

/** The `wandbConfig` of trainers (spec §4.5), plus `id` / `resume` for continuing a run. */
export interface WandbConfig {
  /** Default "comlrl". */
  project?: string;
  /** The W&B team or user (default: the API key's). */
  entity?: string;
  /** Run display name; `runName` is an alias. Default `test-<algorithm lower-case>`. */
  name?: string;
  /** Alias of name. */
  runName?: string;
  /** Created if missing. */
  dir?: string;
  /** Tags of the run. */
  tags?: string[];
  /** Merged into the run config: dataset{name,type}, output{verbose, base_dir}, external{mode, …}, trainer{…}. */
  configSections?: Record<string, unknown>;
  /** Where iterative trainers put their artefacts; not used by the logger itself. */
  outputDir?: string;
  /** Continue (or create) the run with this id. */
  id?: string;
  /** W&B's resume mode for id ("allow", "must", …). */
  resume?: WandbResume;
}

/** What a checkpoint stores to find its W&B run again. */
export interface WandbRunIdentity {
  /** The run's id. */
  id: string;
  /** Its project. */
  project: string;
  /** Its team or user. */
  entity: string;
  /** Its display name. */
  name: string | null;
}

const SDK_PACKAGE = "@wandb/sdk";
const STRING_FIELDS = ["project", "entity", "name", "runName", "dir", "outputDir", "id"] as const;
const RESUME_VALUES: readonly unknown[] = [true, false, "allow", "must", "never", "auto"];

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Throws an error naming the first field of config whose type is wrong. */
export function checkWandbConfig(config: WandbConfig): void {
  if (!isPlainObject(config)) throw new Error("wandbConfig must be an object");
  for (const field of STRING_FIELDS) {
    const value = config[field];
    if (value !== undefined && typeof value !== "string") {
      throw new Error(`wandbConfig.${field} must be a string, got ${JSON.stringify(value)}`);
    }
  }
  if (config.tags !== undefined && !(Array.isArray(config.tags) && config.tags.every((tag) => typeof tag === "string"))) {
    throw new Error(`wandbConfig.tags must be a list of strings, got ${JSON.stringify(config.tags)}`);
  }
  if (config.configSections !== undefined && !isPlainObject(config.configSections)) {
    throw new Error(`wandbConfig.configSections must be an object, got ${JSON.stringify(config.configSections)}`);
  }
  if (config.resume !== undefined && !RESUME_VALUES.includes(config.resume)) {
    throw new Error(`wandbConfig.resume must be one of ${RESUME_VALUES.map((v) => JSON.stringify(v)).join(", ")}`);
  }
}

/**
 * Continues the run a checkpoint was logging to. A config that already says which run to use (`id`) or how to resume
 * (`resume`) is the user's explicit choice and is returned unchanged. Otherwise the saved id is added with
 * `resume: "allow"`, and project, entity and name the config leaves unset are taken from the saved identity, since a
 * run id only names a run within its entity and project.
 */
export function mergeWandbResume(config: WandbConfig, saved: WandbRunIdentity | null): WandbConfig {
  if (saved === null || config.id !== undefined || config.resume !== undefined) return config;
  const hasName = config.name !== undefined || config.runName !== undefined;
  return {
    ...config,
    project: config.project ?? saved.project,
    entity: config.entity ?? saved.entity,
    ...(hasName || saved.name === null ? {} : { name: saved.name }),
    id: saved.id,
    resume: "allow",
  };
}

/**
 * The run config W&B shows, as CoMLRL's wandb_init_kwargs builds it: the trainer's run config (see run-config.ts), the
 * config sections merged over it, and `dataset_name` / `dataset_type` from the dataset section when it names them;
 * secrets (API keys, key headers, keys in URLs) masked.
 */
export function wandbRunConfig(runConfig: Record<string, unknown>, sections: Record<string, unknown> = {}): Record<string, unknown> {
  const dataset = isPlainObject(sections.dataset) ? sections.dataset : {};
  return redactSecrets({
    ...runConfig,
    ...sections,
    // Python's truthiness: an empty name or type is left out, as None is.
    ...(dataset.name ? { dataset_name: dataset.name } : {}),
    ...(dataset.type ? { dataset_type: dataset.type } : {}),
  });
}

/** The options for the SDK's init(): defaults applied, config validated. */
export function wandbInitOptions(
  config: WandbConfig,
  run: { algorithm: string; runConfig?: Record<string, unknown>; quiet?: boolean },
): WandbInitOptions {
  checkWandbConfig(config);
  const options: WandbInitOptions = {
    project: config.project ?? "comlrl",
    name: config.name ?? config.runName ?? `test-${run.algorithm.toLowerCase()}`,
    config: wandbRunConfig(run.runConfig ?? {}, config.configSections),
    // The SDK fills the other settings (API key, base URL) from its environment defaults.
    settings: { silent: run.quiet ?? false } as Partial<WandbSettings> as WandbSettings,
  };
  if (config.entity !== undefined) options.entity = config.entity;
  if (config.id !== undefined) options.id = config.id;
  if (config.resume !== undefined) options.resume = config.resume;
  if (config.dir !== undefined) options.dir = config.dir;
  if (config.tags !== undefined) options.tags = [...config.tags];
  return options;
}

/**
 * Why W&B should stay off for this process, or null. WANDB_MODE is the switch W&B users already know; "offline" is
 * refused because the JavaScript client would contact the server anyway.
 */
export function wandbSkipReason(env: NodeJS.ProcessEnv = process.env): string | null {
  const mode = env.WANDB_MODE?.trim().toLowerCase();
  if (mode === "disabled") return "W&B logging is off (WANDB_MODE=disabled)";
  if (mode === "offline") {
    return `W&B logging is off: WANDB_MODE=offline, and ${SDK_PACKAGE} has no offline mode (metrics.jsonl still records the run)`;
  }
  return null;
}

/** Imports the W&B client, turning a missing package into an error that says what to install. */
export async function loadWandbSdk(load: () => Promise<{ default: WandbSdk }> = () => import("@wandb/sdk")): Promise<WandbSdk> {
  try {
    return (await load()).default;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ERR_MODULE_NOT_FOUND") throw error;
    throw new Error(
      `W&B logging needs the npm package ${SDK_PACKAGE} and its dependencies, which could not be loaded ` +
        `(${(error as Error).message}). Install it with \`npm install ${SDK_PACKAGE}\`, or set wandbConfig to null.`,
      { cause: error },
    );
  }
}

export class WandbLogger {
  private finished = false;

  private constructor(private readonly run: WandbRun) {}

  /** Starts (or, with an existing id, reopens) a run. Rejects when the server cannot be reached or refuses the key. */
  static async init(
    config: WandbConfig,
    run: { algorithm: string; runConfig?: Record<string, unknown>; quiet?: boolean },
  ): Promise<WandbLogger> {
    const options = wandbInitOptions(config, run);
    if (options.dir !== undefined) makeDirsSync(options.dir);
    const sdk = await loadWandbSdk();
    return new WandbLogger(await sdk.init(options));
  }

  private checkOpen(): void {
    if (this.finished) throw new Error(`WandbLogger: run ${this.run.id} is finished`);
  }

  /** Logs one history row at step (the env_step axis). The SDK sends it in the background. */
  log(metrics: Record<string, unknown>, step: number): void {
    this.checkOpen();
    this.run.log({ ...metrics }, step);
  }

  /**
   * Logs a table under name, in W&B's inline table form ({_type: "table", columns, data}): the SDK cannot upload the
   * artifact files newer Python clients store tables in.
   */
  logTable(name: string, columns: string[], rows: unknown[][], step: number): void {
    rows.forEach((row, index) => {
      if (row.length !== columns.length) {
        throw new Error(`WandbLogger.logTable("${name}"): row ${index} has ${row.length} cells for ${columns.length} columns`);
      }
    });
    this.log({ [name]: { _type: "table", columns: [...columns], data: rows } }, step);
  }

  /** The run a checkpoint should remember, for mergeWandbResume after a restart. */
  runIdentity(): WandbRunIdentity {
    return { id: this.run.id, project: this.run.project, entity: this.run.entity, name: this.run.name ?? null };
  }

  /** Sends what is queued and marks the run finished. Finishing twice is harmless. */
  async finish(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    await this.run.finish(0);
  }
}
