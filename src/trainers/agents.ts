// Agents: each is a causal LM with its tokenizer, optimizer and optional frozen reference, resolved from hub ids,
// local directories or loaded model objects by the rules of COMLRL-SPEC §5.1–§5.2. The same CausalLM object given
// twice is shared (one set of weights), but every agent keeps its own optimizer state.
import type { PromptOverflow } from "../config/index.js";
import { CausalLM, type Dtype, type ModelSource } from "../models/causal-lm.js";
import { Optimizer, type AdamWOptions } from "../models/optimizer.js";
import { ValueHead } from "../models/value-head.js";
import { resolveModelSource } from "../models/hub.js";
import { ComlrlTokenizer } from "../models/tokenizer.js";
import type { RolloutPolicy, SampledCompletions } from "../rollout/tree.js";
import type { ComponentRegistry } from "../components/registry.js";
import { causalLMModule, valueHeadModule } from "../models/components.js";
import { boundPrompt, promptTokenLimit } from "../rollout/prompt-length.js";

export type { ModelSource } from "../models/causal-lm.js";

/** Agents, tokenizers or critics that cannot be resolved from the options; the message names the one at fault. */
export class AgentResolutionError extends Error {
  /** Always "AgentResolutionError". */
  override name = "AgentResolutionError";
}

/** How resolution errors name the two options and the count (actors by default; critics pass their own). */
export interface SourceLabels {
  model: string;
  models: string;
  count: string;
}

const ACTOR_LABELS: SourceLabels = { model: "agentModel", models: "agents", count: "numAgents" };

/** A source as an error names it: an id in quotes, a loaded model by the directory it was loaded from. */
function describeSource(source: ModelSource): string {
  if (typeof source === "string") return `"${source}"`;
  return source.source === null ? "(a loaded model built in memory)" : `(a loaded model from "${source.source}")`;
}

/** COMLRL-SPEC §5.1: one source per model from a single id (copied `count` times) or a list. */
export function resolveModelSources(
  model: ModelSource | null | undefined,
  models: readonly ModelSource[] | null | undefined,
  count: number,
  labels: SourceLabels = ACTOR_LABELS,
): ModelSource[] {
  const fail = (message: string): never => {
    throw new AgentResolutionError(message);
  };
  if (models === null || models === undefined) {
    if (model === null || model === undefined) return fail(`Either ${labels.model} or ${labels.models} must be provided.`);
    if (typeof model !== "string") {
      return fail(`${labels.model} should be a string to create homogeneous ${labels.models} (pass loaded models through ${labels.models}: [...])`);
    }
    return Array(count).fill(model);
  }
  if (!Array.isArray(models) || models.length === 0) return fail(`${labels.models} must be a non-empty list`);
  if (models.length !== count) fail(`${labels.models} length (${models.length}) must match ${labels.count} (${count})`);
  models.forEach((a, i) => {
    if (a === null || a === undefined) fail(`${labels.models}[${i}] is ${a}`);
  });
  if (model !== null && model !== undefined) {
    const conflicting = models.findIndex((a) => a !== model);
    if (conflicting >= 0) {
      fail(`${labels.model} ${describeSource(model)} conflicts with ${labels.models}[${conflicting}] ${describeSource(models[conflicting])}: give one of them, or the same name in both`);
    }
  }
  return [...models];
}

async function loadTokenizer(source: string): Promise<ComlrlTokenizer> {
  return ComlrlTokenizer.fromDirectory(await resolveModelSource(source));
}

/** COMLRL-SPEC §5.2: one tokenizer per agent. */
export async function resolveTokenizers(
  agentModel: ModelSource | null | undefined,
  agents: readonly ModelSource[] | null | undefined,
  tokenizer: ComlrlTokenizer | readonly ComlrlTokenizer[] | null | undefined,
  sources: readonly ModelSource[],
): Promise<ComlrlTokenizer[]> {
  const n = sources.length;
  if (Array.isArray(tokenizer)) {
    if (tokenizer.length !== n) throw new AgentResolutionError(`tokenizers length (${tokenizer.length}) must match agents (${n})`);
    return [...tokenizer];
  }
  if (tokenizer) return Array(n).fill(tokenizer);
  if ((agents === null || agents === undefined) && typeof agentModel !== "string") {
    throw new AgentResolutionError("Tokenizer must be provided when agentModel is a loaded model.");
  }
  if (sources.some((s) => typeof s !== "string")) throw new AgentResolutionError("Tokenizer(s) must be provided when agents are model objects.");
  const cache = new Map<string, Promise<ComlrlTokenizer>>();
  return Promise.all(
    sources.map((s) => {
      const id = s as string;
      if (!cache.has(id)) cache.set(id, loadTokenizer(id));
      return cache.get(id)!;
    }),
  );
}

/**
 * The sampling stream training draws from: the trainer's own, so a model the caller passed in keeps its default
 * stream as it came; and the one evaluation draws from, so that it never moves training's.
 */
export const TRAINING_STREAM = "train";
export const EVAL_STREAM = "eval";

/** How an agent samples completions: length limit, temperature and filters. */
export interface SamplingSettings {
  /** Most tokens a completion may have. */
  maxNewTokens: number;
  /** Softmax temperature. */
  temperature: number;
  /** Nucleus filter: keep the smallest token set whose probability reaches topP (1: off). */
  topP: number;
  /** Keep only the topK most likely tokens; null: no top-k filter. */
  topK: number | null;
  /** null: the model's generation_config.json decides (else 1, off). */
  repetitionPenalty: number | null;
  /** Most tokens a prompt may have (null: the tokenizer's model_max_length); see prompt-length.ts. */
  maxPromptTokens: number | null;
  /** A prompt over its limit is truncated or refused. */
  promptOverflow: PromptOverflow;
}

/** One trained agent: its model, tokenizer, optimizer, sampling settings and (with reference KL) its frozen reference. */
export class Agent implements RolloutPolicy {
  constructor(
    /** The agent's index (0-based). */
    readonly index: number,
    /** The trained model. */
    readonly model: CausalLM,
    /** Its tokenizer. */
    readonly tokenizer: ComlrlTokenizer,
    /** Its AdamW optimizer. */
    readonly optimizer: Optimizer,
    /** How it samples in training rollouts. */
    readonly sampling: SamplingSettings,
    /** Its frozen reference, when reference KL is on. */
    readonly reference: CausalLM | null,
    /** Where the reference was loaded from, or null when it is a copy of a given model object. */
    readonly referenceSource: string | null = null,
    /** A value head on the actor's own backbone (IAC without separate critics), trained by the same optimizer. */
    readonly valueHead: ValueHead | null = null,
    /** What evaluation samples with: `sampling` without the trainer's generationKwargs. */
    readonly evalSampling: SamplingSettings = sampling,
    /** Whether the trainer loaded the model (and frees it); false for a model object the caller passed in. */
    readonly ownsModel = false,
  ) {}

  /**
   * What every optimizer step of the policy alone names (a StepRequest's part): component agent_i, its optimizer, its
   * gradients to drop.
   * @internal
   */
  policyStep(): { component: string; optimizer: Optimizer; zeroGrad: () => Promise<void> } {
    return { component: `agent_${this.index}`, optimizer: this.optimizer, zeroGrad: () => this.model.zeroGrad() };
  }

  /**
   * K samples per prompt from the model's `stream` (evaluation samples from its own, see evalPolicy). With
   * `recordAtPolicyStep`, the tokens' log-probs are recorded too, stamped with that count of the policy's steps.
   */
  async sample(prompts: string[], k: number, stream = TRAINING_STREAM, sampling = this.sampling, recordAtPolicyStep?: number): Promise<SampledCompletions> {
    const limit = promptTokenLimit(this.model.config.maxPositionEmbeddings, this.tokenizer, sampling);
    const promptIds = prompts.map((p) => boundPrompt(this.tokenizer.encode(p), p, limit, sampling.promptOverflow, this.tokenizer.truncationSide));
    const generation = await this.model.generate(promptIds, {
      stream,
      maxNewTokens: sampling.maxNewTokens,
      numReturnSequences: k,
      doSample: true,
      temperature: sampling.temperature,
      topP: sampling.topP,
      topK: sampling.topK,
      repetitionPenalty: sampling.repetitionPenalty,
      eosTokenIds: this.tokenizer.eosTokenIds,
      padTokenId: this.tokenizer.padTokenId,
      returnLogprobs: recordAtPolicyStep !== undefined,
    });
    const ofPrompt = <T>(rows: T[], p: number) => rows.slice(p * k, (p + 1) * k);
    const completionIds = prompts.map((_, p) => ofPrompt(generation.completions, p));
    const texts = completionIds.map((row) => row.map((ids) => this.tokenizer.decode(ids, { skipSpecialTokens: true })));
    const { logprobs, processedLogprobs } = generation;
    if (!logprobs || !processedLogprobs || recordAtPolicyStep === undefined) return { promptIds, completionIds, texts };
    const recorded = prompts.map((_, p) => ({ policy: ofPrompt(logprobs, p), processed: ofPrompt(processedLogprobs, p), updates: recordAtPolicyStep }));
    return { promptIds, completionIds, texts, logprobs: recorded };
  }

  /**
   * Frees what the agent holds: its optimizer, value head and reference, and its model when the trainer loaded it; a
   * caller's model is kept, only taken off the agent's compute lane.
   */
  dispose(): void {
    this.optimizer.dispose();
    this.valueHead?.dispose();
    this.reference?.dispose();
    if (this.ownsModel) this.model.dispose();
    else this.model.setComputeLane(null);
  }

  /** The same agent sampling from the evaluation stream with its evaluation settings, without reference KL. */
  evalPolicy(): RolloutPolicy {
    return { sample: (prompts, k) => this.sample(prompts, k, EVAL_STREAM, this.evalSampling) };
  }

  /** Per completion, Σ over its tokens of the k3 KL estimate to the frozen reference. */
  async referenceKl(promptIds: number[][], completions: Int32Array[][]): Promise<number[][]> {
    if (!this.reference) return completions.map((row) => row.map(() => 0));
    const prompts = completions.flatMap((row, p) => row.map(() => promptIds[p]));
    const kl = await this.model.klK3(this.reference, prompts, completions.flat());
    let offset = 0;
    return completions.map((row) => row.map(() => kl[offset++]));
  }
}

export interface BuildAgentsOptions {
  sources: ModelSource[];
  tokenizers: ComlrlTokenizer[];
  devices: string[];
  referenceDevices: string[] | null;
  dtype: Dtype;
  seed: number;
  optimizer: AdamWOptions;
  /** Training's sampling settings, and evaluation's when they differ (the trainer's generationKwargs apply to training only). */
  sampling: SamplingSettings;
  evalSampling?: SamplingSettings;
  /** References as deep copies of the agents even when they came from ids (IAC); otherwise ids are reloaded. */
  referencesAsCopies?: boolean;
  /** Puts a value head on every actor (its optimizer then covers backbone and head). */
  valueHeads?: { hiddenDim: number | null } | null;
}

/** Awaits every promise; if any rejects, frees what the others produced and rethrows the first failure. */
export async function allOrFree<T>(promises: Promise<T>[], free: (value: T, index: number) => void): Promise<T[]> {
  const settled = await Promise.allSettled(promises);
  const failure = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (!failure) return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
  settled.forEach((s, i) => s.status === "fulfilled" && free(s.value, i));
  throw failure.reason;
}

/** Registers something a build made, to be freed if the build fails; returns it. */
export type Own = <D extends { dispose(): void }>(made: D) => D;

/**
 * Runs a build, freeing everything it registered with `own` — latest first — when it fails, and rethrows; a model
 * the caller passed in is never registered, so never freed.
 */
export async function freeOnFailure<T>(build: (own: Own) => Promise<T>): Promise<T> {
  const made: Array<{ dispose(): void }> = [];
  const own: Own = (item) => {
    made.push(item);
    return item;
  };
  try {
    return await build(own);
  } catch (error) {
    for (const item of made.reverse()) item.dispose();
    throw error;
  }
}

/**
 * Each source's model: an id loaded by `load` (an id repeated loads independent copies; a failed load is an
 * AgentResolutionError naming the role and the id) and owned, a given model object taken as it is (the same object
 * twice is shared). The loads run together; when one fails the others' models are freed.
 */
export async function loadOrTake(sources: readonly ModelSource[], role: string, load: (id: string, index: number) => Promise<CausalLM>, own: Own): Promise<CausalLM[]> {
  const models = await allOrFree(
    sources.map(async (source, i) => {
      if (typeof source !== "string") return source;
      try {
        return await load(source, i);
      } catch (error) {
        throw new AgentResolutionError(`Failed to load ${role} model from identifier '${source}': ${(error as Error).message}`, { cause: error });
      }
    }),
    (model, i) => typeof sources[i] === "string" && model.dispose(),
  );
  return models.map((model, i) => (typeof sources[i] === "string" ? own(model) : model));
}

/**
 * The agents over their sources' models (loadOrTake), each with an AdamW optimizer and, when asked, a frozen
 * reference (a fresh load of the same id, or a deep copy of a given model) and a value head. If anything fails,
 * everything made is freed.
 */
export function buildAgents(options: BuildAgentsOptions): Promise<Agent[]> {
  const { sources, dtype, seed } = options;
  return freeOnFailure(async (own) => {
    const models = await loadOrTake(sources, "actor", (id, i) => CausalLM.load(id, { dtype, device: options.devices[i], seed: seed + i }), own);
    models.forEach((m, i) => m.seedTraining(seed + i, TRAINING_STREAM));
    const reloads = (i: number) => typeof sources[i] === "string" && !options.referencesAsCopies;
    const devices = options.referenceDevices;
    const references = devices
      ? (await allOrFree(models.map(async (model, i) => (reloads(i) ? await CausalLM.load(sources[i] as string, { dtype, device: devices[i] }) : await model.clone({ device: devices[i] })).freeze()), (r) => r.dispose())).map(own)
      : models.map(() => null);
    return models.map((model, i) => {
      const head = options.valueHeads ? own(ValueHead.create(model, { hiddenDim: options.valueHeads.hiddenDim, seed: seed + 1000 + i })) : null;
      const optimizer = own(new Optimizer(head ? [{ module: model }, { module: head }] : model, options.optimizer));
      const referenceSource = references[i] && reloads(i) ? (sources[i] as string) : null;
      return new Agent(i, model, options.tokenizers[i], optimizer, options.sampling, references[i], referenceSource, head, options.evalSampling, typeof sources[i] === "string");
    });
  });
}

/**
 * Registers each agent as component agent_i (exported as agent_i/, or where exportDirOf says), its value head as
 * agent_i/value_head (exported beside it as value_head.pt) and its reference as reference_i; modules the caller passed
 * in are not the trainer's to free.
 */
export function registerAgents(
  registry: ComponentRegistry,
  agents: readonly Agent[],
  exportDirOf: (agent: number) => string = (i) => `agent_${i}`,
): void {
  for (const agent of agents) {
    const name = `agent_${agent.index}`;
    registry.register({
      name,
      module: causalLMModule(agent.model, agent.tokenizer, TRAINING_STREAM),
      optimizer: agent.optimizer,
      ownsModule: agent.ownsModel,
      exportDir: exportDirOf(agent.index),
    });
    if (agent.valueHead) {
      registry.register({ name: `${name}/value_head`, module: valueHeadModule(agent.valueHead), ownsModule: true, exportDir: exportDirOf(agent.index) });
    }
  }
  for (const agent of agents) {
    if (!agent.reference) continue;
    registry.register({
      name: `reference_${agent.index}`,
      module: causalLMModule(agent.reference, null),
      ownsModule: true,
      reloadSource: agent.referenceSource,
    });
  }
}

/**
 * The config input with its agent count settled (REQUIREMENTS "What can be trained"): the trainer's numAgents and
 * the config's must agree when both are given; with neither, the count follows an `agents` list; the config's own
 * default applies only when nothing names a count.
 */
export function resolveAgentCount<C extends object>(config: C | undefined, numAgents: number | undefined, agents: readonly unknown[] | null | undefined): C {
  const input = (config ?? {}) as Record<string, unknown>;
  const key = input.numAgents !== undefined ? "numAgents" : input.num_agents !== undefined ? "num_agents" : null;
  if (key !== null) {
    if (numAgents !== undefined && input[key] !== numAgents) {
      throw new RangeError(`numAgents (${numAgents}) must match config.${key} (${JSON.stringify(input[key])})`);
    }
    return input as C;
  }
  const count = numAgents ?? (Array.isArray(agents) ? agents.length : undefined);
  return (count === undefined ? input : { ...input, numAgents: count }) as C;
}
