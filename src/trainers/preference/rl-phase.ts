// The RL phase of MARLHF and MARLHFIter (COMLRL-SPEC §6.4): the learner of the trainer that rlAlgorithm names — any
// registered trainer with an RL back-end (rl-back-end.ts): the MAGRPO family, IAC, MAAC — over MARLHF's own agents,
// its rollouts scored by the reward model, running inside its trainer's host, so that the host's schedule, counters,
// logs, checkpoints and data-parallel agreement cover it. The back-end builds the learner's config from MARLHF's
// values and registers its critics in the host's registry.
import { ConfigError } from "../../config/fields.js";
import type { ConfigSource } from "../../config/magrpo.js";
import { OBJECTIVE_FIELDS } from "../../config/objectives.js";
import { MARLHF_FIELDS } from "../../config/preference.js";
import { rewardModelDeviceGiven } from "../../config/index.js";
import type { ActorExtras } from "../actors.js";
import type { ModelSource } from "../agents.js";
import { actorsOnly, type RewardModelDeclaration } from "../placement.js";
import { rewardModelSource } from "./reward-model-stage.js";
import type { RlhfConfig } from "./base-config.js";
import { ActorCriticLearner } from "../actor-critic/learner.js";
import "../online-trainers.js";
import { rlBackEnd, trainerDefinition, trainerDefinitions } from "../registry.js";
import type { RLPhaseCritics, RLPhaseLearner, RLPhaseSetUp } from "../rl-back-end.js";

export type { RlhfConfig, RLPhaseCritics, RLPhaseLearner, RLPhaseSetUp };

/**
 * MARLHF's fields for its RL phase's objective, each with the learner's field it stands for: a back-end whose learner
 * lacks that field (an actor-critic one) must get it at its default.
 */
const OBJECTIVE_FIELD_NAMES: ReadonlyArray<readonly [keyof typeof MARLHF_FIELDS, string]> = [
  ...Object.keys(OBJECTIVE_FIELDS).flatMap((field) => (field === "numIterations" ? [] : [[field as keyof typeof MARLHF_FIELDS, field] as const])),
  ["rlNumIterations", "numIterations"],
  ["tokenAccounting", "tokenAccounting"],
];

/**
 * MARLHF's config, its rlAlgorithm checked against the registered RL back-ends (an unknown one is a ConfigError
 * naming `configName`.rlAlgorithm and the choices), its objective fields against the back-end's learner (one without
 * them takes them at their defaults), and its critic sources against the back-end's need of them.
 */
export function checkRLPhase<C extends RlhfConfig>(config: C, configName: string, critics: RLPhaseCritics = {}, options: ConfigSource = {}): C {
  const backEnd = rlBackEnd(config.rlAlgorithm, configName, options);
  const learnerFields = trainerDefinition(config.rlAlgorithm).fields;
  const values: Readonly<Record<string, unknown>> = config;
  for (const [field, learnerField] of OBJECTIVE_FIELD_NAMES) {
    const byDefault = MARLHF_FIELDS[field].default;
    const given = values[field];
    if (learnerField in learnerFields || (Array.isArray(given) ? given : [given]).every((value) => value === byDefault)) continue;
    const prefix = options.source === undefined ? "" : `${options.source}: `;
    throw new ConfigError(`${prefix}${configName}.${field} has no effect with rlAlgorithm "${config.rlAlgorithm}", whose learner has no ${learnerField}: leave it at ${JSON.stringify(byDefault)}`, field);
  }
  if (!backEnd.critics && ((critics.criticModel ?? null) !== null || (critics.critics ?? null) !== null)) {
    const withCritics = trainerDefinitions().flatMap((definition) => (definition.rlBackEnd?.critics ? [`"${definition.section}"`] : []));
    throw new TypeError(`MARLHF: criticModel and critics are only used with rlAlgorithm ${withCritics.join(" or ")} (the RL phases with critics)`);
  }
  return config;
}

/**
 * What MARLHF asks of its actors and declares beside them: the RL phase's modules as the standalone trainer of its
 * algorithm declares them (IAC's critics, value heads and copied references; MAAC's centralized critic), and the
 * reward model.
 */
export function rlhfActorExtras(config: RlhfConfig, critics: RLPhaseCritics): ActorExtras {
  const extras = rlBackEnd(config.rlAlgorithm, "MARLHFConfig").actorExtras(config, critics);
  const rewardModel = (actors: readonly ModelSource[]): RewardModelDeclaration => ({
    source: rewardModelSource(config, actors[0]),
    trainsBackbone: !config.rewardFreezeBackbone,
    device: config.rewardModelDevice,
    deviceGiven: rewardModelDeviceGiven(config),
  });
  return { ...extras, modules: (actors) => ({ ...(extras.modules?.(actors) ?? actorsOnly(config)), rewardModel: rewardModel(actors) }) };
}

/**
 * What CoMLRL's MARLHF does at the start of every actor-critic RL phase, where it builds a new actor-critic trainer
 * around the current actors: critics loaded again from their sources (a critic given as an object keeps its weights,
 * as a new trainer there reuses the object), value heads as first made, every actor and critic optimizer new. The
 * reference models stay those made with the trainer. Null for a learner without critics (the MAGRPO family), whose
 * RL phase there trains on with MARLHF's own optimizers.
 */
export function backEndRenewal(learner: RLPhaseLearner): (() => Promise<void>) | null {
  if (!(learner instanceof ActorCriticLearner)) return null;
  const heads = [...learner.agents.flatMap((a) => (a.valueHead ? [a.valueHead] : [])), ...learner.critics.map((c) => c.valueHead)];
  const initialHeads = heads.map((head) => head.stateDict());
  return async () => {
    for (const critic of learner.critics) if (typeof critic.source === "string") await critic.model.loadWeights(critic.model.source!);
    heads.forEach((head, i) => head.loadStateDict(initialHeads[i]));
    for (const optimizer of [...learner.agents.map((a) => a.optimizer), ...learner.critics.map((c) => c.optimizer)]) await optimizer.reset();
  };
}

/** Builds the learner of rlAlgorithm's back-end around MARLHF's actors; it registers its critics in the host's registry. */
export async function buildRLLearner(setUp: RLPhaseSetUp): Promise<RLPhaseLearner> {
  return rlBackEnd(setUp.config.rlAlgorithm, "MARLHFConfig").learner({ ...setUp, environment: { ...setUp.environment } });
}
