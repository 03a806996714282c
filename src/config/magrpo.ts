// MAGRPO-family configs (CoMLRL spec §2.1): MAGRPO, its REINFORCE / ReMax / RLOO baselines, and centralized MAGRPO.
// Defaults are CoMLRL's; fields marked "(ours)" are additions of this port.
import { bool, buildConfig, field, float, int, nullable, oneOf, reject, withDefaults, type ConfigInput, type ConfigOf, type ValuesOf } from "./fields.js";
import { GROUP_FIELDS, TRAINING_FIELDS } from "./groups.js";
import { agentObjectives, OBJECTIVE_FIELDS, rebuildObjectives, type DerivedObjectives } from "./objectives.js";

export type { DType, ParallelTraining } from "./groups.js";
/** How agents' completions form joint actions: same-index ("aligned", K) or every combination ("cross", K^N). */
export type JointMode = "aligned" | "cross";
/** The baseline subtracted from returns: group mean, none, group max, or leave-one-out. */
export type AdvantageMode = "mean" | "raw" | "max" | "rloo";
/**
 * Which tokens of a completion the policy gradient scores: "exact", its own tokens up to and including EOS;
 * "comlrl", the tokens CoMLRL 1.4.3's MAGRPO scores (row[:-1] of the group's pad-padded generate() rows, see
 * src/rollout/token-accounting.ts), to reproduce a CoMLRL run.
 */
export type TokenAccounting = "exact" | "comlrl";

/** Where a config's input came from, for error messages. */
export interface ConfigSource {
  /** Where the input came from (a config file path); errors start with it. */
  readonly source?: string;
}

/** How MAGRPO rolls out and buffers: its rollout group (MARLHF's RL phase shares some of it). */
export const ROLLOUT_FIELDS = {
  /** >1 needs an external transition. */
  numTurns: int({ default: 2, min: 1 }),
  // (ours) A discount outside [0, 1] is never meant.
  /** Kept for compatibility; newest MAGRPO returns are undiscounted and ignore it. */
  discount: float({ default: 1.0, min: 0, max: 1 }),
  /** "aligned": K joint actions from same-index completions; "cross": all K^N combinations. */
  jointMode: oneOf(["aligned", "cross"], { default: "aligned", aliases: { align: "aligned", crossed: "cross" } }),
  /** A node whose mean reward is above this gets no children; null never stops early. */
  earlyTerminationThreshold: nullable(float({ default: -0.2 })),
  /** Use external transitions' prompts verbatim instead of passing them through formatters. */
  externalPromptPassthrough: bool({ default: false }),
  /** Node samples an agent collects before it updates. */
  rolloutBufferSize: int({ default: 2, min: 1 }),
  /** Samples per optimizer step within an update; defaults to rolloutBufferSize. */
  trainBatchSize: nullable(int({ min: 1 })),
  /** z-score advantages after the baseline (which makes the four baselines equivalent, spec §3.3). */
  advantageNormalization: bool({ default: true }),
  // Upstream checks the mode only when the trainer starts; failing at config time names the field sooner.
  /** Baseline subtracted from each node's rewards: the group mean, none (raw), the group max, or leave-one-out (rloo). */
  advantageMode: oneOf<AdvantageMode>(["mean", "raw", "max", "rloo"], { default: "mean" }),
};

/** The fields the rollout's builder settles: trainBatchSize null takes rolloutBufferSize. */
type RolloutResolved = { readonly trainBatchSize: number };

/** How MAGRPO rolls out and buffers (MARLHF's config holds them too, for its RL phase, which reads them by name). */
export interface RolloutConfig extends ConfigOf<typeof ROLLOUT_FIELDS, RolloutResolved> {}

/** MAGRPO's fields (MARLHF's RL phase builds its MAGRPO config from the same names). */
export const MAGRPO_FIELDS = {
  ...GROUP_FIELDS,
  ...TRAINING_FIELDS,
  ...ROLLOUT_FIELDS,
  ...OBJECTIVE_FIELDS,
  /**
   * (ours) Which tokens the loss scores: "exact", each completion up to and including EOS; "comlrl", CoMLRL 1.4.3's
   * (the node's completions padded to the longest, each without its last position). Centralized MAGRPO scores alike in both.
   */
  tokenAccounting: oneOf<TokenAccounting>(["exact", "comlrl"], { default: "exact" }),
  /**
   * (ours) Take each agent's AdamW step inside its backward, each parameter as soon as its gradient is complete, so
   * that an agent's gradients never all exist at once (docs/memory.md). The same update, bit for bit; it applies where
   * a step is one backward with nothing between it and the step: maxGradNorm null, one process (no data parallelism)
   * and a model no other agent shares. Elsewhere the step follows the backward.
   */
  stepInBackward: bool({ default: true }),
};

/** MAGRPO's config (CoMLRL's MAGRPOConfig): sampling, placement, evaluation, reference KL, runtime, schedule, rollout and objective fields; docs/magrpo.md lists every default. */
export interface MAGRPOConfig extends ConfigOf<typeof MAGRPO_FIELDS, RolloutResolved>, DerivedObjectives {}

/** Aliases that document which algorithm a config is for; the fields are MAGRPO's. */
export type MAREINFORCEConfig = MAGRPOConfig;
/** MAReMax's config: MAGRPO's fields with advantageMode "max". */
export type MAReMaxConfig = MAGRPOConfig;
/** MARLOO's config: MAGRPO's fields with advantageMode "rloo". */
export type MARLOOConfig = MAGRPOConfig;

/** What magrpoConfig and its baselines accept: any subset of the fields, camelCase or snake_case (trainBatchSize null = rolloutBufferSize). */
export type MAGRPOConfigInput = ConfigInput<typeof MAGRPO_FIELDS>;

/** The rules that tie fields together, shared by every MAGRPO-family config. */
function resolve<V extends ValuesOf<typeof MAGRPO_FIELDS>>(values: V, fail: (field: keyof typeof MAGRPO_FIELDS & string, reason: string) => never) {
  if (values.parallelTraining === "mp" && values.agentDevices === null) {
    fail("agentDevices", 'must be set when parallelTraining is "mp" (one device per agent, or one for all)');
  }
  const objectives = agentObjectives(values, values.numAgents, fail);
  const other = objectives.find((o) => o.lossType !== "comlrl");
  if (values.tokenAccounting === "comlrl" && other) {
    fail("tokenAccounting", `"comlrl" reproduces CoMLRL's own objective only: lossType "${other.lossType}" needs tokenAccounting "exact"`);
  }
  // CoMLRL's rows drop each completion's last position, so none of them reads as cut by maxNewTokens.
  if (values.tokenAccounting === "comlrl" && objectives.some((o) => o.maskTruncatedCompletions)) {
    fail("tokenAccounting", `"comlrl" scores CoMLRL's rows, which maskTruncatedCompletions cannot tell truncated: it needs tokenAccounting "exact"`);
  }
  return { ...values, trainBatchSize: values.trainBatchSize ?? values.rolloutBufferSize, objectives };
}

/** Builds a MAGRPO-family config (a built one again too, see rebuildObjectives). */
function build<S extends typeof MAGRPO_FIELDS>(configName: string, fields: S, input: ConfigInput<S> | MAGRPOConfig | undefined, options: ConfigSource) {
  return rebuildObjectives(input, configName, options.source, (rest) => buildConfig(fields, rest as ConfigInput<S> | undefined, { configName, source: options.source, finish: resolve }));
}

/** Builds a validated MAGRPO config with CoMLRL's defaults; every invalid value is a ConfigError naming the field. */
export function magrpoConfig(input?: MAGRPOConfigInput | MAGRPOConfig, options: ConfigSource = {}): MAGRPOConfig {
  return build("MAGRPOConfig", MAGRPO_FIELDS, input, options);
}

/** MAREINFORCE's fields: MAGRPO's, advantageMode "raw" by default. */
export const MAREINFORCE_FIELDS = withDefaults(MAGRPO_FIELDS, { advantageMode: "raw" });
/** MAReMax's fields: MAGRPO's, advantageMode "max" by default. */
export const MAREMAX_FIELDS = withDefaults(MAGRPO_FIELDS, { advantageMode: "max" });
/** MARLOO's fields: MAGRPO's, advantageMode "rloo" by default. */
export const MARLOO_FIELDS = withDefaults(MAGRPO_FIELDS, { advantageMode: "rloo" });

/** MAGRPO without a baseline (advantageMode "raw"). */
export function mareinforceConfig(input?: MAGRPOConfigInput | MAGRPOConfig, options: ConfigSource = {}): MAREINFORCEConfig {
  return build("MAREINFORCEConfig", MAREINFORCE_FIELDS, input, options);
}

/** MAGRPO with the group maximum as baseline (advantageMode "max"). */
export function maremaxConfig(input?: MAGRPOConfigInput | MAGRPOConfig, options: ConfigSource = {}): MAReMaxConfig {
  return build("MAReMaxConfig", MAREMAX_FIELDS, input, options);
}

/** MAGRPO with leave-one-out baselines (advantageMode "rloo"). */
export function marlooConfig(input?: MAGRPOConfigInput | MAGRPOConfig, options: ConfigSource = {}): MARLOOConfig {
  return build("MARLOOConfig", MARLOO_FIELDS, input, options);
}

/** Centralized MAGRPO's fields: MAGRPO's, single-turn, and collaborationMode. */
export const CENTRALIZED_FIELDS = {
  ...MAGRPO_FIELDS,
  // There is no multi-turn centralized MAGRPO upstream: the joint policy answers once per item.
  /** Must be 1: the joint policy answers once per item. */
  numTurns: int({ default: 1, check: (n) => (n === 1 ? undefined : "must be 1: centralized MAGRPO supports only num_turns=1") }),
  /** One joint policy writes every role's part; upstream has the field with this as its only allowed value. */
  collaborationMode: field<"centralized">(
    (raw) => (raw === "centralized" ? raw : reject('must be "centralized": CentralizedMAGRPOConfig requires centralized collaboration')),
    "centralized",
    '"centralized"',
  ),
};

/** Centralized MAGRPO's config: MAGRPO's fields, single-turn, collaborationMode "centralized". */
export interface CentralizedMAGRPOConfig extends ConfigOf<typeof CENTRALIZED_FIELDS, RolloutResolved>, DerivedObjectives {}

/** What centralizedMagrpoConfig accepts: MAGRPOConfigInput and collaborationMode. */
export type CentralizedMAGRPOConfigInput = ConfigInput<typeof CENTRALIZED_FIELDS>;

/** One joint policy writing every role's part (spec §3.8); single-turn only. */
export function centralizedMagrpoConfig(input?: CentralizedMAGRPOConfigInput | CentralizedMAGRPOConfig, options: ConfigSource = {}): CentralizedMAGRPOConfig {
  return build("CentralizedMAGRPOConfig", CENTRALIZED_FIELDS, input, options);
}
