// Every built-in trainer, registered: the online ones (online-trainers.ts) and the preference trainers built on them.
// Read the registry through this module, so that its lookups see every built-in trainer.
import type { ConfigSource } from "../config/magrpo.js";
import { MADPO_FIELDS, madpoConfig, MARLHF_FIELDS, marlhfConfig } from "../config/preference.js";
import { MADPO_ITER_FIELDS, madpoIterConfig, MARLHF_ITER_FIELDS, marlhfIterConfig } from "../config/iterative.js";
import type { LifecycleConfig } from "./lifecycle/trainer.js";
import "./online-trainers.js";
import { MADPOIterTrainer } from "./preference/iterative/madpo-iter.js";
import { MARLHFIterTrainer } from "./preference/iterative/marlhf-iter.js";
import { MADPOTrainer } from "./preference/madpo.js";
import { MARLHFTrainer } from "./preference/marlhf.js";
import { checkRLPhase, type RlhfConfig } from "./preference/rl-phase.js";
import { registerTrainer, type TrainerDefinition } from "./registry.js";

export { registerTrainer, rlAlgorithms, trainerDefinition, trainerDefinitions, trainerSections, type CriticNeeds, type FileCritics, type FileRun, type TrainerDefinition } from "./registry.js";
export type { ActorExtras } from "./actors.js";
export type { RLBackEnd, RLPhaseCritics, RLPhaseLearner, RLPhaseSetUp } from "./rl-back-end.js";

/** A preference trainer's entry: built from `config`, one actor for every role under centralized collaboration. */
function preference<C extends LifecycleConfig & { readonly collaborationMode: string }>(
  section: string,
  trainer: TrainerDefinition<C>["trainer"],
  configName: string,
  fields: TrainerDefinition["fields"],
  config: (input: Record<string, unknown>, options: ConfigSource) => C,
  create: TrainerDefinition<C>["create"],
): TrainerDefinition<C> {
  return { section, trainer, configName, fields, config, centralized: (built) => built.collaborationMode === "centralized", create };
}

/**
 * MARLHF's or MARLHFIter's entry: its config's RL phase checked against the registered back-ends as it is built; its
 * critics are its actor-critic RL phase's, loaded from critic_model_name or the agents' models when the file names none.
 */
function rlhf<C extends RlhfConfig & LifecycleConfig>(definition: TrainerDefinition<C>): TrainerDefinition<C> {
  const { configName } = definition;
  return { ...definition, config: (input, options) => checkRLPhase(definition.config(input, options), configName, {}, options), critics: { required: () => false } };
}

registerTrainer(preference("madpo", MADPOTrainer, "MADPOConfig", MADPO_FIELDS, madpoConfig, (run, config) => MADPOTrainer.create({ ...run, config })));
registerTrainer(rlhf(preference("marlhf", MARLHFTrainer, "MARLHFConfig", MARLHF_FIELDS, marlhfConfig, (run, config, critics) => MARLHFTrainer.create({ ...run, config, ...critics }))));
registerTrainer(preference("madpo_iter", MADPOIterTrainer, "MADPOIterConfig", MADPO_ITER_FIELDS, madpoIterConfig, (run, config) => MADPOIterTrainer.create({ ...run, config })));
registerTrainer(
  rlhf(preference("marlhf_iter", MARLHFIterTrainer, "MARLHFIterConfig", MARLHF_ITER_FIELDS, marlhfIterConfig, (run, config, critics) => MARLHFIterTrainer.create({ ...run, config, ...critics }))),
);
