// The public API of comlrl.
export { numerics, runtimeInfo, setNumThreads, type NumericsInfo, type RuntimeInfo } from "./runtime.js";
export { AddonLoadError } from "./native/loader.js";

export { CausalLM, ModelLoadError, type Dtype, type Generation, type GenerationOptions, type LoadOptions, type SaveOptions, type Scores } from "./models/causal-lm.js";
export { ValueHead, type ValueHeadOptions, type ValueLossOptions } from "./models/value-head.js";
export { Optimizer, type GradientSync, type ParameterGroup, type StepSamples, type Trainable } from "./models/optimizer.js";
export type { CollectiveTraffic, NativeProcessGroup, NativeValueHead, NativeValueHeadInfo, OptimizerGroup, Readout, TokenBatchInput, ValueLossInput } from "./native/binding.js";
export { encodeTorchStateDict, decodeTorchStateDict, saveTorchStateDict, loadTorchStateDict, type StateTensor, type StateDtype } from "./io/torch-pickle.js";
export { ComlrlTokenizer, type ChatMessage } from "./models/tokenizer.js";
export { createTinyModel, type TinyModelOptions } from "./models/tiny-model.js";
export { resolveModelSource, resolveDatasetFiles, hubCacheDir, type RepoFiles, type HubRepoType } from "./models/hub.js";
export { parseModelConfig, ConfigError as ModelConfigError, type ModelConfig } from "./models/config.js";

export * from "./config/index.js";

export type { ExternalTransition, Formatter, Item, NodeSample, RewardContext, RewardFunction, RewardProcessor, TransitionInput } from "./rollout/types.js";
export { RewardError, RewardProcessors } from "./rollout/rewards.js";
export { advantages, shapeReturns } from "./rollout/advantages.js";

export { Agent, AgentResolutionError, type ModelSource } from "./trainers/agents.js";
export { NonFiniteError, Trainer, type LifecycleOptions, type NonFinitePolicy, type StageHost, type Stateful, type StepFunction, type StepRequest, type TrainingStage, type TrainOptions, type TrainProgress, type UpdateRecord } from "./trainers/lifecycle/trainer.js";
export { StageTimings, PHASES, type Phase, type StageTime } from "./trainers/lifecycle/timings.js";
export { ComponentRegistry, causalLMModule, valueHeadModule, type Component, type ComponentModule, type ComponentSpec } from "./trainers/lifecycle/components.js";
export { TrainerOptionError } from "./trainers/options.js";
export type { TaskOptions } from "./trainers/task-options.js";
export type { EvalLoggerInput, EvaluationHooks } from "./trainers/evaluation.js";
export { MAGRPOTrainer, type MAGRPOTrainerOptions } from "./trainers/reinforce/magrpo.js";
export { CheckpointError, readCheckpointMetadata, type CheckpointMetadata } from "./checkpoint/checkpoint.js";
export { MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer } from "./trainers/reinforce/baselines.js";
export { CentralizedMAGRPOTrainer, CentralizedParseError, TaggedAdapter, type CentralizedAdapter, type CentralizedMAGRPOTrainerOptions } from "./trainers/reinforce/centralized.js";
export { IACTrainer, type IACTrainerOptions } from "./trainers/actor-critic/iac.js";
export { MAACTrainer, jointCriticText, type MAACTrainerOptions } from "./trainers/actor-critic/maac.js";
export type { ActorCriticOptions } from "./trainers/actor-critic/learner.js";
export type { ActorCriticSample, CriticRow } from "./trainers/actor-critic/samples.js";
export type { Critic } from "./trainers/actor-critic/critics.js";
export { MADPOTrainer, type MADPOTrainerOptions, type DPOStepMetrics } from "./trainers/preference/madpo.js";
export { MARLHFTrainer, type MARLHFTrainerOptions } from "./trainers/preference/marlhf.js";
export { JointRewardModel, jointText } from "./trainers/preference/reward-model.js";
export type { PreferencePair } from "./trainers/preference/pairs.js";
export { MADPOIterTrainer, type MADPOIterTrainerOptions } from "./trainers/preference/iterative/madpo-iter.js";
export { MARLHFIterTrainer, type MARLHFIterTrainerOptions } from "./trainers/preference/iterative/marlhf-iter.js";
export { readReplayDir, readShard, type IterativePair } from "./trainers/preference/iterative/replay.js";
export { ComparatorApiError } from "./trainers/preference/iterative/api-comparator.js";

export { DistributedContext, type CommunicationStats, type ReduceOp } from "./dist/context.js";
export { readDistributedEnvironment, DistributedEnvironmentError, DEFAULT_TIMEOUT_SECONDS, type DistributedEnvironment } from "./dist/environment.js";
export { ReplicaError, type RankState } from "./dist/replicas.js";

export { MetricsLogger, type SampleRow } from "./logging/metrics-logger.js";
export { readJsonlMetrics, readRunMetrics } from "./logging/jsonl.js";
export { TensorBoardWriter } from "./logging/tensorboard.js";
export { mergeWandbResume, type WandbConfig, type WandbRunIdentity } from "./logging/wandb.js";
export { writeLineChartSvg } from "./logging/svg-plot.js";

export { loadDataset, datasetSplits, parseSplit, sliceRange, findSplitFiles, SplitError, DataFilesError, DataFileError, type LoadDatasetOptions, type SplitSlice, type SplitFiles } from "./data/index.js";
export { loadTrainConfig, trainConfigFromObject, type TrainFileConfig, type TrainConfigOptions } from "./config/file-sections.js";

export { getTask, listTasks, registerTask, type TaskDefinition, type DatasetOptions, type ChatTemplate } from "./tasks/registry.js";
export { runSandboxed, checkSandbox, requireSandbox, SandboxUnavailableError, setSandboxParallelism, type SandboxRequest, type SandboxResult, type SandboxLimits } from "./sandbox/sandbox.js";
