// The online trainers' registry entries, registered: the MAGRPO family and the actor-critic trainers. Each trains on
// its own; MARLHF's RL phase draws its back-ends from these entries, so this file registers nothing that builds on
// MARLHF (the preference trainers register in builtins.ts).
import { IAC_FIELDS, iacConfig, MAAC_FIELDS, maacConfig, type IACConfig, type MAACConfig } from "../config/actor-critic.js";
import {
  CENTRALIZED_FIELDS,
  centralizedMagrpoConfig,
  MAGRPO_FIELDS,
  magrpoConfig,
  MAREINFORCE_FIELDS,
  mareinforceConfig,
  MAREMAX_FIELDS,
  maremaxConfig,
  MARLOO_FIELDS,
  marlooConfig,
  type ConfigSource,
  type MAGRPOConfig,
} from "../config/magrpo.js";
import { ComlrlTokenizer } from "../models/tokenizer.js";
import { IACTrainer } from "./actor-critic/iac.js";
import { MAACTrainer } from "./actor-critic/maac.js";
import { MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer } from "./reinforce/baselines.js";
import { CentralizedMAGRPOTrainer } from "./reinforce/centralized.js";
import { MAGRPOTrainer } from "./reinforce/magrpo.js";
import { registerTrainer, type FileRun, type TrainerDefinition } from "./registry.js";

/** A MAGRPO-family entry: the trainer built from `config`; `documentedOn`: the interface describing its fields, when not its own. */
function magrpoFamily(
  section: string,
  trainer: typeof MAGRPOTrainer,
  configName: string,
  fields: TrainerDefinition["fields"],
  config: (input: Record<string, unknown>, options: ConfigSource) => MAGRPOConfig,
  documentedOn?: string,
): TrainerDefinition<MAGRPOConfig> {
  return { section, trainer, configName, documentedOn, fields, config, create: (run, built) => trainer.create({ ...run, config: built }) };
}

/** The actor-critic trainers take loaded tokenizers with `agents` (COMLRL-SPEC §5.2). */
async function withTokenizers(run: FileRun) {
  return { ...run, tokenizer: await Promise.all(run.agents.map((dir) => ComlrlTokenizer.fromDirectory(dir))) };
}

registerTrainer(magrpoFamily("magrpo", MAGRPOTrainer, "MAGRPOConfig", MAGRPO_FIELDS, magrpoConfig));
registerTrainer(magrpoFamily("mareinforce", MAREINFORCETrainer, "MAREINFORCEConfig", MAREINFORCE_FIELDS, mareinforceConfig, "MAGRPOConfig"));
registerTrainer(magrpoFamily("maremax", MAReMaxTrainer, "MAReMaxConfig", MAREMAX_FIELDS, maremaxConfig, "MAGRPOConfig"));
registerTrainer(magrpoFamily("marloo", MARLOOTrainer, "MARLOOConfig", MARLOO_FIELDS, marlooConfig, "MAGRPOConfig"));
registerTrainer({
  ...magrpoFamily("centralized_magrpo", CentralizedMAGRPOTrainer, "CentralizedMAGRPOConfig", CENTRALIZED_FIELDS, centralizedMagrpoConfig),
  centralized: () => true,
  selectedBy: { section: "magrpo", when: (body) => String(body.collaboration_mode ?? body.collaborationMode).trim().toLowerCase() === "centralized" },
});
registerTrainer<IACConfig>({
  section: "iac",
  trainer: IACTrainer,
  configName: "IACConfig",
  fields: IAC_FIELDS,
  config: iacConfig,
  critics: { required: (config) => config.useSeparateCritic },
  create: async (run, config, critics) => IACTrainer.create({ ...(await withTokenizers(run)), config, ...critics }),
});
registerTrainer<MAACConfig>({
  section: "maac",
  trainer: MAACTrainer,
  configName: "MAACConfig",
  documentedOn: "ActorCriticConfig",
  fields: MAAC_FIELDS,
  config: maacConfig,
  critics: { required: () => true },
  create: async (run, config, critics) => MAACTrainer.create({ ...(await withTokenizers(run)), config, ...critics }),
});
