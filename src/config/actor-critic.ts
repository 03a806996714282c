// Actor-critic configs (COMLRL-SPEC §2.2, §2.3): IAC (independent critics, or a value head on each actor), MAAC
// (one centralized critic) and MAPPO (ours: PPO over either). Defaults are CoMLRL's; fields marked "(ours)" are
// additions of this port.
import { deviceSpec } from "./devices.js";
import { bool, buildConfig, float, int, nullable, oneOf, withDefaults, type ConfigInput, type ConfigOf, type Fail, type ValuesOf } from "./fields.js";
import { GROUP_FIELDS } from "./groups.js";
import type { ConfigSource } from "./magrpo.js";
import { agentObjectives, OBJECTIVE_FIELDS, rebuildObjectives, type DerivedObjectives } from "./objectives.js";

/** What a critic reads: "v" the prompt alone (V(h)), "q" prompt and completion (Q(h, a)). */
export type CriticType = "v" | "q";

/**
 * What an actor's objective takes of a MAGRPO-family objective's: the critic's advantage leaves no group to scale,
 * filter or group by, and the reference KL is in the reward the critic learns (so the KL-in-the-loss fields go too).
 */
const {
  scaleRewards: _scaleRewards,
  zeroVarianceFilter: _zeroVarianceFilter,
  advantageGrouping: _advantageGrouping,
  klIn: _klIn,
  klEstimator: _klEstimator,
  useBiasCorrectionKl: _useBiasCorrectionKl,
  ...ACTOR_OBJECTIVE_FIELDS
} = OBJECTIVE_FIELDS;
/** The fields an actor's objective leaves out, at their MAGRPO defaults. */
const ACTOR_OBJECTIVE_DEFAULTS = { scaleRewards: null, zeroVarianceFilter: null, advantageGrouping: "joint", klIn: "reward", klEstimator: "k3", useBiasCorrectionKl: true } as const;

const COMMON_FIELDS = {
  ...GROUP_FIELDS,
  // CoMLRL's IACConfig/MAACConfig default top_k to None: generate() then takes the model's generation_config.json
  // top_k (50 when it has none; Qwen2.5-Instruct and Qwen3 ship 20). null does the same here.
  /** null (the default here): the model's generation_config.json decides (its top_k, else 50); 0 turns top-k filtering off. */
  topK: nullable(int({ min: 0 })),
  /** Completions per agent per prompt; > 1 only with numTurns 1. */
  numGenerations: int({ default: 1, min: 1 }),
  /** Passes over the train dataset. */
  numTrainEpochs: int({ default: 40, min: 1 }),
  /** AdamW learning rate of every actor. */
  agentLearningRate: float({ default: 5e-6, min: 0 }),
  /** AdamW learning rate of the critics (IAC: null = agentLearningRate). */
  criticLearningRate: nullable(float({ default: 5e-6, min: 0 })),
  /** Least env-step gap between two train-metric logs. */
  loggingSteps: int({ default: 1, min: 1 }),
  /** Validated only: the trainer's own numAgents argument decides the agent count. */
  numAgents: int({ default: 2, min: 1 }),
  /** >1 needs an external transition, and numGenerations 1. */
  numTurns: int({ default: 2, min: 1 }),
  /** γ of the TD(0) targets (CoMLRL 1.4.3's default 1.0); the return logged as a metric is undiscounted, as there. */
  discount: float({ default: 1.0, min: 0, max: 1 }),
  /** An episode ends after a turn whose mean reward is above this; null never ends early. */
  earlyTerminationThreshold: nullable(float({ default: -0.2 })),
  /** Use external transitions' prompts verbatim instead of passing them through formatters. */
  externalPromptPassthrough: bool({ default: false }),
  /** Samples an agent collects before it updates. */
  rolloutBufferSize: int({ default: 8, min: 1 }),
  /** Samples per optimizer step; defaults to rolloutBufferSize. */
  trainBatchSize: nullable(int({ min: 1 })),
  /** Weight of the value loss (in the shared-head sum; as the critic loss's factor otherwise). */
  valueLossCoef: float({ default: 0.6, above: 0 }),
  /** z-score advantages over the samples of an update. */
  advantageNormalization: bool({ default: true }),
  /** "v": V(h) on the prompt alone; "q": Q(h, a) on prompt and completion (its last token). */
  criticType: oneOf<CriticType>(["v", "q"], { default: "v" }),
  /** Devices of the critics; null = their agents' devices (MAAC: agent 0's). */
  criticDevices: deviceSpec(),
  ...ACTOR_OBJECTIVE_FIELDS,
};

/** The fields the actor-critic builders settle: trainBatchSize null takes rolloutBufferSize, criticLearningRate null agentLearningRate. */
type ActorCriticResolved = { readonly trainBatchSize: number; readonly criticLearningRate: number };

/**
 * The fields IAC and MAAC share (CoMLRL's IACConfig / MAACConfig); see docs/actor-critic.md for every default. The
 * actors' loss is an objective of the MAGRPO family (docs/objectives.md) over the critic's advantages: CoMLRL's own
 * ("comlrl", the default) or a clipped-ratio one, with numIterations passes per rollout.
 */
export interface ActorCriticConfig extends ConfigOf<typeof COMMON_FIELDS, ActorCriticResolved>, DerivedObjectives {}

/** IAC's and MAAC's fields (MARLHF's actor-critic RL phase builds its config from the same names). */
export const IAC_FIELDS = {
  ...COMMON_FIELDS,
  /** true: one critic LM per agent; false: a value head on each actor (one backward of actor + coef · value loss). */
  useSeparateCritic: bool({ default: true }),
  /** PPO-style value clipping around the old values; used only with shared heads (null: no clipping). */
  valueClipRange: nullable(float({ default: 0.2, above: 0 })),
  /** Hidden size of the separate critics' heads (null: Linear(H, 1)). */
  criticValueHeadHiddenDim: nullable(int({ min: 1 })),
  /** Hidden size of the heads on the actors (null: Linear(H, 1)). */
  valueHeadHiddenDim: nullable(int({ min: 1 })),
};

/** IAC's config: ActorCriticConfig plus the critics' form (separate critic LMs or value heads on the actors). */
export interface IACConfig extends ConfigOf<typeof IAC_FIELDS, ActorCriticResolved>, DerivedObjectives {}

/** MAAC's fields: the shared actor-critic fields, its critic's learning rate always set. */
export const MAAC_FIELDS = {
  ...COMMON_FIELDS,
  /** AdamW learning rate of the centralized critic. */
  criticLearningRate: float({ default: 5e-6, min: 0 }),
};

/** MAAC's config: the shared actor-critic fields; its one centralized critic is stepped in every agent's update. */
export interface MAACConfig extends ConfigOf<typeof MAAC_FIELDS, ActorCriticResolved>, DerivedObjectives {}

/** What iacConfig accepts: any subset of IACConfig's fields, camelCase or snake_case (trainBatchSize / criticLearningRate null = derived). */
export type IACConfigInput = ConfigInput<typeof IAC_FIELDS>;
/** What maacConfig accepts: any subset of MAACConfig's fields, camelCase or snake_case. */
export type MAACConfigInput = ConfigInput<typeof MAAC_FIELDS>;

/** MAPPO's fields (ours): MAAC's, with PPO's defaults for the actors' objective, and PPO's own. */
export const MAPPO_FIELDS = {
  // PPO's: the token-mean clipped ratio ("dapo"), and several passes (epochs) over each update's minibatches.
  ...withDefaults(MAAC_FIELDS, { lossType: "dapo", numIterations: 4 }),
  /** λ of the GAE(λ) advantages and their λ-return targets (0: TD(0), 1: Monte Carlo). */
  gaeLambda: float({ default: 0.95, min: 0, max: 1 }),
  /** PPO's value clipping around the old values (null: none). */
  valueClipRange: nullable(float({ default: 0.2, above: 0 })),
  /** true: MAAC's one critic on the joint text; false: one critic per agent on its own prompt (IAC's). */
  centralizedCritic: bool({ default: true }),
};

/** MAPPO's config (ours): MAAC's fields with PPO's defaults for the actors' objective, and PPO's own (docs/mappo.md). */
export interface MAPPOConfig extends ConfigOf<typeof MAPPO_FIELDS, ActorCriticResolved>, DerivedObjectives {}

/** What mappoConfig accepts: any subset of MAPPOConfig's fields, camelCase or snake_case. */
export type MAPPOConfigInput = ConfigInput<typeof MAPPO_FIELDS>;

function resolveCommon<V extends ValuesOf<typeof COMMON_FIELDS>>(values: V, fail: Fail<typeof COMMON_FIELDS>, criticsNeedDevices: boolean) {
  if (values.numTurns > 1 && values.numGenerations !== 1) fail("numGenerations", `must be 1 when numTurns > 1 (multi-turn actor-critic follows one trajectory), got ${values.numGenerations}`);
  if (values.parallelTraining === "mp") {
    if (values.agentDevices === null) fail("agentDevices", 'must be set when parallelTraining is "mp"');
    if (criticsNeedDevices && values.criticDevices === null) fail("criticDevices", 'must be set when parallelTraining is "mp" and critics are separate models');
  }
  return {
    ...values,
    trainBatchSize: values.trainBatchSize ?? values.rolloutBufferSize,
    criticLearningRate: values.criticLearningRate ?? values.agentLearningRate,
    objectives: agentObjectives({ ...values, ...ACTOR_OBJECTIVE_DEFAULTS }, values.numAgents, fail as (field: string, reason: string) => never),
  };
}

/** Builds a validated IAC config with CoMLRL's defaults; every invalid value is a ConfigError naming the field. */
export function iacConfig(input?: IACConfigInput | IACConfig, options: ConfigSource = {}): IACConfig {
  return rebuildObjectives(input, "IACConfig", options.source, (rest) =>
    buildConfig(IAC_FIELDS, rest as IACConfigInput | undefined, {
      configName: "IACConfig",
      source: options.source,
      finish: (values, fail) => {
        // A value head on the actor trains in CoMLRL's one actor-critic backward, which has no other policy loss.
        if (!values.useSeparateCritic && [values.lossType].flat().some((t) => t !== "comlrl")) fail("lossType", "needs separate critics (useSeparateCritic true)");
        if (!values.useSeparateCritic && [values.maskTruncatedCompletions].flat().some(Boolean)) fail("maskTruncatedCompletions", "needs separate critics (useSeparateCritic true)");
        return resolveCommon(values, fail as Fail<typeof COMMON_FIELDS>, values.useSeparateCritic);
      },
    }),
  );
}

/** Builds a validated MAAC config with CoMLRL's defaults; criticDevices names at most one device. */
export function maacConfig(input?: MAACConfigInput | MAACConfig, options: ConfigSource = {}): MAACConfig {
  return rebuildObjectives(input, "MAACConfig", options.source, (rest) =>
    buildConfig(MAAC_FIELDS, rest as MAACConfigInput | undefined, {
      configName: "MAACConfig",
      source: options.source,
      finish: (values, fail) => {
        if (Array.isArray(values.criticDevices) && values.criticDevices.length > 1) {
          fail("criticDevices", `must name one device: MAAC has one centralized critic, got ${values.criticDevices.length}`);
        }
        return resolveCommon(values, fail as Fail<typeof COMMON_FIELDS>, true);
      },
    }),
  );
}

/** Builds a validated MAPPO config; the critics default to their agents' devices (the centralized one to agent 0's). */
export function mappoConfig(input?: MAPPOConfigInput | MAPPOConfig, options: ConfigSource = {}): MAPPOConfig {
  return rebuildObjectives(input, "MAPPOConfig", options.source, (rest) =>
    buildConfig(MAPPO_FIELDS, rest as MAPPOConfigInput | undefined, {
      configName: "MAPPOConfig",
      source: options.source,
      finish: (values, fail) => {
        if (values.centralizedCritic && Array.isArray(values.criticDevices) && values.criticDevices.length > 1) {
          fail("criticDevices", `must name one device with centralizedCritic, got ${values.criticDevices.length}`);
        }
        return resolveCommon(values, fail as Fail<typeof COMMON_FIELDS>, false);
      },
    }),
  );
}
