// The trainer configuration layer: configs with CoMLRL's defaults, device placement, and config files.
export { ConfigError } from "./fields.js";
export {
  planPlacement,
  resolveDevices,
  resolveSingleDevice,
  type CudaFacts,
  type DeviceSpec,
  type Placement,
  type PlacementConfig,
} from "./devices.js";
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
  EVAL_FIELDS,
  PLACEMENT_FIELDS,
  REFERENCE_KL_FIELDS,
  RUNTIME_FIELDS,
  SAMPLING_FIELDS,
  type EvalConfig,
  type PlacementFields,
  type ReferenceKlConfig,
  type RuntimeConfig,
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
export { loadConfigFile, parseConfigText, type LoadConfigOptions } from "./file.js";
