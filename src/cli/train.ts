// `comlrl train --config FILE`: a training run from a CoMLRL-style config file. The file names the trainer (its
// section), the task (a built-in one, or a module exporting dataset/rewardFunc/formatters), the model(s) and the data;
// the run trains with progress, checkpoints (resumable with --resume latest) and saves the agents.
import path from "node:path";
import { pathToFileURL } from "node:url";
import { ConfigError } from "../config/fields.js";
import { loadDataset } from "../data/index.js";
import { resolveModelSource, type ExternalTransition, type GgufDtype, type Formatter, type Item, type RewardFunction } from "../index.js";
import { checkItems } from "../rollout/formatters.js";
import { getTask } from "../tasks/registry.js";
import { trainerDefinition, type FileCritics, type FileRun } from "../trainers/builtins.js";
import { isModulePath, loadTrainConfig, type TrainFileConfig } from "./config-file.js";

export interface TrainCommandOptions {
  config: string;
  /** "latest" or a checkpoint directory. */
  resume?: string;
  /** Config fields a resume may change beyond the always-changeable ones (see TrainOptions.allowConfigChanges). */
  allowConfigChanges?: string[];
  /** Replaces output.base_dir. */
  output?: string;
  /** Save the final model as GGUF files of this weight type instead of Hugging Face directories. */
  gguf?: GgufDtype;
  /** false: no W&B run even when the file has a wandb section. */
  wandb: boolean;
  quiet: boolean;
}

/** What a run needs from a task, built-in or a user's module. */
interface RunTask {
  numAgents: number;
  trainDataset: () => Item[] | Promise<Item[]>;
  evalDataset: () => Item[] | null | Promise<Item[] | null>;
  rewardFunc: RewardFunction;
  formatters: Formatter[];
  externalTransition: ExternalTransition | null;
}

/** A user's task module: named exports (or a default export object) dataset, rewardFunc, formatters, … */
async function moduleTask(file: string): Promise<RunTask> {
  let loaded: Record<string, unknown>;
  try {
    if (/\.[cm]?ts$/.test(file)) {
      // TypeScript modules go through tsx, as `npx tsx` would run them.
      const tsx = await import("tsx/esm/api").catch(() => {
        throw new Error(`task module ${file} is TypeScript: install tsx (npm install -D tsx) or point the config at its compiled .js`);
      });
      loaded = (await tsx.tsImport(pathToFileURL(file).href, import.meta.url)) as Record<string, unknown>;
    } else {
      loaded = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
    }
  } catch (error) {
    throw new Error(`cannot load task module ${file}: ${(error as Error).message}`, { cause: error });
  }
  const exports = (typeof loaded.default === "object" && loaded.default !== null ? loaded.default : loaded) as Record<string, unknown>;
  const need = (name: string, ok: boolean, what: string) => {
    if (!ok) throw new Error(`task module ${file} must export ${name} (${what})`);
  };
  const { dataset, evalDataset, rewardFunc, formatters, externalTransition, numAgents } = exports;
  need("dataset", Array.isArray(dataset) || typeof dataset === "function", "an array of items, or a function returning one");
  need("rewardFunc", typeof rewardFunc === "function", "(completions, context) => rewards");
  need("formatters", Array.isArray(formatters) && formatters.every((f) => typeof f === "function"), "one (item) => prompt function per agent");
  const items = (source: unknown, split: string) => async () => (typeof source === "function" ? await (source as (o: { split: string }) => Item[] | Promise<Item[]>)({ split }) : (source as Item[]));
  return {
    numAgents: typeof numAgents === "number" ? numAgents : (formatters as Formatter[]).length,
    trainDataset: items(dataset, "train"),
    evalDataset: evalDataset === undefined ? () => null : items(evalDataset, "eval"),
    rewardFunc: rewardFunc as RewardFunction,
    formatters: formatters as Formatter[],
    externalTransition: (externalTransition as ExternalTransition | undefined) ?? null,
  };
}

function builtinTask(name: string, options: Readonly<Record<string, unknown>>): RunTask {
  const task = getTask(name, { ...options });
  return {
    numAgents: task.numAgents,
    trainDataset: () => task.dataset({ split: "train" }),
    evalDataset: () => task.dataset({ split: "eval" }),
    rewardFunc: task.rewardFunc,
    formatters: task.formatters,
    externalTransition: task.externalTransition ?? null,
  };
}

function rewardProcessor(config: TrainFileConfig): FileRun["rewardProcessor"] {
  const processor = config.rewardProcessor;
  if (processor === null) return undefined;
  return (reward) => reward * processor.scaleFactor + processor.shift;
}

/** The trainer config, validated against the file (errors name it), with the task's agent count. */
function trainerConfig(config: TrainFileConfig, task: RunTask) {
  const given = config.trainerConfig.num_agents ?? config.trainerConfig.numAgents;
  if (given !== undefined && given !== task.numAgents) {
    throw new ConfigError(`${config.source}: ${config.trainer}.num_agents is ${JSON.stringify(given)}, but task "${config.task}" has ${task.numAgents} agents`, "numAgents");
  }
  return trainerDefinition(config.trainer).config({ ...config.trainerConfig, num_agents: task.numAgents }, { source: config.source });
}

export async function runTrain(options: TrainCommandOptions): Promise<void> {
  const config = await loadTrainConfig(options.config, { outputDir: options.output });
  if (options.resume !== undefined && config.output.checkpointDir === null) {
    throw new ConfigError(`${config.source}: --resume needs checkpoints, but output.checkpoint_dir is null`, "checkpointDir");
  }
  const task = isModulePath(config.task) ? await moduleTask(config.task) : builtinTask(config.task, config.taskOptions);
  const trainConfig = trainerConfig(config, task);
  const say = (line: string) => options.quiet || console.log(line);
  for (const field of config.ignored) say(`comlrl train: ${config.source}: ${field} has no effect in comlrl`);

  const { name: datasetName } = config.dataset;
  const trainDataset = datasetName === null ? await task.trainDataset() : await loadDataset(datasetName, { split: config.dataset.trainSplit, revision: config.dataset.revision, config: config.dataset.config });
  const evalDataset =
    datasetName === null
      ? await task.evalDataset()
      : config.dataset.evalSplit === null
        ? null
        : await loadDataset(datasetName, { split: config.dataset.evalSplit, revision: config.dataset.revision, config: config.dataset.config });
  if (datasetName !== null && !isModulePath(config.task)) {
    // A built-in task's formatters make each agent's prompt from the row's prompt field.
    checkItems(trainDataset, `dataset ${datasetName} split ${config.dataset.trainSplit}`, true);
    if (evalDataset) checkItems(evalDataset, `dataset ${datasetName} split ${config.dataset.evalSplit}`, true);
  }

  const entry = trainerDefinition(config.trainer);
  if (entry.critics?.required(trainConfig) && config.criticModel === null && config.critics === null) {
    throw new ConfigError(`${config.source}: ${config.trainer} needs critics; set critic_model.name (a hub id or a local model directory) or list critics`, "criticModel");
  }
  const models = config.agents ?? (entry.centralized?.(trainConfig) ? [config.model!] : Array.from({ length: task.numAgents }, () => config.model!));
  const resolve = (model: string) => resolveModelSource(model, { revision: config.modelRevision });
  const dirs = await Promise.all(models.map(resolve));
  const critics: FileCritics = {
    criticModel: config.criticModel === null ? null : await resolve(config.criticModel),
    critics: config.critics === null ? null : await Promise.all(config.critics.map(resolve)),
  };
  say(`comlrl train: ${entry.trainer.name} on task "${path.basename(config.task)}", ${task.numAgents} agents, ${trainDataset.length} train items`);

  const run: FileRun = {
    agents: dirs,
    rewardFunc: task.rewardFunc,
    rewardProcessor: rewardProcessor(config),
    formatters: task.formatters,
    externalTransition: task.externalTransition,
    trainDataset,
    evalDataset,
    outputDir: config.output.baseDir,
    quiet: options.quiet || !config.output.verbose,
    wandbConfig: options.wandb ? config.wandb : null,
  };
  const trainer = await entry.create(run, trainConfig, critics);
  try {
    const started = Date.now();
    await trainer.train({
      ...(config.output.checkpointDir !== null && {
        checkpointDir: config.output.checkpointDir,
        checkpointInterval: config.output.checkpointInterval,
        keepLast: config.output.keepLast,
      }),
      resumeFromCheckpoint: options.resume,
      allowConfigChanges: options.allowConfigChanges,
    });
    say(`comlrl train: ${trainer.progress.epoch} epochs, ${trainer.progress.envStep} env steps in ${((Date.now() - started) / 1000).toFixed(1)} s; metrics in ${config.output.baseDir}`);
    if (config.output.saveFinalModel) {
      await trainer.saveModel(config.output.savePath, options.gguf === undefined ? {} : { format: "gguf", dtype: options.gguf });
      say(`comlrl train: agents saved to ${config.output.savePath}${options.gguf === undefined ? "" : ` as ${options.gguf} GGUF files`}`);
    }
  } finally {
    await trainer.close();
  }
}
