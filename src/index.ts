// The public API of comlrl.
export { runtimeInfo, setNumThreads, type RuntimeInfo } from "./runtime.js";
export { AddonLoadError } from "./native/loader.js";

export { CausalLM, ModelLoadError, type Dtype, type Generation, type GenerationOptions, type LoadOptions, type SaveOptions, type Scores } from "./models/causal-lm.js";
export { ComlrlTokenizer, type ChatMessage } from "./models/tokenizer.js";
export { createTinyModel, type TinyModelOptions } from "./models/tiny-model.js";
export { resolveModelSource, hubCacheDir } from "./models/hub.js";
export { parseModelConfig, ConfigError as ModelConfigError, type ModelConfig } from "./models/config.js";

export * from "./config/index.js";

export type { ExternalTransition, Formatter, Item, NodeSample, RewardContext, RewardFunction, RewardProcessor, TransitionInput } from "./rollout/types.js";
export { RewardError, RewardProcessors } from "./rollout/rewards.js";
export { advantages, shapeReturns } from "./rollout/advantages.js";

export { Agent, AgentResolutionError, type ModelSource } from "./trainers/agents.js";
export { MAGRPOTrainer, type MAGRPOTrainerOptions, type Stateful, type TrainerTimings, type TrainOptions, type TrainProgress, type UpdateMetrics } from "./trainers/reinforce/magrpo.js";
export { CheckpointError, readCheckpointMetadata, type CheckpointMetadata } from "./checkpoint/checkpoint.js";
export { MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer } from "./trainers/reinforce/baselines.js";
export { CentralizedMAGRPOTrainer, CentralizedParseError, TaggedAdapter, type CentralizedAdapter, type CentralizedMAGRPOTrainerOptions } from "./trainers/reinforce/centralized.js";

export { MetricsLogger, type SampleRow } from "./logging/metrics-logger.js";
export { readJsonlMetrics } from "./logging/jsonl.js";
export { TensorBoardWriter } from "./logging/tensorboard.js";
export { mergeWandbResume, type WandbConfig, type WandbRunIdentity } from "./logging/wandb.js";
export { writeLineChartSvg } from "./logging/svg-plot.js";
