// Critics for the actor-critic trainers (REQUIREMENTS "LLM critics", COMLRL-SPEC §5.1): causal LMs from ids, dirs or
// loaded objects, each given a fresh value head and an optimizer over backbone and head. IAC has one per agent
// (fed its actor's token ids) or none (the head sits on the actor); MAAC has one (fed agent 0's tokenization of the
// joint text). A critic must read the token ids it is given, so its vocabulary must cover its tokenizer's.
import { CausalLM, type Dtype } from "../../models/causal-lm.js";
import { Optimizer, type AdamWOptions } from "../../models/optimizer.js";
import type { ComlrlTokenizer } from "../../models/tokenizer.js";
import { ValueHead } from "../../models/value-head.js";
import { AgentResolutionError, freeOnFailure, loadOrTake, resolveModelSources, type ModelSource } from "../agents.js";
import type { ComponentRegistry } from "../../components/registry.js";
import { causalLMModule, valueHeadModule } from "../../models/components.js";

/** A critic LM with its value head and optimizer. */
export interface Critic {
  /** The critic's language model, which the value head reads hidden states from. */
  model: CausalLM;
  /** Restore a saved head with critic.valueHead.loadStateDict("…/value_head.pt"). */
  valueHead: ValueHead;
  /** Steps the critic's model and value head. */
  optimizer: Optimizer;
  /** Where it came from: an id/dir the trainer loaded (and owns), or the caller's object. */
  source: ModelSource;
}

export interface CriticSourceOptions {
  criticModel?: ModelSource | null;
  critics?: ModelSource[] | null;
}

/**
 * criticModel alone stands for every critic, a loaded model object too (one model then shared by the critics, each
 * with its own head, as CoMLRL's critic_model); with critics it must agree with them.
 */
function criticSources(options: CriticSourceOptions, count: number, countLabel: string): ModelSource[] {
  const shorthand = options.criticModel ?? null;
  if ((options.critics ?? null) === null && shorthand !== null) return Array<ModelSource>(count).fill(shorthand);
  return resolveModelSources(options.criticModel, options.critics, count, { model: "criticModel", models: "critics", count: countLabel });
}

/** IAC with separate critics: one source per agent. */
export function resolveSeparateCriticSources(options: CriticSourceOptions, numAgents: number): ModelSource[] {
  if ((options.criticModel ?? null) === null && (options.critics ?? null) === null) {
    throw new AgentResolutionError("Either criticModel or critics must be provided when useSeparateCritic is true.");
  }
  return criticSources(options, numAgents, "numAgents");
}

/** IAC with value heads on the actors: critic sources must be unset. */
export function refuseCriticSources(options: CriticSourceOptions): void {
  if ((options.criticModel ?? null) !== null || (options.critics ?? null) !== null) {
    throw new AgentResolutionError("critics can only be provided when useSeparateCritic is true (with useSeparateCritic false the value head sits on each actor).");
  }
}

/** MAAC: exactly one centralized critic. */
export function resolveCentralCriticSource(options: CriticSourceOptions): ModelSource {
  if ((options.criticModel ?? null) === null && (options.critics ?? null) === null) throw new AgentResolutionError("Either criticModel or critics must be provided for MAAC.");
  return criticSources(options, 1, "1 critic (MAAC has one centralized critic)")[0];
}

export interface LoadCriticsOptions {
  sources: readonly ModelSource[];
  /** One per critic, as the placement plan gives them. */
  devices: readonly string[];
  dtype: Dtype;
  seed: number;
  headHiddenDim: number | null;
  optimizer: AdamWOptions;
  /** The tokenizer whose ids each critic reads. */
  tokenizers: ComlrlTokenizer[];
}

function checkVocabulary(model: CausalLM, tokenizer: ComlrlTokenizer, index: number): void {
  if (model.config.vocabSize < tokenizer.vocabSize) {
    throw new AgentResolutionError(
      `critics[${index}] has a vocabulary of ${model.config.vocabSize} tokens but reads ids of a tokenizer with ${tokenizer.vocabSize}: a critic must be able to embed every id its tokenizer produces`,
    );
  }
}

/** One critic model object shared by agents must read one vocabulary: their tokenizers must agree on its size. */
function checkSharedCritics(options: LoadCriticsOptions): void {
  options.sources.forEach((source, i) => {
    const earlier = typeof source === "string" ? -1 : options.sources.indexOf(source);
    if (earlier >= 0 && earlier < i && options.tokenizers[i].vocabSize !== options.tokenizers[earlier].vocabSize) {
      throw new AgentResolutionError(`critics[${earlier}] and critics[${i}] are one model shared by agents whose tokenizers differ in vocabulary`);
    }
  });
}

/** Loads (or takes) each critic, checks its vocabulary, and gives it a fresh head and optimizer; frees all on failure. */
export function loadCritics(options: LoadCriticsOptions): Promise<Critic[]> {
  checkSharedCritics(options);
  return freeOnFailure(async (own) => {
    const load = (id: string, i: number) => CausalLM.load(id, { dtype: options.dtype, device: options.devices[i], seed: options.seed + 500 + i });
    const models = await loadOrTake(options.sources, "critic", load, own);
    return models.map((model, i) => {
      checkVocabulary(model, options.tokenizers[i], i);
      const valueHead = own(ValueHead.create(model, { hiddenDim: options.headHiddenDim, seed: options.seed + 2000 + i }));
      return { model, valueHead, optimizer: own(new Optimizer([{ module: model }, { module: valueHead }], options.optimizer)), source: options.sources[i] };
    });
  });
}

/** Registers critics as <name>/ (LM + optimizer) and <name>/value_head, exported into the same directory. */
export function registerCritics(registry: ComponentRegistry, critics: readonly Critic[], nameOf: (i: number) => string, exportDirOf: (i: number) => string): void {
  critics.forEach((critic, i) => {
    const name = nameOf(i);
    registry.register({ name, module: causalLMModule(critic.model, null), optimizer: critic.optimizer, ownsModule: typeof critic.source === "string", exportDir: exportDirOf(i) });
    registry.register({ name: `${name}/value_head`, module: valueHeadModule(critic.valueHead), ownsModule: true, exportDir: exportDirOf(i) });
  });
}
