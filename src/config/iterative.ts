// Iterative preference configs (CoMLRL spec §2.6): MADPOIter and MARLHFIter refresh their preference pairs every
// iteration by comparing the current policy's candidates with a comparator's (itself on another sampling stream, a
// frozen copy, other models, an earlier checkpoint, or a remote API), keep the pairs in replay shards and choose each
// iteration's training pairs from them. Defaults are CoMLRL's; fields marked "(ours)" are additions of this port.
import { deviceSpec } from "./devices.js";
import { bool, buildConfig, field, float, int, nullable, oneOf, reject, text, withDefaults, type ConfigInput, type ConfigOf, type ValuesOf } from "./fields.js";
import type { ConfigSource } from "./magrpo.js";
import {
  MADPO_FIELDS,
  MARLHF_FIELDS,
  resolveMadpo,
  resolveMarlhf,
  rewardModelDeviceGivenIn,
  type MARLHFResolved,
  type PreferenceResolved,
} from "./preference.js";

/** Order in which an item's pairs are kept in the iterative trainers. */
export type IterativePairSelection = "comparator_reward" | "reward_gap" | "all" | "random";
/** Which iterations' replay shards the training pairs are drawn from. */
export type ReplayMode = "current" | "nearest_k" | "all_history" | "lambda_decay";
/** What the current policy's candidates are compared against (docs/iterative.md). */
export type ComparatorPolicy = "current" | "current_copy" | "model" | "history" | "api";
/** Whether the comparator answers per agent or as one joint answer split into roles. */
export type ComparatorGenerationMode = "decentralized" | "centralized";
/** The request and response layout of an API comparator's endpoint. */
export type ComparatorApiFormat = "generic" | "openai" | "anthropic" | "openai_responses";
/** What labels the pairs of an iteration: the task reward or the previous reward model. */
export type PreferenceScoringReward = "task" | "reward_model";

const stringRecord = field<Readonly<Record<string, string>> | null>((raw) => {
  if (raw === null) return null;
  if (typeof raw !== "object" || Array.isArray(raw) || Object.values(raw).some((v) => typeof v !== "string")) reject("must be an object of string header values");
  return Object.freeze({ ...(raw as Record<string, string>) });
}, null, "object of strings | null");

const jsonObject = field<Readonly<Record<string, unknown>> | null>((raw) => {
  if (raw === null) return null;
  if (typeof raw !== "object" || Array.isArray(raw)) reject("must be an object merged into the request body");
  return Object.freeze({ ...(raw as Record<string, unknown>) });
}, null, "object | null");

const modelIds = field<readonly string[] | null>((raw) => {
  if (raw === null) return null;
  if (!Array.isArray(raw) || raw.length === 0 || raw.some((id) => typeof id !== "string" || id.length === 0)) {
    reject("must be a non-empty list of model ids or directories (pass loaded models through the trainer's comparatorAgents option)");
  }
  return Object.freeze([...(raw as string[])]);
}, null, "list of model ids or directories | null");

/** The fields MADPOIter and MARLHFIter add to their parents (pairSelection replaces theirs). */
export const ITERATIVE_FIELDS = {
  /** Collect → select → train rounds. */
  numIterations: int({ default: 6, min: 1 }),
  /** Order in which an item's pairs are kept: by the comparator's reward, the largest gap, random, or all. */
  pairSelection: oneOf<IterativePairSelection>(["comparator_reward", "reward_gap", "all", "random"], { default: "comparator_reward" }),
  /** Which shards the training pairs come from: this iteration's, the last k, all, or all weighted by (1−λ)λ^age. */
  preferenceReplayMode: oneOf(["current", "nearest_k", "all_history", "lambda_decay"], {
    default: "current",
    aliases: { latest: "current", new: "current", recent_k: "nearest_k", last_k: "nearest_k", k: "nearest_k", lambda: "lambda_decay", td_lambda: "lambda_decay", "td-lambda": "lambda_decay" },
  }),
  /** nearest_k: how many of the latest shards to draw from. */
  preferenceReplayK: nullable(int({ min: 1 })),
  /** lambda_decay: λ of the shard weights (1−λ)λ^age. */
  preferenceReplayLambda: nullable(float({ min: 0, max: 1 })),
  /** Training pairs drawn per iteration; null = this iteration's pair count (else the latest non-empty shard's). */
  preferenceReplaySampleSize: nullable(int({ min: 1 })),
  /** Where replay shards go; null resolves by COMLRL-SPEC §7.3 (the trainer's outputDir in place of the cwd). */
  preferenceReplayDir: nullable(text()),
  /** Writes reward_distributions/iteration_KKKK.json and .svg; needs rewardFunc.rewardRange. */
  logRewardDistribution: bool({ default: false }),
  /** Writes policy_checkpoints/{initial,iteration_KKKK}/agent_i (also done, under the default dir, for history). */
  policyCheckpointDir: nullable(text()),
  /** What the current policy's candidates are compared against (see the iterative trainers' page). */
  comparatorPolicy: oneOf(["current", "current_copy", "model", "history", "api"], {
    default: "current",
    aliases: {
      self: "current",
      online: "current",
      copy: "current_copy",
      online_copy: "current_copy",
      "current-offload": "current_copy",
      current_offload: "current_copy",
      external: "model",
      comparator: "model",
      reference: "model",
      ref: "model",
      checkpoint: "history",
      previous: "history",
      previous_iteration: "history",
      http: "api",
      endpoint: "api",
    },
  }),
  /** "centralized": one agent answers the adapter's joint prompt for every role and the answer is split. */
  comparatorGenerationMode: oneOf(["decentralized", "centralized"], {
    default: "decentralized",
    aliases: { decentralised: "decentralized", multi_agent: "decentralized", "multi-agent": "decentralized", centralised: "centralized", single_agent: "centralized", "single-agent": "centralized" },
  }),
  /** comparatorGenerationMode "centralized": the agent that answers the joint prompt. */
  comparatorCentralizedAgentIndex: int({ default: 0, min: 0 }),
  /** comparatorPolicy "model": one id for every agent, or one id per agent. */
  comparatorModelName: nullable(text()),
  /** comparatorPolicy "model": one model id or directory per agent (instead of comparatorModelName). */
  comparatorAgents: modelIds,
  /** Devices of comparator models (current_copy, model, history); null = the agents' devices. */
  comparatorDevices: deviceSpec(),
  /** Comparator candidates per item; null = preferenceNumCandidates. */
  comparatorNumCandidates: nullable(int({ min: 1 })),
  /** comparatorPolicy "history": compare with the checkpoint of iteration k − historyK (default 1). */
  comparatorHistoryK: nullable(int({ min: 1 })),
  /** comparatorPolicy "api": the endpoint (http:// or https://). */
  comparatorApiUrl: nullable(text({ check: (url) => (/^https?:\/\//.test(url) ? undefined : "must be an http:// or https:// URL") })),
  /** Request and response layout of the endpoint. */
  comparatorApiFormat: oneOf(["generic", "openai", "anthropic", "openai_responses"], {
    default: "generic",
    aliases: { openai_chat: "openai", chat: "openai", anthropic_messages: "anthropic", messages: "anthropic", responses: "openai_responses", codex: "openai_responses" },
  }),
  /** Model name sent in the request body. */
  comparatorApiModel: nullable(text()),
  /** openai: candidates per request (n); null = all at once (1 for DeepSeek). */
  comparatorApiMaxNPerRequest: nullable(int({ min: 1 })),
  /** Seconds per request. */
  comparatorApiTimeout: float({ default: 120.0, above: 0 }),
  /** Extra request headers. */
  comparatorApiHeaders: stringRecord,
  /** The API key itself (masked in errors, checkpoints and W&B); prefer comparatorApiKeyEnv. */
  comparatorApiKey: nullable(text()),
  /** Name of the environment variable that holds the key. */
  comparatorApiKeyEnv: nullable(text()),
  /** Header that carries the key. */
  comparatorApiKeyHeader: text({ default: "Authorization" }),
  /** Written before the key in its header ("" for none). */
  comparatorApiKeyPrefix: text({ default: "Bearer" }),
  /** generic: dotted path of the completions in the response. */
  comparatorApiResponseField: text({ default: "completions", check: (f) => (f.length > 0 ? undefined : "must be a dotted field path") }),
  /** Merged into every request body. */
  comparatorApiExtraBody: jsonObject,
  /** (ours) Retries of a failed request (timeouts, 429, 5xx), with exponential backoff from 0.25 s. */
  comparatorApiMaxRetries: int({ default: 2, min: 0 }),
  /** (ours) Requests in flight at once. */
  comparatorApiConcurrency: int({ default: 4, min: 1 }),
};

/** The fields MADPOIter and MARLHFIter add to their parents. */
export interface IterativeFields extends ConfigOf<typeof ITERATIVE_FIELDS> {}

const API_FIELDS = [
  "comparatorApiUrl",
  "comparatorApiModel",
  "comparatorApiMaxNPerRequest",
  "comparatorApiHeaders",
  "comparatorApiKey",
  "comparatorApiKeyEnv",
  "comparatorApiExtraBody",
] as const;

type IterativeValues = ValuesOf<typeof ITERATIVE_FIELDS> & { numAgents: number; collaborationMode: string; preferenceNumCandidates: number };
type IterativeFail = (field: keyof typeof ITERATIVE_FIELDS & string, reason: string) => never;

/** The rules of §2.6 that tie the iterative fields together; fills the defaults that depend on other fields. */
function resolveIterative<V extends IterativeValues>(values: V, fail: IterativeFail): V {
  const mode = values.preferenceReplayMode;
  if (mode === "nearest_k" && values.preferenceReplayK === null) fail("preferenceReplayK", 'is required (≥ 1) when preferenceReplayMode is "nearest_k"');
  if (mode === "current" && values.preferenceReplayK !== null && values.preferenceReplayK !== 1) fail("preferenceReplayK", 'must be null or 1 when preferenceReplayMode is "current"');
  if ((mode === "all_history" || mode === "lambda_decay") && values.preferenceReplayK !== null) fail("preferenceReplayK", `is only used with preferenceReplayMode "nearest_k" (got mode "${mode}")`);
  if (mode === "lambda_decay" && values.preferenceReplayLambda === null) fail("preferenceReplayLambda", 'is required (in [0, 1]) when preferenceReplayMode is "lambda_decay"');
  if (mode !== "lambda_decay" && values.preferenceReplayLambda !== null) fail("preferenceReplayLambda", `is only used with preferenceReplayMode "lambda_decay" (got mode "${mode}")`);
  if (mode === "current" && values.preferenceReplaySampleSize !== null) fail("preferenceReplaySampleSize", 'must be null when preferenceReplayMode is "current" (this iteration\'s pairs are used as they are)');

  const policy = values.comparatorPolicy;
  if (policy === "model") {
    if (values.comparatorModelName === null && values.comparatorAgents === null) fail("comparatorModelName", 'or comparatorAgents is required when comparatorPolicy is "model"');
    if (values.comparatorModelName !== null && values.comparatorAgents !== null) fail("comparatorAgents", "and comparatorModelName are both set; give one");
  } else {
    if (values.comparatorModelName !== null) fail("comparatorModelName", `is only used with comparatorPolicy "model" (got "${policy}")`);
    if (values.comparatorAgents !== null) fail("comparatorAgents", `is only used with comparatorPolicy "model" (got "${policy}")`);
  }
  if (policy !== "history" && values.comparatorHistoryK !== null) fail("comparatorHistoryK", `is only used with comparatorPolicy "history" (got "${policy}")`);
  if ((policy === "current" || policy === "api") && values.comparatorDevices !== null) fail("comparatorDevices", `places comparator models, which comparatorPolicy "${policy}" has none of`);
  if (policy === "api") {
    if (values.comparatorApiUrl === null) fail("comparatorApiUrl", 'is required when comparatorPolicy is "api"');
    if (values.comparatorApiKey !== null && values.comparatorApiKeyEnv !== null) fail("comparatorApiKeyEnv", "and comparatorApiKey are both set; give one");
  } else {
    for (const name of API_FIELDS) if (values[name] !== null) fail(name, `is only used with comparatorPolicy "api" (got "${policy}")`);
  }
  const agents = values.comparatorAgents;
  if (agents !== null && agents.length !== 1 && agents.length !== values.numAgents) fail("comparatorAgents", `must list 1 or numAgents (${values.numAgents}) models, got ${agents.length}`);

  const centralizedCollaboration = values.collaborationMode === "centralized";
  if (centralizedCollaboration && values.comparatorCentralizedAgentIndex !== 0) fail("comparatorCentralizedAgentIndex", 'must be 0 when collaborationMode is "centralized" (only actor index 0 exists)');
  if (values.comparatorCentralizedAgentIndex >= values.numAgents) fail("comparatorCentralizedAgentIndex", `must be < numAgents (${values.numAgents})`);
  return {
    ...values,
    comparatorGenerationMode: centralizedCollaboration ? "centralized" : values.comparatorGenerationMode,
    comparatorNumCandidates: values.comparatorNumCandidates ?? values.preferenceNumCandidates,
    comparatorHistoryK: policy === "history" ? (values.comparatorHistoryK ?? 1) : null,
  };
}

/** The defaults MADPOIter and MARLHFIter change in their parents' fields (CoMLRL spec §2.6). */
const ITERATIVE_DEFAULTS = { numTrainEpochs: 1, preferenceNumCandidates: 20, preferencePairsPerSample: 4 };

/** MADPOIter's fields: MADPO's with the iterative defaults, and the iterative fields. */
export const MADPO_ITER_FIELDS = { ...withDefaults(MADPO_FIELDS, ITERATIVE_DEFAULTS), ...ITERATIVE_FIELDS };

/** MADPOIter's config: MADPO's fields (its pairSelection the iterative one) and the iterative fields. */
export interface MADPOIterConfig extends ConfigOf<typeof MADPO_ITER_FIELDS, PreferenceResolved> {}

/** What madpoIterConfig accepts: any subset of the fields, camelCase or snake_case. */
export type MADPOIterConfigInput = ConfigInput<typeof MADPO_ITER_FIELDS>;

/** MADPOIter (spec §2.6, §6.5): DPO on pairs refreshed every iteration against a comparator. */
export function madpoIterConfig(input?: MADPOIterConfigInput | MADPOIterConfig, options: ConfigSource = {}): MADPOIterConfig {
  return buildConfig(MADPO_ITER_FIELDS, input, {
    configName: "MADPOIterConfig",
    source: options.source,
    finish: (values, fail) => resolveMadpo(resolveIterative(values, fail), fail),
  });
}

/** MARLHFIter's fields: MARLHF's with the iterative defaults, the iterative fields, and what labels the pairs. */
export const MARLHF_ITER_FIELDS = {
  ...withDefaults(MARLHF_FIELDS, { ...ITERATIVE_DEFAULTS, numTrainEpochs: 2, rewardNumTrainEpochs: 2 }),
  ...ITERATIVE_FIELDS,
  /** What labels the pairs: the task reward, or the previous iteration's reward model (the task reward at iteration 0). */
  preferenceScoringReward: oneOf(["task", "reward_model"], {
    default: "task",
    aliases: { oracle: "task", environment: "task", env: "task", model: "reward_model", learned: "reward_model" },
  }),
};

/** MARLHFIter's config: MARLHF's fields (its pairSelection the iterative one), the iterative fields and preferenceScoringReward. */
export interface MARLHFIterConfig extends ConfigOf<typeof MARLHF_ITER_FIELDS, MARLHFResolved> {}

/** What marlhfIterConfig accepts: any subset of the fields, camelCase or snake_case. */
export type MARLHFIterConfigInput = ConfigInput<typeof MARLHF_ITER_FIELDS>;

/** MARLHFIter (spec §2.6, §6.5): every iteration a fresh reward model on the replay pairs, then an RL phase against it. */
export function marlhfIterConfig(input?: MARLHFIterConfigInput | MARLHFIterConfig, options: ConfigSource = {}): MARLHFIterConfig {
  const given = rewardModelDeviceGivenIn(input);
  return buildConfig(MARLHF_ITER_FIELDS, input, {
    configName: "MARLHFIterConfig",
    source: options.source,
    // MARLHF's rules last: they mark whether rewardModelDevice was given, which a later spread would drop.
    finish: (values, fail) => resolveMarlhf(resolveIterative(values, fail), fail, given),
  });
}
