// The W&B run config against the real CoMLRL 1.4.3 (tests/golden/comlrl, scripts/reference/make_comlrl_goldens.py):
// each of its trainers was built with a wandb_config and wandb.init replaced by a recorder, on the tiny model given as
// loaded objects or by path. We build our trainer with the same args (our configs read CoMLRL's snake_case names) and
// the same wandbConfig, and the config our W&B run would be given must hold exactly CoMLRL's keys and values beside
// our one extra key.
//
// Environment-specific values: model_name is the model's path where CoMLRL was given a path; the harness wrote it
// relative to the repository, and ours is compared the same way. Loaded models log their model_type on both sides.
// Numbers are compared as JSON gives them: JavaScript has no separate int and float (CoMLRL's 1.0 arrives as 1).
import path from "node:path";
import { describe, expect, it } from "vitest";
import { OURS_RUN_CONFIG_KEY } from "../../src/logging/run-config.js";
import { wandbInitOptions, type WandbConfig } from "../../src/logging/wandb.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { IACTrainer } from "../../src/trainers/actor-critic/iac.js";
import { MAACTrainer } from "../../src/trainers/actor-critic/maac.js";
import { MADPOIterTrainer } from "../../src/trainers/preference/iterative/madpo-iter.js";
import { MARLHFIterTrainer } from "../../src/trainers/preference/iterative/marlhf-iter.js";
import { MADPOTrainer } from "../../src/trainers/preference/madpo.js";
import { MARLHFTrainer } from "../../src/trainers/preference/marlhf.js";
import { MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer } from "../../src/trainers/reinforce/baselines.js";
import { CentralizedMAGRPOTrainer } from "../../src/trainers/reinforce/centralized.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";
import { COMLRL_MODEL, golden, scratch } from "./comlrl-golden.js";

const REPO = path.resolve(__dirname, "..", "..");

// CoMLRL's trainer classes and ours, by CoMLRL's name.
const TRAINERS: Record<string, { create(options: any): Promise<any> }> = {
  MAGRPOTrainer, MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer, CentralizedMAGRPOTrainer, IACTrainer, MAACTrainer,
  MADPOTrainer, MARLHFTrainer, MADPOIterTrainer, MARLHFIterTrainer,
};

/** CoMLRL's wandb_config under our names (config_sections is configSections here). */
function ourWandbConfig({ config_sections, ...rest }: Record<string, unknown>): WandbConfig {
  return { ...rest, ...(config_sections ? { configSections: config_sections as Record<string, unknown> } : {}) };
}

/** CoMLRL's args under our camelCase config names, leaving out the nulls our configs derive. */
function ourNames(args: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(args)
    .filter(([, value]) => value !== null)
    .map(([key, value]) => [key.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase()), value]));
}

describe.each(Object.entries<any>(golden.wandb_run_config))("CoMLRL 1.4.3 parity: the W&B run config of %s", (_, ref) => {
  it(`holds ${ref.trainer}'s keys and values, and ours under ${OURS_RUN_CONFIG_KEY}`, async () => {
    const loaded: CausalLM[] = [];
    const load = async (n: number) => {
      const models = await Promise.all(Array.from({ length: n }, () => CausalLM.load(COMLRL_MODEL)));
      loaded.push(...models);
      return models;
    };
    const actors = ref.actors === "path" ? { agentModel: COMLRL_MODEL } : { agents: await load(ref.actors), tokenizer: await ComlrlTokenizer.fromDirectory(COMLRL_MODEL) };
    const trainer = await TRAINERS[ref.trainer].create({
      ...actors, ...(ref.critics > 0 ? { critics: await load(ref.critics) } : {}),
      numAgents: ref.args.num_agents, rewardFunc: () => [0], trainDataset: [{ prompt: "x" }], quiet: true, outputDir: scratch(),
      config: ref.args,
    });
    try {
      const options = wandbInitOptions(ourWandbConfig(ref.wandbConfig), { algorithm: trainer.algorithm, runConfig: trainer.runConfig() });
      const { [OURS_RUN_CONFIG_KEY]: ours, ...comlrl } = options.config as Record<string, unknown>;
      if (ref.actors === "path") comlrl.model_name = path.relative(REPO, comlrl.model_name as string);
      expect(comlrl).toEqual(ref.config);
      // Ours: the trainer's own name and our whole config, whatever CoMLRL has no key for. Every arg the trainer was
      // built from is there under our name, as given, but for those ours resolves: a null ("derived") takes its value,
      // and the centralized trainer's config counts its one joint actor.
      const given = ourNames(ref.args);
      expect(ours).toMatchObject({ trainer: trainer.algorithm, ...given, ...(ref.trainer === "CentralizedMAGRPOTrainer" ? { numAgents: 1 } : {}) });
      expect(Object.keys(ours as object).sort()).toEqual(["trainer", ...Object.keys(trainer.config)].sort());
      // wandb.init's other arguments: as given; left unset, CoMLRL passes None (W&B's defaults) where we name them.
      expect({ project: options.project, name: options.name }).toEqual({
        project: ref.init.project ?? "comlrl",
        name: ref.init.name ?? `test-${trainer.algorithm.toLowerCase()}`,
      });
    } finally {
      await trainer.close();
      loaded.forEach((model) => model.dispose());
    }
  });
});
