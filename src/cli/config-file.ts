// Training config files in CoMLRL's section layout, as the LLM_Collab_* repos write them:
//   agent_model (or model): name, temperature, top_p, top_k, torch_dtype, …   agents, critic_model, critics
//   dataset: name, type, train_split, eval_split            tokenizer: padding_side     external: mode, …
//   output: base_dir, verbose, save_final_model, save_path  seed                        reward_processor, wandb
//   one trainer section: a registered trainer's (trainers/registry.ts), e.g. magrpo (centralized_magrpo with
//   collaboration_mode: centralized), iac, maac, madpo, marlhf. Critics come from critic_model.name or a critics
//   list, as agents do, for the trainers whose entry takes critics.
// Additions of comlrl: top-level `task` (a built-in task name or a task module path; default dataset.type),
// `task_options`, model.revision, dataset.revision / dataset.config, and output.checkpoint_dir /
// checkpoint_interval / keep_last. The trainer section stays raw here: the trainer's own config builder validates
// it, so its messages name the file and the field.
import path from "node:path";
import type { WandbConfig } from "../logging/wandb.js";
import { loadConfigFile } from "../config/file.js";
import { bool, buildConfig, ConfigError, field, float, int, nullable, oneOf, reject, text, UNSUPPORTED_FIELDS, unsupportedField, type FieldSpec } from "../config/fields.js";
import { trainerDefinition, trainerDefinitions, trainerSections } from "../trainers/builtins.js";

/** A `comlrl train` config file, read and validated: the trainer, task, models, data and output it names (docs/cli.md). */
export interface TrainFileConfig {
  /** The file it came from; messages name it. */
  readonly source: string;
  /** The section of the registered trainer to build: the file's trainer section, or the trainer that section selects (centralized_magrpo for a magrpo section with collaboration_mode: centralized). */
  readonly trainer: string;
  /** The trainer section's fields (snake_case or camelCase), with the model section's sampling fields and the top-level seed filled in where the section has none. */
  readonly trainerConfig: Readonly<Record<string, unknown>>;
  /** A built-in task name, or a path to a task module (.js, .mjs, .ts), relative paths resolved against the file's directory. */
  readonly task: string;
  /** The task's options (task_options), passed to getTask. */
  readonly taskOptions: Readonly<Record<string, unknown>>;
  /** The base model of every agent (null when `agents` lists them). */
  readonly model: string | null;
  /** One model per agent, when the file lists them. */
  readonly agents: readonly string[] | null;
  /** The critics' base model (critic_model.name), for the trainers whose registry entry takes critics. */
  readonly criticModel: string | null;
  /** One critic model per agent (MAAC: one), when the file lists them. */
  readonly critics: readonly string[] | null;
  /** The hub revision of the model (model.revision): a branch, tag or commit. */
  readonly modelRevision: string | undefined;
  /** The dataset section. */
  readonly dataset: {
    /** A hub dataset id or local path; null: the task's own dataset. */
    readonly name: string | null;
    /** The split trained on, in `datasets` syntax (default "train"). */
    readonly trainSplit: string;
    /** The split evaluated on; null: none. */
    readonly evalSplit: string | null;
    /** The dataset's hub revision. */
    readonly revision: string | undefined;
    /** The dataset's config (subset) name. */
    readonly config: string | undefined;
  };
  /** The output section. */
  readonly output: {
    /** Where metrics, checkpoints and the final model go (default runs/<trainer>-<task>; --output replaces it). */
    readonly baseDir: string;
    /** Progress bar and console lines. */
    readonly verbose: boolean;
    /** Whether the trained agents are saved at the end (to savePath). */
    readonly saveFinalModel: boolean;
    /** Where the trained agents go (default <baseDir>/final_model). */
    readonly savePath: string;
    /** null: no checkpoints. Default <baseDir>/checkpoints. */
    readonly checkpointDir: string | null;
    /** Epochs between checkpoints. */
    readonly checkpointInterval: number;
    /** Checkpoints kept (undefined: all). */
    readonly keepLast: number | undefined;
  };
  /** r ↦ r · scaleFactor + shift when enabled; null when off. */
  readonly rewardProcessor: {
    /** Multiplies the reward first. */
    readonly scaleFactor: number;
    /** Then added to it. */
    readonly shift: number;
  } | null;
  /** The W&B run to log to; null: none. */
  readonly wandb: WandbConfig | null;
  /** Fields the file sets that comlrl accepts but that change nothing here (the CLI prints them). */
  readonly ignored: readonly string[];
}

const section = (raw: unknown): Record<string, unknown> | null =>
  raw === null ? null : typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>) : reject("must be a section (a mapping of fields) or null");
/** Any value (a field read elsewhere, or accepted for compatibility); null when absent. */
const anything = field((raw) => raw, null as unknown);
const optionalText = nullable(text());
const stringList = field((raw) => {
  if (!Array.isArray(raw) || raw.some((v) => typeof v !== "string")) reject("must be a list of strings");
  return raw as string[];
});

/** A list of model names, or of model sections with a name (agents, critics). */
const modelList = field((raw): string[] | null => {
  if (raw === null) return null;
  if (!Array.isArray(raw) || raw.length === 0) reject("must be null or a non-empty list of models");
  return raw.map((entry) => {
    const name = typeof entry === "string" ? entry : (entry as { name?: unknown } | null)?.name;
    return typeof name === "string" && name.length > 0 ? name : reject("entries must be model names or sections with a name");
  });
}, null);

const GENERAL_SECTIONS = {
  agentModel: field(section, null),
  model: field(section, null),
  agents: modelList,
  criticModel: field(section, null),
  critics: modelList,
  dataset: field(section, null),
  tokenizer: field(section, null),
  external: field(section, null),
  output: field(section, null),
  seed: nullable(int({ min: 0 })),
  rewardProcessor: field(section, null),
  wandb: field(section, null),
  task: optionalText,
  taskOptions: field(section, null),
} satisfies Record<string, FieldSpec<unknown>>;

/** The top level of a file: its general sections and every registered trainer's section. */
function topLevel() {
  return { ...GENERAL_SECTIONS, ...Object.fromEntries(trainerSections().map((name) => [snakeToCamel(name), field(section, null)])) };
}

function snakeToCamel(name: string): string {
  return name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

const MODEL = {
  name: optionalText,
  revision: optionalText,
  // Read by LLM_Collab to pick its prompt formats; comlrl reads the architecture from config.json.
  type: anything,
  temperature: nullable(float()),
  topP: nullable(float()),
  topK: anything,
  torchDtype: nullable(
    oneOf(["auto", "float32", "bfloat16"], { aliases: { fp32: "float32", bf16: "bfloat16", "torch.float32": "float32", "torch.bfloat16": "bfloat16" } }),
  ),
  // Tokenizer and loading settings of transformers; none changes anything in comlrl.
  maxLength: anything,
  specialTokens: anything,
  tokenizerKwargs: anything,
  modelKwargs: anything,
};

const DATASET = {
  name: optionalText,
  type: optionalText,
  trainSplit: optionalText,
  evalSplit: optionalText,
  revision: optionalText,
  config: optionalText,
};

const OUTPUT = {
  baseDir: optionalText,
  verbose: bool({ default: true }),
  saveFinalModel: bool({ default: true }),
  savePath: optionalText,
  // "" stands for "not given" (the default directory); null turns checkpoints off.
  checkpointDir: field<string | null>((raw) => (raw === null || (typeof raw === "string" && raw !== "") ? raw : reject("must be a directory path or null")), ""),
  checkpointInterval: int({ default: 1, min: 1 }),
  keepLast: nullable(int({ min: 1 })),
};

const REWARD_PROCESSOR = {
  enabled: bool({ default: false }),
  scaleFactor: float({ default: 1 }),
  shift: nullable(float()),
};

const WANDB = {
  project: optionalText,
  entity: optionalText,
  name: optionalText,
  runName: optionalText,
  dir: optionalText,
  tags: nullable(stringList),
};

const TOKENIZER = {
  // comlrl pads prompts on the left for generation, as CoMLRL's configs ask.
  paddingSide: oneOf(["left"], { default: "left" }),
};

const EXTERNAL = {
  mode: optionalText,
  externalPromptPassthrough: nullable(bool()),
  // LLM_Collab transition settings that comlrl's built-in transitions do not have.
  originalPrompt: anything,
  previousResponse: anything,
  sandboxSlice: anything,
};

/** Validates one section against its specs, naming the file and the section in errors. */
function read<S extends Record<string, FieldSpec<unknown>>>(specs: S, raw: Record<string, unknown> | null, name: string, source: string) {
  return buildConfig(specs, raw ?? {}, { configName: name, source });
}

/** The fields of `raw` that are set and listed in `keys`, as "section.key" for the ignored-fields notice. */
function setFields(raw: Record<string, unknown> | null, keys: readonly string[], sectionName: string): string[] {
  if (raw === null) return [];
  return Object.keys(raw)
    .filter((key) => keys.includes(key) && raw[key] !== null && raw[key] !== undefined)
    .map((key) => `${sectionName}.${key}`);
}

/** The one trainer section of a file, and the trainer it selects. */
function trainerSection(top: Record<string, unknown>, source: string): { trainer: string; section: string; body: Record<string, unknown> } {
  const sections = trainerSections();
  const present = sections.filter((name) => top[snakeToCamel(name)] !== null && top[snakeToCamel(name)] !== undefined);
  if (present.length === 0) throw new ConfigError(`${source} has no trainer section; add one of ${sections.join(", ")}`);
  if (present.length > 1) throw new ConfigError(`${source} has several trainer sections (${present.join(", ")}); a config file trains with one`);
  const name = present[0]!;
  const body = { ...(top[snakeToCamel(name)] as Record<string, unknown>) };
  const selected = trainerDefinitions().find((definition) => definition.selectedBy?.section === name && definition.selectedBy.when(body));
  return { trainer: selected?.section ?? name, section: name, body };
}

/** Options of loadTrainConfig and trainConfigFromObject. */
export interface TrainConfigOptions {
  /** Replaces output.base_dir (save_path and checkpoint_dir the file sets itself stay). */
  readonly outputDir?: string;
}

/** Reads a training config object (parsed from `source`) into what `comlrl train` builds its run from. */
export function trainConfigFromObject(raw: Record<string, unknown>, source: string, options: TrainConfigOptions = {}): TrainFileConfig {
  const top = read(topLevel(), raw, "config", source) as Record<string, unknown> & Record<keyof typeof GENERAL_SECTIONS, unknown>;
  if (top.agentModel !== null && top.model !== null) {
    throw new ConfigError(`${source}: both "agent_model" and "model" sections are given; keep one (they mean the same)`, "agentModel");
  }
  const modelRaw = (top.agentModel ?? top.model) as Record<string, unknown> | null;
  const modelName = top.agentModel !== null ? "agent_model" : "model";
  const model = read(MODEL, modelRaw, modelName, source);
  const dataset = read(DATASET, top.dataset as Record<string, unknown> | null, "dataset", source);
  const output = read(OUTPUT, top.output as Record<string, unknown> | null, "output", source);
  const rewardProcessor = read(REWARD_PROCESSOR, top.rewardProcessor as Record<string, unknown> | null, "reward_processor", source);
  read(TOKENIZER, top.tokenizer as Record<string, unknown> | null, "tokenizer", source);
  const external = read(EXTERNAL, top.external as Record<string, unknown> | null, "external", source);
  const agents = top.agents as string[] | null;

  if (model.name === null && agents === null) {
    throw new ConfigError(`${source}: no model; set ${modelName}.name (a hub id or a local model directory) or list agents`, "name");
  }

  const { trainer, section: trainerSectionName, body } = trainerSection(top, source);
  // CoMLRL's configs write its unsupported fields at their defaults, which is what comlrl does: those load and are
  // reported as having no effect; any other value reaches the trainer's config, which refuses it with the reason.
  const unsupportedAtDefault = Object.keys(body).filter((key) => {
    const unsupported = unsupportedField(key);
    return unsupported !== undefined && body[key] === UNSUPPORTED_FIELDS[unsupported]!.comlrlDefault;
  });
  for (const key of unsupportedAtDefault) delete body[key];
  for (const critic of ["criticModel", "critics"] as const) {
    if (top[critic] !== null && top[critic] !== undefined && trainerDefinition(trainer).critics === undefined) {
      const withCritics = trainerDefinitions().filter((definition) => definition.critics !== undefined).map((definition) => definition.section);
      throw new ConfigError(`${source}: ${critic === "criticModel" ? "critic_model" : "critics"} is for actor-critic trainers (${withCritics.join(", ")}); ${trainer} has no critic (set it to null)`, critic);
    }
  }
  const criticModel = read(MODEL, top.criticModel as Record<string, unknown> | null, "critic_model", source);
  // As LLM_Collab's scripts do: the model section's sampling settings and the top-level seed apply unless the trainer section sets its own.
  const fill = (snake: string, value: unknown) => {
    if (!(snake in body) && !(snakeToCamel(snake) in body)) body[snake] = value;
  };
  if (model.temperature !== null) fill("temperature", model.temperature);
  if (model.topP !== null) fill("top_p", model.topP);
  // top_k: null is a value here (no top-k filtering).
  if (modelRaw !== null && ("top_k" in modelRaw || "topK" in modelRaw)) fill("top_k", model.topK);
  if (top.seed !== null) fill("seed", top.seed);
  if (model.torchDtype !== null && model.torchDtype !== "auto") fill("dtype", model.torchDtype);
  if (external.externalPromptPassthrough !== null) fill("external_prompt_passthrough", external.externalPromptPassthrough);

  const task = (top.task as string | null) ?? dataset.type;
  if (task === null) throw new ConfigError(`${source}: no task; set "task" (a built-in task name or a task module path) or dataset.type`, "task");
  const taskOptions = { ...((top.taskOptions as Record<string, unknown> | null) ?? {}) };
  if (external.mode !== null && taskOptions.mode === undefined) taskOptions.mode = external.mode;

  const taskLabel = isModulePath(task) ? path.basename(task).replace(/\.[^.]+$/, "") : task;
  const baseDir = options.outputDir ?? output.baseDir ?? path.join("runs", `${trainer}-${taskLabel.replace(/[^\w.-]+/g, "_")}`);
  const wandbSection = top.wandb as Record<string, unknown> | null;
  const wandb = wandbSection === null ? null : read(WANDB, wandbSection, "wandb", source);
  const resolveTask = (name: string) => (isModulePath(name) ? path.resolve(path.dirname(source), name) : name);

  return Object.freeze({
    source,
    trainer,
    trainerConfig: Object.freeze(body),
    task: resolveTask(task),
    taskOptions: Object.freeze(taskOptions),
    model: model.name,
    agents: agents === null ? null : Object.freeze([...agents]),
    criticModel: criticModel.name,
    critics: top.critics === null ? null : Object.freeze([...(top.critics as string[])]),
    modelRevision: model.revision ?? undefined,
    dataset: {
      name: dataset.name,
      trainSplit: dataset.trainSplit ?? "train",
      evalSplit: dataset.evalSplit,
      revision: dataset.revision ?? undefined,
      config: dataset.config ?? undefined,
    },
    output: {
      baseDir,
      verbose: output.verbose,
      saveFinalModel: output.saveFinalModel,
      savePath: output.savePath ?? path.join(baseDir, "final_model"),
      checkpointDir: output.checkpointDir === "" ? path.join(baseDir, "checkpoints") : output.checkpointDir,
      checkpointInterval: output.checkpointInterval,
      keepLast: output.keepLast ?? undefined,
    },
    rewardProcessor: rewardProcessor.enabled ? { scaleFactor: rewardProcessor.scaleFactor, shift: rewardProcessor.shift ?? 0 } : null,
    wandb:
      wandb === null
        ? null
        : {
            ...(wandb.project !== null && { project: wandb.project }),
            ...(wandb.entity !== null && { entity: wandb.entity }),
            ...((wandb.name ?? wandb.runName) !== null && { name: (wandb.name ?? wandb.runName)! }),
            ...(wandb.dir !== null && { dir: wandb.dir }),
            ...(wandb.tags !== null && { tags: wandb.tags }),
            configSections: { dataset: { name: dataset.name, type: dataset.type }, output: { verbose: output.verbose, base_dir: baseDir }, ...(external.mode !== null && { external: { mode: external.mode } }) },
          },
    ignored: [
      ...setFields(modelRaw, ["type", "max_length", "special_tokens", "tokenizer_kwargs", "model_kwargs"], modelName),
      ...setFields(top.criticModel as Record<string, unknown> | null, ["type", "temperature", "top_p", "top_k", "torch_dtype", "max_length", "special_tokens", "tokenizer_kwargs", "model_kwargs"], "critic_model"),
      ...setFields(top.external as Record<string, unknown> | null, ["original_prompt", "previous_response", "sandbox_slice"], "external"),
      ...unsupportedAtDefault.map((key) => `${trainerSectionName}.${key}`),
    ],
  });
}

/** Whether a task name is a module path rather than a built-in task's name. */
export function isModulePath(task: string): boolean {
  return /\.(?:[cm]?js|[cm]?ts)$/.test(task) || task.startsWith(".") || path.isAbsolute(task);
}

/** Reads a training config file (YAML or JSON); every error names the file and the field. */
export async function loadTrainConfig(file: string, options: TrainConfigOptions = {}): Promise<TrainFileConfig> {
  return trainConfigFromObject(await loadConfigFile(file), file, options);
}
