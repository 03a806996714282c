// The construction pipeline's memory check: the plan of what a trainer will load (its actors from their sources and
// placement, reference copies when the KL term is on) estimated by config/memory-estimate.ts before any model loads.
// A rollout's rows hold their prompt's tokens as well as the completion's: the first items' prompts are tokenized
// with the agents' tokenizers (small files, loaded again by the trainer) for the longest.
import { planPlacement, type PlacementConfig } from "../config/devices.js";
import type { PromptOverflow } from "../config/index.js";
import { checkMemoryPlan, localModelShape, modelShape, type MemoryPlan, type ModelShape } from "../config/memory-estimate.js";
import type { Precision } from "../config/precision.js";
import { CausalLM } from "../models/causal-lm.js";
import { runtimeInfo } from "../runtime.js";
import { buildFormatters, formatPrompt } from "../rollout/formatters.js";
import { promptTokenLimit, type PromptBounds } from "../rollout/prompt-length.js";
import { AgentResolutionError, resolveModelSources, resolveTokenizers, type ModelSource } from "./agents.js";
import type { TaskOptions } from "./task-options.js";

interface EstimatedConfig extends Partial<PlacementConfig> {
  numAgents?: number;
  dtype?: string;
  precision?: Precision;
  numGenerations?: number;
  maxNewTokens?: number;
  referenceKlEnabled?: boolean;
  maxPromptTokens?: number | null;
  promptOverflow?: PromptOverflow;
}

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

/** Refuses a run whose estimate is over a device's memory (see memory-estimate.ts); options.memoryLimitBytes overrides. */
export async function checkRunMemory(options: TaskOptions<unknown>, config: object): Promise<void> {
  const c = config as EstimatedConfig;
  if (c.numAgents === undefined || c.parallelTraining === undefined) return;
  // One actor writes every role's part in centralized collaboration; numAgents then counts the roles. Sources that
  // do not resolve are the load's to report, with the algorithm's own message (e.g. "exactly one actor model").
  const actors = c.collaborationMode === "centralized" ? 1 : c.numAgents;
  let sources: ModelSource[];
  try {
    sources = resolveModelSources(options.agentModel, options.agents, actors);
  } catch (error) {
    if (error instanceof AgentResolutionError) return;
    throw error;
  }
  const info = runtimeInfo();
  const placement = planPlacement(c as PlacementConfig, { cudaAvailable: info.cudaAvailable, deviceCount: info.cudaDeviceCount }, sources.length);
  const models: MemoryPlan["models"] = [];
  const shapes = sources.map(shapeOf);
  sources.forEach((source, i) => {
    const shape = shapes[i];
    if (!shape) return;
    const loaded = source instanceof CausalLM;
    models.push({ shape, device: placement.agentDevices[i] ?? placement.agentDevices[0], trained: true, loaded });
    if (c.referenceKlEnabled) models.push({ shape, device: placement.referenceDevices[i] ?? placement.referenceDevices[0], trained: false, loaded: false });
  });
  if (options.memoryLimitBytes === Infinity) return;
  const bounds: PromptBounds = { maxNewTokens: c.maxNewTokens ?? 0, maxPromptTokens: c.maxPromptTokens ?? null, promptOverflow: c.promptOverflow ?? "truncate" };
  const promptTokens = await longestPrompt(options, sources, shapes, bounds);
  checkMemoryPlan(
    { models, dtype: c.dtype ?? "float32", precision: c.precision ?? "auto", numGenerations: c.numGenerations ?? 1, maxNewTokens: c.maxNewTokens ?? 0, promptTokens, processBytes: process.memoryUsage().rss },
    options.memoryLimitBytes,
  );
}
