// Every built-in trainer, registered: the online ones (online-trainers.ts) and the preference trainers built on them.
// Read the registry through this module, so that its lookups see every built-in trainer.
import { MADPO_FIELDS, madpoConfig, MARLHF_FIELDS, marlhfConfig, type MADPOConfig, type MARLHFConfig } from "../config/preference.js";
import { MADPO_ITER_FIELDS, madpoIterConfig, MARLHF_ITER_FIELDS, marlhfIterConfig, type MADPOIterConfig, type MARLHFIterConfig } from "../config/iterative.js";
import "./online-trainers.js";
import { MADPOIterTrainer } from "./preference/iterative/madpo-iter.js";
import { MARLHFIterTrainer } from "./preference/iterative/marlhf-iter.js";
import { MADPOTrainer } from "./preference/madpo.js";
import { MARLHFTrainer } from "./preference/marlhf.js";
import { checkRLPhase } from "./preference/rl-phase.js";
import { registerTrainer } from "./registry.js";

export { registerTrainer, rlAlgorithms, trainerDefinition, trainerDefinitions, trainerSections, type CriticNeeds, type FileCritics, type FileRun, type TrainerDefinition } from "./registry.js";
export type { ActorExtras } from "./actors.js";
export type { RLBackEnd, RLPhaseCritics, RLPhaseLearner, RLPhaseSetUp } from "./rl-back-end.js";

/** Preference trainers train one actor for every role under centralized collaboration. */
const centralized = (config: { collaborationMode: string }) => config.collaborationMode === "centralized";
/** MARLHF's critics are its actor-critic RL phase's; without a source there it loads them from critic_model_name or the agents' models. */
const rlPhaseCritics = { required: () => false };

registerTrainer<MADPOConfig>({
  section: "madpo",
  trainer: MADPOTrainer,
  configName: "MADPOConfig",
  fields: MADPO_FIELDS,
  config: madpoConfig,
  centralized,
  create: (run, config) => MADPOTrainer.create({ ...run, config }),
});
registerTrainer<MARLHFConfig>({
  section: "marlhf",
  trainer: MARLHFTrainer,
  configName: "MARLHFConfig",
  fields: MARLHF_FIELDS,
  config: (input, options) => checkRLPhase(marlhfConfig(input, options), "MARLHFConfig", {}, options),
  centralized,
  critics: rlPhaseCritics,
  create: (run, config, critics) => MARLHFTrainer.create({ ...run, config, ...critics }),
});
registerTrainer<MADPOIterConfig>({
  section: "madpo_iter",
  trainer: MADPOIterTrainer,
  configName: "MADPOIterConfig",
  fields: MADPO_ITER_FIELDS,
  config: madpoIterConfig,
  centralized,
  create: (run, config) => MADPOIterTrainer.create({ ...run, config }),
});
registerTrainer<MARLHFIterConfig>({
  section: "marlhf_iter",
  trainer: MARLHFIterTrainer,
  configName: "MARLHFIterConfig",
  fields: MARLHF_ITER_FIELDS,
  config: (input, options) => checkRLPhase(marlhfIterConfig(input, options), "MARLHFIterConfig", {}, options),
  centralized,
  critics: rlPhaseCritics,
  create: (run, config, critics) => MARLHFIterTrainer.create({ ...run, config, ...critics }),
});
