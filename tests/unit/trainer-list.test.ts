// The trainer list lives in the registry (src/trainers/online-trainers.ts and builtins.ts register every trainer):
// the places that once spelled it — the CLI, the config-file reader, the docs generator, MARLHF's RL phase, the
// exact-resume suite's table, the lifecycle's evaluation families — read the registry, and this test keeps them so. (src/index.ts and src/config/index.ts
// export the classes and configs by name: that is the API, not a list the code reads.) A file may name a trainer or a few
// (a variant, an example); naming LIST_SIZE or more in its code is a list, which belongs in the registry.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { trainerDefinitions } from "../../src/trainers/builtins.js";

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const LIST_SIZE = 4;

/** The places that read the registry instead of naming its trainers. */
const READERS = [
  "src/cli/train.ts",
  "src/cli/config-file.ts",
  "scripts/docs/generate.mjs",
  "src/trainers/preference/rl-phase.ts",
  "src/trainers/preference/marlhf.ts",
  "src/trainers/preference/iterative/marlhf-iter.ts",
  "src/trainers/rl-back-end.ts",
  "tests/support/checkpoint-run.ts",
  "tests/e2e/lifecycle.test.ts",
];

/** The source without its comments (a comment may name trainers: it explains, it does not list). */
function code(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
}

/**
 * The registered trainers `source` names: by section as a string, or in code by class (with or without "Trainer") or
 * by config type; a label ("MAGRPO") is not a list's entry.
 */
function trainersNamed(source: string): string[] {
  return trainerDefinitions()
    .filter(({ section, trainer, configName }) => {
      const className = trainer.name.replace(/Trainer$/, "");
      return new RegExp(`["'\`]${section}["'\`]`).test(source) || new RegExp(`(?<![\\w$"'\`])(?:${className}(?:Trainer)?|${configName})(?![\\w$])`).test(source);
    })
    .map(({ section }) => section);
}

describe("the trainer list", () => {
  it("is found by this test where it is spelled (the registry's own files, a list in a string)", () => {
    expect(trainersNamed(code(readFileSync(path.join(root, "src/trainers/online-trainers.ts"), "utf8"))).length).toBeGreaterThanOrEqual(LIST_SIZE);
    expect(trainersNamed(code('const KINDS = ["magrpo", "iac", "maac", "madpo"]; // MARLHF'))).toEqual(["magrpo", "iac", "maac", "madpo"]);
    expect(trainersNamed(code("const CONFIGS = { MAGRPOConfig: 1, IACConfig: 2, MADPOConfig: 3, MARLHFConfig: 4 };"))).toEqual(["magrpo", "iac", "madpo", "marlhf"]);
    expect(trainersNamed(code('/* MAGRPO, IAC, MAAC, MADPO */ const x = "MAGRPO"; // MARLHF'))).toEqual([]);
  });

  it.each(READERS)("is not spelled again in %s", (file) => {
    const named = trainersNamed(code(readFileSync(path.join(root, file), "utf8")));
    expect(named.length, `${file} names ${named.join(", ")}: read the registry (src/trainers/registry.ts) instead`).toBeLessThan(LIST_SIZE);
  });
});
