// The public API of comlrl.
export { logitsBlockRows, memoryWindow, numerics, runtimeInfo, setLogitsBlockRows, setNumThreads, type CudaDeviceMemory, type MemoryWindow, type NumericsInfo, type RuntimeInfo } from "./runtime.js";
export { AddonLoadError } from "./native/loader.js";

export { CausalLM, ModelLoadError, type CloneOptions, type Dtype, type Generation, type GenerationOptions, type LoadOptions, type ModelInfo, type RouterAuxLoss, type SaveOptions, type ScoreOptions, type Scores, type TokenBatchInput, type TokenRows } from "./models/causal-lm.js";
export { ValueHead, type Readout, type ValueHeadInfo, type ValueHeadOptions, type ValueLossOptions } from "./models/value-head.js";
export { Optimizer, type AdamWOptions, type OptimizerMemory, type ParameterGroup, type StepSamples, type Trainable } from "./models/optimizer.js";
export { encodeTorchStateDict, decodeTorchStateDict, saveTorchStateDict, loadTorchStateDict, type DeclaredTensor, type StateTensor, type StateDtype } from "./io/torch-pickle.js";
export { ComlrlTokenizer, type ChatMessage, type EncodedBatch, type SpecialTokens, type TokenizerSources } from "./models/tokenizer.js";
export { createTinyModel, type TinyModelOptions } from "./models/tiny-model.js";
export { exportGguf, GGUF_EXPORT_ARCHITECTURES, GgufExportError, type GgufDtype, type GgufExportOptions, type GgufExportSummary } from "./models/gguf/export.js";
export { resolveModelSource, resolveDatasetFiles, hubCacheDir, type RepoFiles, type ResolveModelSourceOptions, type HubRepoType } from "./models/hub.js";
export { parseModelConfig, type Activation, type AttentionKernel, type ModelConfig, type ModelDtype, type ModelType, type NormKind, type NormPlacement, type QkNorm, type RotaryModelType } from "./models/config.js";

export * from "./config/index.js";
export type { AdvantageGrouping, AgentObjective, ImportanceSamplingLevel, KlEstimator, KlIn, LossType, PerAgent, ScaleRewards } from "./config/objectives.js";

export type { ExternalTransition, Formatter, Item, NodeSample, RewardContext, RewardFunction, RewardProcessor, SamplerLogprobs, TransitionInput } from "./rollout/types.js";
export type { RolloutEnvironment, RolloutPolicy, RolloutTimer, SampledCompletions } from "./rollout/tree.js";
export { RewardError, RewardProcessors } from "./rollout/rewards.js";
export { advantages, shapeReturns } from "./rollout/advantages.js";

export { Agent, AgentResolutionError, type ModelSource, type SamplingSettings } from "./trainers/agents.js";
export type { GenerationKwargs } from "./trainers/generation-kwargs.js";
export { NonFiniteError, Trainer, type LifecycleConfig, type LifecycleOptions, type NonFinitePolicy, type StageHost, type Stateful, type StepFunction, type StepRequest, type TrainingStage, type TrainOptions, type TrainProgress, type UpdateRecord } from "./trainers/lifecycle/trainer.js";
export { StageTimings, PHASES, type Phase, type StageTime } from "./trainers/lifecycle/timings.js";
export { StageMemory, type MemoryPhase, type PhaseMemory } from "./trainers/lifecycle/memory.js";
export { ComponentRegistry, type Component, type ComponentModule, type ComponentOptimizer, type ComponentSpec, type SavedComponent, type SaveModelOptions } from "./components/registry.js";
export { causalLMModule, valueHeadModule } from "./models/components.js";
export { TrainerOptionError } from "./trainers/options.js";
export { actorsOnly, planPlacement, type MachineFacts, type ModuleDeclaration, type Placement, type PlacementConfig, type PlacementRequest, type RewardModelDeclaration, type RewardModelPlace } from "./trainers/placement.js";
export type { TaskOptions } from "./trainers/task-options.js";
export type { EvalLoggerInput, EvaluationHooks } from "./trainers/evaluation.js";
export { MAGRPOTrainer, type MAGRPOTrainerOptions, type TrainerClass } from "./trainers/reinforce/magrpo.js";
export { CheckpointError, readCheckpointMetadata, type CheckpointMetadata } from "./checkpoint/checkpoint.js";
export { RESUME_CHANGEABLE_FIELDS } from "./checkpoint/config-changes.js";
export { MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer } from "./trainers/reinforce/baselines.js";
export { CentralizedMAGRPOTrainer, CentralizedParseError, TaggedAdapter, type CentralizedAdapter, type CentralizedMAGRPOTrainerOptions } from "./trainers/reinforce/centralized.js";
export { IACTrainer, type IACTrainerOptions } from "./trainers/actor-critic/iac.js";
export { MAACTrainer, jointCriticText, type MAACTrainerOptions } from "./trainers/actor-critic/maac.js";
export { MAPPOLearner, MAPPOTrainer, type MAPPOTrainerOptions } from "./trainers/actor-critic/mappo.js";
export { MAPPO_FIELDS, mappoConfig, type MAPPOConfig, type MAPPOConfigInput } from "./config/actor-critic.js";
export type { ActorCriticOptions } from "./trainers/actor-critic/learner.js";
export type { ActorCriticSample, CriticRow } from "./trainers/actor-critic/samples.js";
export type { Critic } from "./trainers/actor-critic/critics.js";
export { MADPOTrainer, type MADPOTrainerOptions, type DPOStepMetrics } from "./trainers/preference/madpo.js";
export { MARLHFTrainer, type MARLHFTrainerOptions, type RewardModelStepMetrics } from "./trainers/preference/marlhf.js";
export { JointRewardModel, jointText, type JointRewardModelOptions } from "./trainers/preference/reward-model.js";
export type { PreferencePair } from "./trainers/preference/pairs.js";
export { MADPOIterTrainer, type MADPOIterTrainerOptions } from "./trainers/preference/iterative/madpo-iter.js";
export { MARLHFIterTrainer, type MARLHFIterTrainerOptions } from "./trainers/preference/iterative/marlhf-iter.js";
export { readReplayDir, readShard, type IterativePair } from "./trainers/preference/iterative/replay.js";
export { ComparatorApiError } from "./trainers/preference/iterative/api-comparator.js";

export { DistributedContext, type CollectiveTraffic, type CommunicationStats, type ReduceOp } from "./distributed/context.js";
export { readDistributedEnvironment, DistributedEnvironmentError, DEFAULT_TIMEOUT_SECONDS, type DistributedEnvironment } from "./distributed/environment.js";
export { ReplicaError, type RankState } from "./distributed/replicas.js";

export { MetricsLogger, type Metrics, type MetricValue, type MetricsLoggerOptions, type MetricsLoggerState, type SampleRow } from "./logging/metrics-logger.js";
export { readJsonlMetrics, readRunMetrics, type JsonlRecord, type MetricsKind } from "./logging/jsonl.js";
export { TensorBoardWriter } from "./logging/tensorboard.js";
export { mergeWandbResume, type WandbConfig, type WandbResume, type WandbRunIdentity } from "./logging/wandb.js";
export { writeLineChartSvg, type LineChartOptions, type LineSeries, type ReferenceLine } from "./logging/svg-plot.js";
export type { ProgressFields } from "./logging/progress.js";

export { loadDataset, streamDataset, datasetSplits, parseSplit, sliceRange, findSplitFiles, SplitError, DataFilesError, DataFileError, type LoadDatasetOptions, type SplitSlice, type SplitFiles } from "./data/index.js";
export { loadTrainConfig, trainConfigFromObject, type TrainFileConfig, type TrainConfigOptions } from "./cli/config-file.js";
export {
  registerTrainer,
  rlAlgorithms,
  trainerDefinition,
  trainerDefinitions,
  trainerSections,
  type CriticNeeds,
  type FileCritics,
  type FileRun,
  type TrainerDefinition,
} from "./trainers/builtins.js";

export { getTask, listTasks, registerTask, type TaskDefinition, type DatasetOptions, type ChatTemplate } from "./tasks/registry.js";
export type { TaskEntry } from "./tasks/task.js";
export { runSandboxed, checkSandbox, requireSandbox, SandboxUnavailableError, setSandboxParallelism, type SandboxCheck, type SandboxMode, type SandboxOptions, type SandboxRequest, type SandboxResult, type SandboxLimits, type TestResult, type TestStatus } from "./sandbox/sandbox.js";
