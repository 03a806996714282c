// The construction pipeline's memory check: the plan of what a trainer will load (its actors from their sources and
// placement, reference copies when the KL term is on) estimated by config/memory-estimate.ts before anything loads.
import { planPlacement, type PlacementConfig } from "../config/devices.js";
import type { Precision } from "../config/precision.js";
import { checkMemoryPlan, localModelShape, modelShape, type MemoryPlan } from "../config/memory-estimate.js";
import { CausalLM } from "../models/causal-lm.js";
import { runtimeInfo } from "../runtime.js";
import { AgentResolutionError, resolveModelSources, type ModelSource } from "./agents.js";
import type { TaskOptions } from "./task-options.js";

interface EstimatedConfig extends Partial<PlacementConfig> {
  numAgents?: number;
  dtype?: string;
  precision?: Precision;
  numGenerations?: number;
  maxNewTokens?: number;
  referenceKlEnabled?: boolean;
}

function shapeOf(source: ModelSource) {
  if (source instanceof CausalLM) return modelShape(source.config.raw, source.source ?? "a model built in memory");
  return localModelShape(source);
}

/** Refuses a run whose estimate is over a device's memory (see memory-estimate.ts); options.memoryLimitBytes overrides. */
export function checkRunMemory(options: TaskOptions<unknown>, config: object): void {
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
  sources.forEach((source, i) => {
    const shape = shapeOf(source);
    if (!shape) return;
    const loaded = source instanceof CausalLM;
    models.push({ shape, device: placement.agentDevices[i] ?? placement.agentDevices[0], trained: true, loaded });
    if (c.referenceKlEnabled) models.push({ shape, device: placement.referenceDevices[i] ?? placement.referenceDevices[0], trained: false, loaded: false });
  });
  checkMemoryPlan(
    { models, dtype: c.dtype ?? "float32", precision: c.precision ?? "auto", numGenerations: c.numGenerations ?? 1, maxNewTokens: c.maxNewTokens ?? 0 },
    options.memoryLimitBytes,
  );
}
