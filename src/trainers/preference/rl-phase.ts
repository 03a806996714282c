// The RL phase of MARLHF and MARLHFIter (COMLRL-SPEC §6.4): an online learner over MARLHF's own agents — MAGRPO for
// the MAGRPO family (its advantage mode set by rlAlgorithm), IAC or MAAC for "iac" / "maac" — whose rollouts are
// scored by the reward model and which runs inside its trainer's host, so that the host's schedule, counters,
// logs, checkpoints and data-parallel agreement cover it. Its config is built from the one field group the RL
// phase shares with MARLHF's config: every field of the learner's config is read from MARLHF's by the same name
// (a field MARLHF lacks is an error, never a silent default). Critics come from the first source given of
// critics, criticModel, criticModelName or the first agent's model id; the host registers them.
import { iacConfig, maacConfig, magrpoConfig } from "../../config/index.js";
import type { ConfigInput, FieldSpecs } from "../../config/fields.js";
import type { RlhfConfig } from "./base-config.js";
import { IAC_FIELDS, MAAC_FIELDS } from "../../config/actor-critic.js";
import { MAGRPO_FIELDS } from "../../config/magrpo.js";
import type { RolloutEnvironment } from "../../rollout/tree.js";
import type { Item } from "../../rollout/types.js";
import type { Actors, setUpActors } from "../actors.js";
import { IACLearner, loadIACCritics } from "../actor-critic/iac.js";
import { loadMAACCritic, MAACLearner } from "../actor-critic/maac.js";
import { refuseCriticSources, registerCritics, resolveCentralCriticSource, resolveSeparateCriticSources } from "../actor-critic/critics.js";
import { AgentResolutionError, type ModelSource } from "../agents.js";
import { sharesModels } from "../lanes.js";
import type { ComponentRegistry } from "../../components/registry.js";
import type { StageHost } from "../lifecycle/stage-host.js";
import { MAGRPOLearner, type MAGRPOTrainerOptions } from "../reinforce/magrpo.js";

export type RLLearner = MAGRPOLearner | IACLearner | MAACLearner;

export type { RlhfConfig };
export type IACOrMAACLearner = IACLearner | MAACLearner;

/**
 * What the RL phase asks of MARLHF's actors, as the standalone trainer of its algorithm does: IAC's value heads on
 * the actors and copied references, its updates in turn when agents share one critic model; MAAC's updates in turn
 * (no CPU agent lanes).
 */
export function actorExtras(config: RlhfConfig, critics: CriticOptions): Parameters<typeof setUpActors>[2] {
  if (config.rlAlgorithm === "maac") return { updatesInTurn: true };
  if (config.rlAlgorithm !== "iac") return {};
  const sharedCritic = config.useSeparateCritic && sourceGiven(critics) && sharesModels(resolveSeparateCriticSources(critics, config.numAgents));
  return { referencesAsCopies: true, valueHeads: config.useSeparateCritic ? null : { hiddenDim: config.valueHeadHiddenDim }, updatesInTurn: sharedCritic };
}

/**
 * The learner's config input: every field of `fields` from MARLHF's config, except `derived`. Data parallel is the
 * host's, so the learner runs as "none" (or "mp") in each rank.
 */
function rlPhaseInput<S extends FieldSpecs>(fields: S, c: RlhfConfig, derived: Partial<Record<keyof S & string, unknown>>): ConfigInput<S> {
  const source: Record<string, unknown> = Object.fromEntries(Object.entries(c));
  const input: Record<string, unknown> = { parallelTraining: c.parallelTraining === "mp" ? "mp" : "none" };
  for (const key of Object.keys(fields)) {
    if (key in input) continue;
    if (key in derived) input[key] = derived[key as keyof S & string];
    else if (key in source) input[key] = source[key];
    else throw new TypeError(`MARLHF's RL phase: the ${c.rlAlgorithm} config has a field "${key}" that MARLHFConfig lacks; add it to MARLHF's fields`);
  }
  return input as ConfigInput<S>;
}

/**
 * What CoMLRL's MARLHF does at the start of every actor-critic RL phase, where it builds a new IAC or MAAC trainer
 * around the current actors: critics loaded again from their sources (a critic given as an object keeps its weights,
 * as a new trainer there reuses the object), value heads as first made, every actor and critic optimizer new. The
 * reference models stay those made with the trainer. Null for the MAGRPO family, whose RL phase there trains on with
 * MARLHF's own optimizers.
 */
export function backEndRenewal(learner: RLLearner): (() => Promise<void>) | null {
  if (learner instanceof MAGRPOLearner) return null;
  const heads = [...learner.agents.flatMap((a) => (a.valueHead ? [a.valueHead] : [])), ...learner.critics.map((c) => c.valueHead)];
  const initialHeads = heads.map((head) => head.stateDict());
  return async () => {
    for (const critic of learner.critics) if (typeof critic.source === "string") await critic.model.loadWeights(critic.model.source!);
    heads.forEach((head, i) => head.loadStateDict(initialHeads[i]));
    for (const optimizer of [...learner.agents.map((a) => a.optimizer), ...learner.critics.map((c) => c.optimizer)]) await optimizer.reset();
  };
}

export interface CriticOptions {
  criticModel?: ModelSource | null;
  critics?: ModelSource[] | null;
}

const sourceGiven = (options: CriticOptions) => (options.criticModel ?? null) !== null || (options.critics ?? null) !== null;

/**
 * The critics' sources: critics or criticModel, else criticModelName, else the first actor's model id for every
 * critic (as CoMLRL does, so heterogeneous actors still get critics of one size).
 */
function criticSources(config: RlhfConfig, options: CriticOptions, actorSources: readonly ModelSource[], count: number): ModelSource[] {
  if (sourceGiven(options)) return config.rlAlgorithm === "maac" ? [resolveCentralCriticSource(options)] : resolveSeparateCriticSources(options, count);
  if (config.criticModelName !== null) return Array(count).fill(config.criticModelName);
  const [first] = actorSources;
  if (typeof first !== "string") {
    throw new AgentResolutionError(`MARLHF: rlAlgorithm "${config.rlAlgorithm}" needs its critics' source: set criticModelName, criticModel or critics (the first actor is a loaded model object, with no model id to load critics from)`);
  }
  return Array<ModelSource>(count).fill(first);
}

export interface RLPhaseSetUp {
  config: RlhfConfig;
  actors: Pick<Actors, "agents" | "sources" | "placement" | "lanes">;
  /** Where the learner's rollouts run: MARLHF's reward-model environment. */
  environment: RolloutEnvironment;
  critics: CriticOptions;
  options: Pick<MAGRPOTrainerOptions, "rewardBatching" | "scoring" | "sampleLogInterval"> & { trainDataset: Item[]; evalDataset: Item[] | null };
  /** The trainer the learner runs inside; its registry takes the critics. */
  host: StageHost;
  registry: ComponentRegistry;
}

/**
 * Builds the learner around MARLHF's actors and registers its critics in the host's registry (IAC: agent_i/critic,
 * exported there; MAAC: critic). The learner registers nothing and is never closed on its own: the host's
 * registry frees what it loaded.
 */
export async function buildRLLearner(setUp: RLPhaseSetUp): Promise<RLLearner> {
  const { config: c, actors, host } = setUp;
  const n = actors.agents.length;
  const environment = { ...setUp.environment };
  const options = { rewardFunc: environment.rewardFunc, ...setUp.options };
  if (c.rlAlgorithm === "iac") {
    const derived = { numAgents: n, criticLearningRate: c.criticLearningRate ?? c.agentLearningRate, criticDevices: c.parallelTraining === "mp" ? (c.criticDevices ?? [...actors.placement.agentDevices]) : c.criticDevices };
    const iac = iacConfig(rlPhaseInput(IAC_FIELDS, c, derived));
    const sources = iac.useSeparateCritic ? criticSources(c, setUp.critics, actors.sources, n) : (refuseCriticSources(setUp.critics), []);
    const critics = await loadIACCritics(iac, actors, sources);
    const learner = new IACLearner(iac, actors.agents, critics, options, environment, host);
    registerCritics(setUp.registry, learner.critics, (i) => `agent_${i}/critic`, (i) => `agent_${i}/critic`);
    return learner;
  }
  if (c.rlAlgorithm === "maac") {
    const given = c.criticDevices;
    if (Array.isArray(given) && given.length > 1) {
      throw new RangeError(`MARLHF: criticDevices must name one device with rlAlgorithm "maac" (its one centralized critic), got ${given.length}: ${given.join(", ")}`);
    }
    // Under "mp" the centralized critic takes one device (§10.16): criticDevices, else agent 0's.
    const derived = { numAgents: n, criticLearningRate: c.criticLearningRate ?? c.agentLearningRate, criticDevices: c.parallelTraining === "mp" ? (given ?? actors.placement.agentDevices[0]) : given };
    const maac = maacConfig(rlPhaseInput(MAAC_FIELDS, c, derived));
    const [source] = criticSources(c, setUp.critics, actors.sources, 1);
    const critic = await loadMAACCritic(maac, actors, source, c.criticValueHeadHiddenDim);
    const learner = new MAACLearner(maac, actors.agents, critic, options, environment, host);
    registerCritics(setUp.registry, learner.critics, () => "critic", () => "critic");
    return learner;
  }
  const magrpo = magrpoConfig(rlPhaseInput(MAGRPO_FIELDS, c, { numAgents: n, numIterations: c.rlNumIterations }));
  return new MAGRPOLearner(magrpo, actors.agents, options, environment, host);
}
