// The trainer registry (src/trainers/registry.ts): one entry per algorithm, read by config files and by MARLHF's
// choice of RL phase, so that a trainer registered once is a config file's section and (with an RL back-end) an
// rlAlgorithm, with no list to extend elsewhere.
import { describe, expect, it } from "vitest";
import { trainConfigFromObject } from "../../src/cli/config-file.js";
import { ConfigError } from "../../src/config/fields.js";
import { registerTrainer, rlAlgorithms, trainerDefinition, trainerDefinitions, trainerSections } from "../../src/trainers/builtins.js";

const base = { model: { name: "m" }, dataset: { type: "cover-vowels" } };

describe("the trainer registry", () => {
  it("holds each built-in trainer once, under a snake_case section, its field specs those of the config it builds", () => {
    const sections = trainerSections();
    expect(new Set(sections).size).toBe(sections.length);
    expect(sections).toEqual(expect.arrayContaining(["magrpo", "iac", "maac", "madpo", "marlhf", "madpo_iter", "marlhf_iter", "centralized_magrpo"]));
    for (const definition of trainerDefinitions()) {
      expect(definition.section, definition.configName).toMatch(/^[a-z][a-z_]*$/);
      // The field specs are the config's: each one a key of the built config (the docs' tables list them).
      const built = definition.config({}, {}) as unknown as Record<string, unknown>;
      expect(Object.keys(built), definition.configName).toEqual(expect.arrayContaining(Object.keys(definition.fields)));
    }
  });

  it("answers an unknown section with the closest one and the list", () => {
    expect(() => trainerDefinition("magrop")).toThrow(/unknown trainer "magrop" \(did you mean "magrpo"\?\); known trainers: magrpo, /);
  });

  it("refuses a second entry under a section", () => {
    expect(() => registerTrainer(trainerDefinition("maac"))).toThrow(/"maac" is already registered/);
  });

  it("offers as MARLHF's rlAlgorithm exactly the entries with an RL back-end, and names the file and the choices for another", () => {
    expect(rlAlgorithms()).toEqual(trainerDefinitions().filter((d) => d.rlBackEnd !== undefined).map((d) => d.section));
    expect(rlAlgorithms()).toEqual(expect.arrayContaining(["magrpo", "mareinforce", "maremax", "marloo", "iac", "maac"]));
    expect(rlAlgorithms()).not.toContain("marlhf");
    const marlhf = trainerDefinition("marlhf");
    expect(marlhf.config({ rl_algorithm: "mareforce" }, {})).toMatchObject({ rlAlgorithm: "mareinforce", advantageMode: "raw" });
    const error = (() => {
      try {
        marlhf.config({ rl_algorithm: "ppo" }, { source: "run.yaml" });
      } catch (e) {
        return e as ConfigError;
      }
      throw new Error("rl_algorithm ppo was accepted");
    })();
    expect(error).toBeInstanceOf(ConfigError);
    expect(error.field).toBe("rlAlgorithm");
    expect(error.message).toMatch(/^run\.yaml: MARLHFConfig\.rlAlgorithm must be one of "magrpo", .*"iac", "maac".* got "ppo"$/);
    expect(() => trainerDefinition("marlhf_iter").config({ rl_algorithm: "madpo" }, {})).toThrow(/MARLHFIterConfig\.rlAlgorithm must be one of/);
  });
});

describe("a trainer registered later", () => {
  // A MAGRPO run under a section of its own, and an RL back-end of its own: what adding a trainer gives for free.
  const magrpo = trainerDefinition("magrpo");
  registerTrainer({ ...magrpo, section: "later_trainer", configName: "LaterConfig", rlBackEnd: undefined });

  it("is a config file's trainer section, its critics refused like any trainer's without them", () => {
    expect(trainConfigFromObject({ ...base, later_trainer: { num_turns: 1 } }, "c.yaml")).toMatchObject({ trainer: "later_trainer", trainerConfig: { num_turns: 1 } });
    expect(() => trainConfigFromObject({ ...base, critic_model: { name: "c" }, later_trainer: {} }, "c.yaml")).toThrow(/critic_model is for actor-critic trainers \(iac, maac, marlhf, marlhf_iter\); later_trainer has no critic/);
    expect(() => trainConfigFromObject({ ...base, later_trainer: {}, magrpo: {} }, "c.yaml")).toThrow(/several trainer sections \(magrpo, later_trainer\)/);
  });

  it("is an rlAlgorithm as soon as its entry has an RL back-end", () => {
    registerTrainer({ ...magrpo, section: "later_rl", configName: "LaterRLConfig", rlBackEnd: magrpo.rlBackEnd });
    expect(rlAlgorithms()).toContain("later_rl");
    expect(trainerDefinition("marlhf").config({ rl_algorithm: "later_rl" }, {})).toMatchObject({ rlAlgorithm: "later_rl" });
    expect(rlAlgorithms()).not.toContain("later_trainer");
  });
});
