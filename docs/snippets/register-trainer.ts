// A registry entry: MAAC again, under a section of its own whose critic learns at 1e-6 unless the file says
// otherwise. `comlrl train` then reads a `maac_slow_critic:` section, and MARLHF takes it as its rlAlgorithm.
import { MAAC_FIELDS, maacConfig, type MAACConfig } from "../../src/config/actor-critic.js";
import { float } from "../../src/config/fields.js";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { MAACTrainer } from "../../src/trainers/actor-critic/maac.js";
import { registerTrainer, trainerDefinition } from "../../src/trainers/builtins.js";

const SLOW_CRITIC_FIELDS = { ...MAAC_FIELDS, criticLearningRate: float({ default: 1e-6, min: 0 }) };

registerTrainer<MAACConfig>({
  section: "maac_slow_critic",
  trainer: MAACTrainer,
  configName: "MAACConfig",
  fields: SLOW_CRITIC_FIELDS,
  config: (input, options) => maacConfig({ criticLearningRate: 1e-6, ...input }, options),
  critics: { required: () => true },
  create: async (run, config, critics) => {
    const tokenizer = await Promise.all(run.agents.map((dir) => ComlrlTokenizer.fromDirectory(dir)));
    return MAACTrainer.create({ ...run, tokenizer, config, ...critics });
  },
  rlBackEnd: trainerDefinition("maac").rlBackEnd,
});
