// The memory check of setUpActors: what the placement plan will load (the actors from their sources, reference
// copies when the KL term is on, the critics, a reward model), each on its planned device, estimated by
// config/memory-estimate.ts before any model loads. A rollout's rows hold their prompt's tokens as well as the
// completion's: the first items' prompts are tokenized with the agents' tokenizers (small files, loaded again by the
// trainer) for the longest.
import type { RuntimeConfig, SamplingConfig } from "../config/index.js";
import { checkMemoryPlan, localModelShape, modelShape, type ModelRole, type ModelShape, type PlannedModel } from "../config/memory-estimate.js";
import { CausalLM, type ModelSource } from "../models/causal-lm.js";
import { buildFormatters, formatPrompt } from "../rollout/formatters.js";
import { promptTokenLimit, type PromptBounds } from "../rollout/prompt-length.js";
import { resolveTokenizers } from "./agents.js";
import type { ModuleDeclaration, Placement } from "./placement.js";
import type { TaskOptions } from "./task-options.js";

type EstimatedConfig = Pick<SamplingConfig, "numGenerations" | "maxNewTokens" | "maxPromptTokens" | "promptOverflow"> & Pick<RuntimeConfig, "dtype" | "precision">;

function shapeOf(source: ModelSource) {
  if (source instanceof CausalLM) return modelShape(source.config.raw, source.source ?? "a model built in memory");
  return localModelShape(source);
}

/** Items whose prompts are tokenized for the longest: enough to see a dataset's length, few enough to be instant. */
const PROMPT_SAMPLE = 16;

/**
 * Tokens of the longest prompt among the train dataset's first items, per agent's formatter and tokenizer, as the
 * agents will bound it (prompt-length.ts); 0 when they cannot be made (a tokenizer that does not load, a formatter
 * that throws): the trainer reports those itself.
 */
async function longestPrompt(options: TaskOptions<unknown>, sources: ModelSource[], shapes: Array<ModelShape | null>, bounds: PromptBounds): Promise<number> {
  try {
    const tokenizers = await resolveTokenizers(options.agentModel, options.agents, options.tokenizer, sources);
    const formatters = buildFormatters(options.formatters, sources.length);
    let longest = 0;
    tokenizers.forEach((tokenizer, agent) => {
      const limit = promptTokenLimit(shapes[agent]?.maxPositions ?? Infinity, tokenizer, bounds).tokens;
      for (const item of options.trainDataset.slice(0, PROMPT_SAMPLE)) {
        longest = Math.max(longest, Math.min(limit, tokenizer.encode(formatPrompt(formatters[agent]!, item, agent)).length));
      }
    });
    return longest;
  } catch {
    return 0;
  }
}

/** What setUpActors knows before it loads anything: the actors' sources, the declaration and its placement. */
export interface RunPlan {
  actors: ModelSource[];
  modules: ModuleDeclaration;
  placement: Placement;
}

/** Every model the plan loads, on its planned device, with its shape; models whose shape cannot be read are left out. */
export function plannedModels({ actors, modules, placement }: RunPlan): PlannedModel[] {
  const models: PlannedModel[] = [];
  const add = (source: ModelSource, shape: ModelShape | null, device: string, role: ModelRole, trained: boolean) => {
    if (shape) models.push({ shape, device, role, trained, loaded: role !== "reference" && source instanceof CausalLM });
  };
  actors.forEach((source, i) => {
    const shape = shapeOf(source);
    add(source, shape, placement.agentDevices[i], "actor", true);
    if (modules.references) add(source, shape, placement.referenceDevices[i], "reference", false);
  });
  // A critic model given for several agents is one module (each agent's critic is a head on it).
  modules.criticSources.forEach((source, i) => {
    if (typeof source === "string" || modules.criticSources.indexOf(source) === i) add(source, shapeOf(source), placement.criticDevices[i], "critic", true);
  });
  const rewardModel = modules.rewardModel;
  if (rewardModel?.source != null && placement.rewardModel) add(rewardModel.source, shapeOf(rewardModel.source), placement.rewardModel.device, "reward model", rewardModel.trainsBackbone);
  return models;
}

/**
 * Refuses a run whose estimate, from its placement plan, is over a device's memory (see memory-estimate.ts);
 * options.memoryLimitBytes overrides.
 */
export async function checkRunMemory(options: TaskOptions<unknown>, config: EstimatedConfig, plan: RunPlan): Promise<void> {
  if (options.memoryLimitBytes === Infinity) return;
  const models = plannedModels(plan);
  const actorShapes = plan.actors.map(shapeOf);
  const bounds: PromptBounds = { maxNewTokens: config.maxNewTokens, maxPromptTokens: config.maxPromptTokens, promptOverflow: config.promptOverflow };
  const promptTokens = await longestPrompt(options, plan.actors, actorShapes, bounds);
  checkMemoryPlan(
    { models, dtype: config.dtype, precision: config.precision, numGenerations: config.numGenerations, maxNewTokens: config.maxNewTokens, promptTokens, processBytes: process.memoryUsage().rss },
    options.memoryLimitBytes,
  );
}
