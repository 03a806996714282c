// The online trainers' registry entries, registered: the MAGRPO family and the actor-critic trainers. Each trains on
// its own, and those with an RL back-end (rl-back-end.ts) also as MARLHF's RL phase, which draws them from here; so
// this file registers nothing that builds on MARLHF (the preference trainers register in builtins.ts).
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
import type { ModelSource } from "../models/causal-lm.js";
import { ComlrlTokenizer } from "../models/tokenizer.js";
import { registerCritics, refuseCriticSources, resolveCentralCriticSource, resolveSeparateCriticSources } from "./actor-critic/critics.js";
import { iacActorExtras, IACLearner, iacModules, IACTrainer, loadIACCritics } from "./actor-critic/iac.js";
import { loadMAACCritic, MAACLearner, maacModules, MAACTrainer } from "./actor-critic/maac.js";
import { MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer } from "./reinforce/baselines.js";
import { CentralizedMAGRPOTrainer } from "./reinforce/centralized.js";
import { MAGRPOLearner, MAGRPOTrainer } from "./reinforce/magrpo.js";
import type { Placement } from "./placement.js";
import { registerTrainer, type FileRun, type TrainerDefinition } from "./registry.js";
import { criticSourceGiven, defaultCriticSources, learnerConfigInput, type RLBackEnd, type RLPhaseCritics, type RLPhaseSetUp } from "./rl-back-end.js";

/** A MAGRPO-family entry: the trainer built from `config`; `documentedOn`: the interface describing its fields, when not its own. */
function magrpoFamily(
  section: string,
  trainer: typeof MAGRPOTrainer,
  configName: string,
  fields: TrainerDefinition["fields"],
  config: (input: Record<string, unknown>, options: ConfigSource) => MAGRPOConfig,
  documentedOn?: string,
): TrainerDefinition<MAGRPOConfig> {
  return { section, trainer, configName, documentedOn, fields, config, rlBackEnd: magrpoBackEnd(fields, config), create: (run, built) => trainer.create({ ...run, config: built }) };
}

/** The MAGRPO family's RL phase: its learner on MARLHF's actors, its updates per rollout MARLHF's rlNumIterations. */
function magrpoBackEnd(fields: TrainerDefinition["fields"], config: (input: Record<string, unknown>, options: ConfigSource) => MAGRPOConfig): RLBackEnd {
  return {
    critics: false,
    actorExtras: () => ({}),
    learner: async ({ config: c, actors, environment, options, host }) => {
      const built = config(learnerConfigInput(fields, c, { numAgents: actors.agents.length, numIterations: c.rlNumIterations }), {});
      return new MAGRPOLearner(built, actors.agents, { rewardFunc: environment.rewardFunc, ...options }, environment, host);
    },
  };
}

/** The actor-critic RL phases' critics learn at criticLearningRate (default MARLHF's agentLearningRate). */
const criticLearningRate = (c: RLPhaseSetUp["config"]) => c.criticLearningRate ?? c.agentLearningRate;

/** The critics' devices of MARLHF's RL phase: under "mp" where the placement put them (MAAC's one critic: one, §10.16). */
function placedCriticDevices(c: RLPhaseSetUp["config"], placement: Placement): RLPhaseSetUp["config"]["criticDevices"] {
  return c.parallelTraining === "mp" && placement.criticDevices.length > 0 ? placement.criticDevices : c.criticDevices;
}

/** IAC's critic sources in MARLHF's RL phase: none with the value heads on the actors, else one per agent. */
function iacCriticSources(c: RLPhaseSetUp["config"], given: RLPhaseCritics, actors: readonly ModelSource[]): ModelSource[] {
  if (!c.useSeparateCritic) return (refuseCriticSources(given), []);
  return criticSourceGiven(given) ? resolveSeparateCriticSources(given, actors.length) : defaultCriticSources(c, actors, actors.length);
}

/** MAAC's centralized critic's source in MARLHF's RL phase. */
function maacCriticSource(c: RLPhaseSetUp["config"], given: RLPhaseCritics, actors: readonly ModelSource[]): ModelSource {
  return criticSourceGiven(given) ? resolveCentralCriticSource(given) : defaultCriticSources(c, actors, 1)[0]!;
}

/** IAC as MARLHF's RL phase: value heads on the actors or separate critics (one per agent), copied references. */
const IAC_BACK_END: RLBackEnd = {
  critics: true,
  actorExtras: (c, given) => {
    return { ...iacActorExtras(c), modules: (actors) => iacModules(c, iacCriticSources(c, given, actors)) };
  },
  learner: async ({ config: c, actors, critics: given, environment, options, host, registry }) => {
    const n = actors.agents.length;
    const criticDevices = placedCriticDevices(c, actors.placement);
    const iac = iacConfig(learnerConfigInput(IAC_FIELDS, c, { numAgents: n, numIterations: c.rlNumIterations, criticLearningRate: criticLearningRate(c), criticDevices }));
    const sources = iacCriticSources(c, given, actors.sources);
    const learner = new IACLearner(iac, actors.agents, await loadIACCritics(iac, actors, sources), { rewardFunc: environment.rewardFunc, ...options }, environment, host);
    registerCritics(registry, learner.critics, (i) => `agent_${i}/critic`, (i) => `agent_${i}/critic`);
    return learner;
  },
};

/** MAAC as MARLHF's RL phase: one centralized critic, so the agents' updates take turns (no CPU agent lanes). */
const MAAC_BACK_END: RLBackEnd = {
  critics: true,
  actorExtras: (c, given) => {
    if (Array.isArray(c.criticDevices) && c.criticDevices.length > 1) {
      throw new RangeError(`MARLHF: criticDevices must name one device with rlAlgorithm "maac" (its one centralized critic), got ${c.criticDevices.length}: ${c.criticDevices.join(", ")}`);
    }
    return { modules: (actors) => maacModules(c, maacCriticSource(c, given, actors)) };
  },
  learner: async ({ config: c, actors, critics: given, environment, options, host, registry }) => {
    const criticDevices = placedCriticDevices(c, actors.placement);
    const maac = maacConfig(learnerConfigInput(MAAC_FIELDS, c, { numAgents: actors.agents.length, numIterations: c.rlNumIterations, criticLearningRate: criticLearningRate(c), criticDevices }));
    const critic = await loadMAACCritic(maac, actors, maacCriticSource(c, given, actors.sources), c.criticValueHeadHiddenDim);
    const learner = new MAACLearner(maac, actors.agents, critic, { rewardFunc: environment.rewardFunc, ...options }, environment, host);
    registerCritics(registry, learner.critics, () => "critic", () => "critic");
    return learner;
  },
};

/** The actor-critic trainers take loaded tokenizers with `agents` (COMLRL-SPEC §5.2). */
async function withTokenizers(run: FileRun) {
  return { ...run, tokenizer: await Promise.all(run.agents.map((dir) => ComlrlTokenizer.fromDirectory(dir))) };
}

registerTrainer(magrpoFamily("magrpo", MAGRPOTrainer, "MAGRPOConfig", MAGRPO_FIELDS, magrpoConfig));
registerTrainer(magrpoFamily("mareinforce", MAREINFORCETrainer, "MAREINFORCEConfig", MAREINFORCE_FIELDS, mareinforceConfig, "MAGRPOConfig"));
registerTrainer(magrpoFamily("maremax", MAReMaxTrainer, "MAReMaxConfig", MAREMAX_FIELDS, maremaxConfig, "MAGRPOConfig"));
registerTrainer(magrpoFamily("marloo", MARLOOTrainer, "MARLOOConfig", MARLOO_FIELDS, marlooConfig, "MAGRPOConfig"));
// MARLHF has centralized collaboration of its own; this trainer is no RL back-end.
registerTrainer({
  ...magrpoFamily("centralized_magrpo", CentralizedMAGRPOTrainer, "CentralizedMAGRPOConfig", CENTRALIZED_FIELDS, centralizedMagrpoConfig),
  rlBackEnd: undefined,
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
  rlBackEnd: IAC_BACK_END,
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
  rlBackEnd: MAAC_BACK_END,
  create: async (run, config, critics) => MAACTrainer.create({ ...(await withTokenizers(run)), config, ...critics }),
});
