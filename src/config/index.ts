// The trainer configuration layer: configs with CoMLRL's defaults, device placement, and config files.
export { ConfigError } from "./fields.js";
export {
  canonicalDevice,
  rankDevice,
  resolveDevices,
  resolveSingleDevice,
  type CudaFacts,
  type DeviceSpec,
} from "./devices.js";
export { resolvePrecision, trainingBytes, type Precision, type ResolvedPrecision, type TrainingBytes } from "./precision.js";
export {
  centralizedMagrpoConfig,
  magrpoConfig,
  mareinforceConfig,
  maremaxConfig,
  marlooConfig,
  type AdvantageMode,
  type CentralizedMAGRPOConfig,
  type CentralizedMAGRPOConfigInput,
  type ConfigSource,
  type DType,
  type JointMode,
  type MAGRPOConfig,
  type MAGRPOConfigInput,
  type MAREINFORCEConfig,
  type MAReMaxConfig,
  type MARLOOConfig,
  type ParallelTraining,
  type TokenAccounting,
} from "./magrpo.js";
export {
  isMagrpoFamily,
  madpoConfig,
  marlhfConfig,
  rewardModelDeviceGiven,
  type CollaborationMode,
  type MADPOConfig,
  type MADPOConfigInput,
  type MARLHFConfig,
  type MARLHFConfigInput,
  type PairSelection,
  type RLAlgorithm,
} from "./preference.js";
export {
  type EvalConfig,
  type PlacementFields,
  type ReferenceKlConfig,
  type RuntimeConfig,
  type PromptOverflow,
  type SamplingConfig,
} from "./groups.js";
export {
  iacConfig,
  maacConfig,
  type ActorCriticConfig,
  type CriticType,
  type IACConfig,
  type IACConfigInput,
  type MAACConfig,
  type MAACConfigInput,
} from "./actor-critic.js";
export { loadConfigFile, parseConfigText, type LoadConfigOptions, type RawConfig } from "./file.js";
export {
  madpoIterConfig,
  marlhfIterConfig,
  type ComparatorApiFormat,
  type ComparatorGenerationMode,
  type ComparatorPolicy,
  type IterativeFields,
  type IterativeInput,
  type IterativePairSelection,
  type MADPOIterConfig,
  type MADPOIterConfigInput,
  type MARLHFIterConfig,
  type MARLHFIterConfigInput,
  type PreferenceScoringReward,
  type ReplayMode,
} from "./iterative.js";
