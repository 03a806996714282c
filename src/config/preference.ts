// Preference-learning configs (CoMLRL spec §2.4–§2.5): MADPO (reference-free joint DPO on pairs collected once before
// training) and MARLHF (a Bradley–Terry joint reward model learned from the same pairs, then online RL against it).
// Defaults are CoMLRL's; fields marked "(ours)" are additions of this port.
import { deviceSpec, type DeviceSpec } from "./devices.js";
import { bool, buildConfig, field, float, int, nullable, oneOf, reject, text, withDefault, type ValuesOf } from "./fields.js";
import { GROUP_FIELDS, TRAINING_FIELDS, type GroupConfig, type TrainingConfig } from "./groups.js";
import type { AdvantageMode, ConfigSource, RolloutConfig, TokenAccounting } from "./magrpo.js";
import { agentObjectives, OBJECTIVE_FIELDS, type ObjectiveConfig, type PerAgent } from "./objectives.js";

const { numIterations: _outerLoopName, ...OBJECTIVE_FIELDS_BUT_ITERATIONS } = OBJECTIVE_FIELDS;

/** "decentralized": one actor per role; "centralized": one actor writes every role's part. */
export type CollaborationMode = "decentralized" | "centralized";
/** Order in which an item's preference pairs are kept: largest reward gap first, all, or random. */
export type PairSelection = "reward_gap" | "all" | "random";
/**
 * The algorithm of MARLHF's RL phase: the section of a registered trainer with an RL back-end (rlAlgorithms() lists
 * them; the trainer checks the name when it is created).
 */
export type RLAlgorithm = string;

/**
 * MADPO's fields. numTrainEpochs counts passes over the pairs (MARLHF: over the train items in its RL phase). The
 * rollout fields (RolloutConfig) are there for MARLHF's RL phase: of them MADPO reads only trainBatchSize (pairs per
 * DPO step), and it checks numTurns 1 and jointMode "aligned" (pairs are single-turn aligned joint responses).
 * Candidates are sampled with the group's settings; numGenerations is MARLHF's RL phase's own.
 */
export interface MADPOConfig extends Omit<GroupConfig, "numGenerations">, TrainingConfig, RolloutConfig {
  /** "centralized": one actor writes every role's part through an adapter (spec §6.6). */
  readonly collaborationMode: CollaborationMode;
  /** Aligned joint candidates sampled per train item before training; at least 2. */
  readonly preferenceNumCandidates: number;
  /** Pairs kept per item after selection; null keeps all (required with pairSelection "all"). */
  readonly preferencePairsPerSample: number | null;
  /** Order in which an item's pairs are kept: largest reward gap first, a random order, or index order. */
  readonly pairSelection: PairSelection;
  /** β of −log σ(β Δ). */
  readonly dpoBeta: number;
  /** Whether DPO steps advance the env-step counter, by environmentStepsPerPair per pair. */
  readonly useEnvironmentStep: boolean;
  /** Env steps one pair counts for in a DPO step (with useEnvironmentStep). */
  readonly environmentStepsPerPair: number;
}

export interface MARLHFConfig extends MADPOConfig, Omit<ObjectiveConfig, "numIterations"> {
  /** (ours) The RL phase's MAGRPO-family token accounting (MAGRPOConfig.tokenAccounting); "exact" for maac / iac. */
  readonly tokenAccounting: TokenAccounting;
  /** (ours) The RL phase's MAGRPO-family step inside the backward (MAGRPOConfig.stepInBackward); no effect for maac / iac. */
  readonly stepInBackward: boolean;
  /** The RL phase's algorithm; the MAGRPO family fixes advantageMode (mean / raw / max / rloo). */
  readonly rlAlgorithm: RLAlgorithm;
  /** Completions per agent per node in the RL phase: ≥ 2 for the MAGRPO family, ≥ 1 for maac / iac. */
  readonly numGenerations: number;
  /** Backbone of the joint reward model (hub id or local dir); null = the first actor's model id. */
  readonly rewardModelName: string | null;
  /**
   * Where the reward model lives; null = the trainer's (first actor's) device. The default "cuda:0" falls back to the
   * trainer's device on a machine without CUDA (logged once); an explicitly given CUDA device without CUDA is an error.
   */
  readonly rewardModelDevice: string | null;
  /** AdamW learning rate of the reward model (backbone and head). */
  readonly rewardLearningRate: number;
  /** Bradley–Terry passes over the training pairs. */
  readonly rewardNumTrainEpochs: number;
  /** Pairs per Bradley–Terry step. */
  readonly rewardTrainBatchSize: number;
  /** Token limit of a joint text; longer ones keep their last rewardMaxLength tokens (null: no limit). */
  readonly rewardMaxLength: number | null;
  /** Train only the score head. */
  readonly rewardFreezeBackbone: boolean;
  /**
   * (ours) Share of the train items whose pairs are held out of reward-model training to measure its pairwise
   * accuracy (the last ⌊share × items with pairs⌋ items). Default 0: CoMLRL trains the reward model on every pair.
   */
  readonly rewardHeldOutFraction: number;
  /** Actor-critic back-ends (maac / iac). */
  readonly criticModelName: string | null;
  /** null = agentLearningRate. */
  readonly criticLearningRate: number | null;
  /** Devices of the RL phase's critics; null = their agents' devices. */
  readonly criticDevices: DeviceSpec | null;
  /** iac back-end: one critic LM per agent (true) or a value head on each actor (false). */
  readonly useSeparateCritic: boolean;
  /** "v": critics read the prompt; "q": prompt and completion. */
  readonly criticType: "v" | "q";
  /** Weight of the value loss (IACConfig.valueLossCoef). */
  readonly valueLossCoef: number;
  /**
   * (ours) Updates per rollout in a MAGRPO-family RL phase (TRL's num_iterations, named apart from MARLHFIter's
   * numIterations rounds); > 1 takes ratios against the rollout's log-probs and needs a clipped lossType.
   */
  readonly rlNumIterations: PerAgent<number>;
  /** PPO-style value clipping of shared heads (IACConfig.valueClipRange). */
  readonly valueClipRange: number | null;
  /** Hidden size of separate critics' heads; null: Linear(H, 1). */
  readonly criticValueHeadHiddenDim: number | null;
  /** Hidden size of heads on the actors; null: Linear(H, 1). */
  readonly valueHeadHiddenDim: number | null;
}

/** What callers pass: any subset of the fields (trainBatchSize null = rolloutBufferSize). Files may use snake_case. */
export type MADPOConfigInput = Partial<Omit<MADPOConfig, "trainBatchSize">> & {
  /** Pairs per DPO step; null = rolloutBufferSize. */
  readonly trainBatchSize?: number | null;
};
/** What marlhfConfig accepts: any subset of MARLHFConfig (rlAlgorithm decides advantageMode). */
export type MARLHFConfigInput = Partial<Omit<MARLHFConfig, "trainBatchSize" | "advantageMode" | "rlAlgorithm">> & {
  /** Samples per optimizer step in the RL phase; null = rolloutBufferSize. */
  readonly trainBatchSize?: number | null;
  /** Derived from rlAlgorithm; when given it must agree. */
  readonly advantageMode?: AdvantageMode | null;
  /** "mareforce" is read as "mareinforce". */
  readonly rlAlgorithm?: RLAlgorithm | "mareforce";
};

const { numGenerations: _generationsAreMarlhfs, ...CANDIDATE_GROUP_FIELDS } = GROUP_FIELDS;

export const MADPO_FIELDS = {
  ...CANDIDATE_GROUP_FIELDS,
  ...TRAINING_FIELDS,
  collaborationMode: oneOf(["decentralized", "centralized"], { default: "decentralized" }),
  numTurns: int({ default: 1, check: (n) => (n === 1 ? undefined : "must be 1: preference pairs are single-turn joint responses") }),
  discount: float({ default: 1.0, min: 0, max: 1 }),
  jointMode: oneOf(["aligned", "cross"], {
    default: "aligned",
    aliases: { align: "aligned", crossed: "cross" },
    check: (m) => (m === "aligned" ? undefined : 'must be "aligned": preference candidates are aligned joint responses'),
  }),
  earlyTerminationThreshold: nullable(float()),
  externalPromptPassthrough: bool({ default: false }),
  rolloutBufferSize: int({ default: 2, min: 1 }),
  trainBatchSize: nullable(int({ min: 1 })),
  advantageNormalization: bool({ default: true }),
  advantageMode: oneOf(["mean", "raw", "max", "rloo"], { default: "mean" }),
  preferenceNumCandidates: int({ default: 80, min: 2 }),
  preferencePairsPerSample: nullable(int({ default: 16, min: 1 })),
  pairSelection: oneOf(["reward_gap", "all", "random"], { default: "reward_gap" }),
  dpoBeta: float({ default: 0.1, above: 0 }),
  useEnvironmentStep: bool({ default: true }),
  environmentStepsPerPair: int({ default: 2, min: 1 }),
};

/** The rules that tie MADPO's fields together (MARLHF's too). */
export function resolveMadpo<V extends ValuesOf<typeof MADPO_FIELDS>>(values: V, fail: (field: "agentDevices" | "preferencePairsPerSample", reason: string) => never) {
  if (values.parallelTraining === "mp" && values.agentDevices === null) {
    fail("agentDevices", 'must be set when parallelTraining is "mp" (one device per agent, or one for all)');
  }
  if (values.pairSelection === "all" && values.preferencePairsPerSample !== null) {
    fail("preferencePairsPerSample", 'must be null when pairSelection is "all" (every pair is kept)');
  }
  return { ...values, trainBatchSize: values.trainBatchSize ?? values.rolloutBufferSize };
}

/** MADPO (spec §2.4): reference-free joint DPO over pairs collected once; numTurns 1, aligned candidates. */
export function madpoConfig(input?: MADPOConfigInput, options: ConfigSource = {}): MADPOConfig {
  return buildConfig(MADPO_FIELDS, input, { configName: "MADPOConfig", source: options.source, finish: resolveMadpo });
}

const MAGRPO_FAMILY_MODES: Readonly<Record<string, AdvantageMode>> = { magrpo: "mean", mareinforce: "raw", maremax: "max", marloo: "rloo" };

/** Whether the RL phase is the MAGRPO family (as opposed to an actor-critic back-end). */
export function isMagrpoFamily(algorithm: RLAlgorithm): algorithm is "magrpo" | "mareinforce" | "maremax" | "marloo" {
  return algorithm in MAGRPO_FAMILY_MODES;
}

/** A single device: "cpu", "cuda" or "cuda:N" (checked against the machine when the reward model is placed). */
function singleDevice() {
  const spec = deviceSpec();
  return field<string>((raw) => {
    if (typeof raw !== "string" || raw.trim().toLowerCase() === "auto") reject('must be one device: "cpu", "cuda" or "cuda:N"');
    return spec.parse(raw) as string;
  }, undefined, '"cpu" | "cuda" | "cuda:N"');
}

export const MARLHF_FIELDS = {
  ...MADPO_FIELDS,
  rlAlgorithm: field<RLAlgorithm>(
    (raw) => {
      if (typeof raw !== "string" || raw.trim() === "") reject('must name a trainer with an RL back-end, e.g. "magrpo"');
      const name = raw.trim().toLowerCase();
      return name === "mareforce" ? "mareinforce" : name;
    },
    "magrpo",
    'the section of a trainer with an RL back-end (rlAlgorithms(); "mareforce" is read as "mareinforce")',
  ),
  // ≥ 2 for the MAGRPO family is checked together with rlAlgorithm.
  numGenerations: int({ default: 4, min: 1 }),
  advantageMode: withDefault(nullable(MADPO_FIELDS.advantageMode), null),
  rewardModelName: nullable(text()),
  rewardModelDevice: withDefault(nullable(singleDevice()), "cuda:0"),
  rewardLearningRate: float({ default: 1e-5, above: 0 }),
  rewardNumTrainEpochs: int({ default: 1, min: 1 }),
  rewardTrainBatchSize: int({ default: 1, min: 1 }),
  rewardMaxLength: nullable(int({ min: 1 })),
  rewardFreezeBackbone: bool({ default: false }),
  rewardHeldOutFraction: float({ default: 0, min: 0, check: (f) => (f < 1 ? undefined : "must be < 1 (some pairs must train the reward model)") }),
  criticModelName: nullable(text()),
  criticLearningRate: nullable(float({ above: 0 })),
  criticDevices: deviceSpec(),
  useSeparateCritic: bool({ default: true }),
  criticType: oneOf(["v", "q"], { default: "v" }),
  valueLossCoef: float({ default: 0.6, above: 0 }),
  valueClipRange: nullable(float({ default: 0.2, above: 0 })),
  criticValueHeadHiddenDim: nullable(int({ min: 1 })),
  valueHeadHiddenDim: nullable(int({ min: 1 })),
  // (ours) The MAGRPO family's objective, read by the RL phase when rlAlgorithm is one of it (docs/objectives.md);
  // its updates per rollout are rlNumIterations, since CoMLRL's iterative trainers name their outer loop numIterations.
  ...OBJECTIVE_FIELDS_BUT_ITERATIONS,
  rlNumIterations: OBJECTIVE_FIELDS.numIterations,
  // (ours) The MAGRPO family's token accounting in the RL phase (docs/magrpo.md).
  tokenAccounting: oneOf(["exact", "comlrl"], { default: "exact" }),
  stepInBackward: bool({ default: true }),
};

/**
 * Marks a built MARLHFConfig whose rewardModelDevice was given by the user rather than defaulted; the trainer reads
 * it to tell the default "cuda:0" (which falls back on a machine without CUDA) from an explicit one (which does not).
 * Not enumerable, so checkpoints and W&B never see it; a config rebuilt from a built one keeps it.
 */
const REWARD_DEVICE_GIVEN = Symbol("rewardModelDeviceGiven");

/** Whether config.rewardModelDevice was given explicitly (see REWARD_DEVICE_GIVEN). */
export function rewardModelDeviceGiven(config: Pick<MARLHFConfig, "rewardModelDevice">): boolean {
  return (Reflect.get(config, REWARD_DEVICE_GIVEN) as boolean | undefined) ?? true;
}

/** MARLHF (spec §2.5): MADPO's pair collection, a joint Bradley–Terry reward model, then RL against its scores. */
export function marlhfConfig(input?: MARLHFConfigInput, options: ConfigSource = {}): MARLHFConfig {
  const given = rewardModelDeviceGivenIn(input);
  return buildConfig(MARLHF_FIELDS, input, {
    configName: "MARLHFConfig",
    source: options.source,
    finish: (values, fail) => resolveMarlhf(values, fail, given),
  });
}

/** Whether a config input sets rewardModelDevice (or is a built config that recorded so). */
export function rewardModelDeviceGivenIn(input: unknown): boolean {
  const raw = (input ?? {}) as Record<string | symbol, unknown>;
  return typeof raw[REWARD_DEVICE_GIVEN] === "boolean" ? (raw[REWARD_DEVICE_GIVEN] as boolean) : raw.rewardModelDevice !== undefined || raw.reward_model_device !== undefined;
}

/** The rules that tie MARLHF's fields together (MARLHFIter's too); `given`: whether rewardModelDevice was set. */
export function resolveMarlhf<V extends ValuesOf<typeof MARLHF_FIELDS>>(
  values: V,
  fail: (field: keyof typeof MARLHF_FIELDS & string, reason: string) => never,
  given: boolean,
) {
  const algorithm = values.rlAlgorithm;
  if (isMagrpoFamily(algorithm) && values.numGenerations < 2) fail("numGenerations", `must be ≥ 2 for rlAlgorithm "${algorithm}" (the group baseline)`);
  // The MAGRPO family's objective is checked here, so that its errors name MARLHF's fields before any model loads
  // (a back-end whose learner has no objective fields refuses them when the trainer checks its RL phase).
  if (isMagrpoFamily(algorithm)) {
    // A centralized RL phase trains one actor for every role.
    const actors = values.collaborationMode === "centralized" ? 1 : values.numAgents;
    agentObjectives({ ...values, numIterations: values.rlNumIterations }, actors, (field, reason) => fail(field === "numIterations" ? "rlNumIterations" : field, reason));
  }
  const expected = MAGRPO_FAMILY_MODES[algorithm];
  if (expected !== undefined && values.advantageMode !== null && values.advantageMode !== expected) {
    fail("advantageMode", `must be "${expected}" for rlAlgorithm "${algorithm}" (or left unset)`);
  }
  const resolved = { ...resolveMadpo({ ...values, advantageMode: values.advantageMode ?? expected ?? "mean" }, fail), rlAlgorithm: algorithm };
  return Object.defineProperty(resolved, REWARD_DEVICE_GIVEN, { value: given, enumerable: false });
}
