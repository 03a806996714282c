// The policy objective of each MAGRPO-family agent: CoMLRL's on-policy sum (the default, unchanged) or one of the
// clipped-ratio losses TRL's GRPOTrainer offers, with its ratios, clipping, KL, entropy, reward scaling, masking,
// zero-variance filtering and the team's advantage groupings. Every field takes one value for all agents or a list
// with one per agent, as `agents` does; config files use TRL's snake_case names (loss_type, epsilon_high, …).
import { bool, ConfigError, field, float, int, nullable, oneOf, reject, show, type FieldSpec } from "./fields.js";

/** The policy loss: CoMLRL's on-policy sum ("comlrl") or one of TRL's clipped-ratio losses (docs/objectives.md). */
export type LossType = "comlrl" | "grpo" | "dapo" | "dr_grpo" | "bnpo" | "cispo" | "sapo";
/** Importance ratios per token, or one per sequence (GSPO). */
export type ImportanceSamplingLevel = "token" | "sequence";
/** Schulman's per-token estimators of the reference KL. */
export type KlEstimator = "k1" | "k2" | "k3";
/** Where the reference KL enters: shaped into the returns, or added as a loss term. */
export type KlIn = "reward" | "loss";
/** TRL's reward scaling: by the group's standard deviation, the batch's, or none. */
export type ScaleRewards = "group" | "batch" | "none";
/** Over which completions the advantage baseline is taken: the joint action's group, per agent, or per agent and turn. */
export type AdvantageGrouping = "joint" | "agent" | "agent_turn";

/** One value for every agent, or one per agent. */
export type PerAgent<T> = T | readonly T[];

/** One agent's objective, every field resolved. */
export interface AgentObjective {
  /** The policy loss: CoMLRL's on-policy sum ("comlrl"), or one of TRL's clipped-ratio losses (docs/objectives.md). */
  readonly lossType: LossType;
  /** Importance ratios per token, or one per sequence (GSPO). */
  readonly importanceSamplingLevel: ImportanceSamplingLevel;
  /** Updates per rollout; > 1 takes ratios against the rollout's own log-probs. */
  readonly numIterations: number;
  /** Lower clip ε of the ratio: clip(r, 1 − ε, 1 + εhigh). */
  readonly epsilon: number;
  /** Upper clip ε (clip-higher); for cispo the cap on the truncated ratio. */
  readonly epsilonHigh: number;
  /** Upper bound on the unclipped ratio (two-sided clipping); null: none. */
  readonly delta: number | null;
  /** The reference-KL estimator per token. */
  readonly klEstimator: KlEstimator;
  /** Where the reference KL (referenceKlEnabled, referenceKlCoef) enters: shaped into the returns, or a loss term. */
  readonly klIn: KlIn;
  /** TRL's use_bias_correction_kl: the KL term in the loss times the importance weight (the unbiased reverse-KL gradient). */
  readonly useBiasCorrectionKl: boolean;
  /** Weight of an entropy bonus in the loss (0: none). */
  readonly entropyCoef: number;
  /** null: CoMLRL's advantages (advantageMode, advantageNormalization); else TRL's mean baseline with this scaling. */
  readonly scaleRewards: ScaleRewards | null;
  /** Completions cut by maxNewTokens (no EOS) get no loss. */
  readonly maskTruncatedCompletions: boolean;
  /** Groups whose return standard deviation is at most this are skipped (not scored); null: none. */
  readonly zeroVarianceFilter: number | null;
  /** Over which completions the baseline is taken: the joint action's group, per agent, or per agent and turn. */
  readonly advantageGrouping: AdvantageGrouping;
}


const LOSS_TYPES = ["comlrl", "grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo"] as const;

/** A field that takes one value or a list of them (one per agent; the length is checked with the agent count). */
function perAgent<T>(inner: FieldSpec<T>): FieldSpec<PerAgent<T>> {
  return field((raw) => {
    if (!Array.isArray(raw)) return inner.parse(raw);
    if (raw.length === 0) reject("must be a value or a non-empty list with one value per agent");
    return Object.freeze(
      raw.map((value, i) => {
        try {
          return inner.parse(value);
        } catch (error) {
          if (error instanceof Error) reject(`[${i}] ${error.message}`);
          throw error;
        }
      }),
    );
  }, inner.default, inner.accepts === undefined ? undefined : `${inner.accepts}, or a list of them (one per agent)`);
}

export const OBJECTIVE_FIELDS = {
  /** The policy loss: CoMLRL's on-policy sum ("comlrl"), or one of TRL's clipped-ratio losses (docs/objectives.md). */
  lossType: perAgent(oneOf(LOSS_TYPES, { default: "comlrl" })),
  /** Importance ratios per token, or one per sequence (GSPO). */
  importanceSamplingLevel: perAgent(oneOf(["token", "sequence"], { default: "token" })),
  /** Updates per rollout; > 1 takes ratios against the rollout's own log-probs. */
  numIterations: perAgent(int({ default: 1, min: 1 })),
  /** Lower clip ε of the ratio: clip(r, 1 − ε, 1 + εhigh). */
  epsilon: perAgent(float({ default: 0.2, min: 0 })),
  /** Upper clip ε (clip-higher); for cispo the cap on the truncated ratio. */
  epsilonHigh: perAgent(nullable(float({ min: 0 }))),
  /** Upper bound on the unclipped ratio (two-sided clipping); null: none. */
  delta: perAgent(nullable(float({ above: 1 }))),
  /** The reference-KL estimator per token. */
  klEstimator: perAgent(oneOf(["k1", "k2", "k3"], { default: "k3" })),
  /** Where the reference KL (referenceKlEnabled, referenceKlCoef) enters: shaped into the returns, or a loss term. */
  klIn: perAgent(oneOf(["reward", "loss"], { default: "reward" })),
  /** TRL's use_bias_correction_kl: the KL term in the loss times the importance weight (the unbiased reverse-KL gradient). */
  useBiasCorrectionKl: perAgent(bool({ default: true })),
  /** Weight of an entropy bonus in the loss (0: none). */
  entropyCoef: perAgent(float({ default: 0 })),
  /** null: CoMLRL's advantages (advantageMode, advantageNormalization); else TRL's mean baseline with this scaling. */
  scaleRewards: perAgent(nullable(oneOf(["group", "batch", "none"]))),
  /** Completions cut by maxNewTokens (no EOS) get no loss. */
  maskTruncatedCompletions: perAgent(bool({ default: false })),
  /** Groups whose return standard deviation is at most this are skipped (not scored); null: none. */
  zeroVarianceFilter: perAgent(nullable(float({ min: 0 }))),
  /** Over which completions the baseline is taken: the joint action's group, per agent, or per agent and turn. */
  advantageGrouping: perAgent(oneOf(["joint", "agent", "agent_turn"], { default: "joint" })),
};

/** The objective fields as given: one value or one per agent (epsilonHigh null: epsilon). */
export type ObjectiveConfig = { readonly [K in keyof ObjectiveValues]: ObjectiveValues[K] };
type ObjectiveValues = { -readonly [K in keyof typeof OBJECTIVE_FIELDS]: (typeof OBJECTIVE_FIELDS)[K] extends FieldSpec<infer T> ? T : never };

function valueFor<T>(value: PerAgent<T>, agent: number): T {
  return Array.isArray(value) ? (value as readonly T[])[agent] : (value as T);
}

/** Each agent's objective from the fields; errors name the field (and agent) at fault. */
export function agentObjectives(values: ObjectiveValues, numAgents: number, fail: (field: keyof ObjectiveValues, reason: string) => never): AgentObjective[] {
  for (const name of Object.keys(OBJECTIVE_FIELDS) as (keyof ObjectiveValues)[]) {
    const value = values[name];
    if (Array.isArray(value) && value.length !== numAgents) fail(name, `has ${value.length} values for ${numAgents} agents: give one value, or one per agent`);
  }
  return Array.from({ length: numAgents }, (_, agent) => {
    // A per-agent list names the agent at fault.
    const at = (name: keyof ObjectiveValues) => (Array.isArray(values[name]) ? `(agent ${agent}) ` : "");
    const epsilon = valueFor(values.epsilon, agent);
    const objective: AgentObjective = {
      lossType: valueFor(values.lossType, agent),
      importanceSamplingLevel: valueFor(values.importanceSamplingLevel, agent),
      numIterations: valueFor(values.numIterations, agent),
      epsilon,
      epsilonHigh: valueFor(values.epsilonHigh, agent) ?? epsilon,
      delta: valueFor(values.delta, agent),
      klEstimator: valueFor(values.klEstimator, agent),
      klIn: valueFor(values.klIn, agent),
      useBiasCorrectionKl: valueFor(values.useBiasCorrectionKl, agent),
      entropyCoef: valueFor(values.entropyCoef, agent),
      scaleRewards: valueFor(values.scaleRewards, agent),
      maskTruncatedCompletions: valueFor(values.maskTruncatedCompletions, agent),
      zeroVarianceFilter: valueFor(values.zeroVarianceFilter, agent),
      advantageGrouping: valueFor(values.advantageGrouping, agent),
    };
    const comlrl = objective.lossType === "comlrl";
    if (objective.lossType !== "cispo" && objective.epsilonHigh < objective.epsilon) {
      fail("epsilonHigh", `${at("epsilonHigh")}must be ≥ epsilon (${show(objective.epsilon)}), got ${show(objective.epsilonHigh)}`);
    }
    if (comlrl && objective.numIterations > 1) {
      fail("numIterations", `${at("numIterations")}must be 1 with lossType "comlrl": CoMLRL's loss has no ratio to the rollout's log-probs, so a second update would repeat the first; pick a clipped loss (e.g. "grpo")`);
    }
    if (comlrl && objective.klIn === "loss") {
      fail("klIn", `${at("klIn")}"loss" needs a clipped loss type; lossType "comlrl" takes the KL in the reward`);
    }
    if (comlrl && objective.entropyCoef !== 0) fail("entropyCoef", `${at("entropyCoef")}needs a clipped loss type; lossType "comlrl" has no entropy term`);
    if (objective.klIn === "reward" && objective.klEstimator !== "k3") {
      fail("klEstimator", `${at("klEstimator")}must be "k3" with klIn "reward": the reward is shaped with the k3 sums of the rollout; k1 and k2 enter the loss (klIn "loss")`);
    }
    return Object.freeze(objective);
  });
}

/** What a config with objective fields derives beside them. */
export interface DerivedObjectives {
  /** (ours) Each agent's objective, resolved from the objective fields (docs/objectives.md). */
  readonly objectives: readonly AgentObjective[];
}

/**
 * A built config can be built again (trainers and config files pass them back in): its derived `objectives` is
 * recomputed from the objective fields by `build`, and refused when it says something those fields do not.
 */
export function rebuildObjectives<C extends { readonly objectives: readonly AgentObjective[] }>(input: unknown, configName: string, source: string | undefined, build: (input: unknown) => C): C {
  if (typeof input !== "object" || input === null || !("objectives" in input)) return build(input);
  const { objectives: given, ...rest } = input as { objectives: unknown };
  const built = build(rest);
  if (JSON.stringify(given) !== JSON.stringify(built.objectives)) {
    const prefix = source === undefined ? "" : `${source}: `;
    throw new ConfigError(`${prefix}${configName}.objectives is derived from the objective fields (lossType, epsilon, ...): set those instead`, "objectives");
  }
  return built;
}

export type { ObjectiveValues };
