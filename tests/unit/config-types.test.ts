// Each trainer config is declared once, by its field specs: its public type derives from them, so a field's type,
// doc comment and default cannot drift apart. These checks read the types with the TypeScript checker (every
// property of a config type must be declared by a field spec, with a doc comment) and at the type level (the
// inputs take CoMLRL's snake_case keys and aliases, and refuse what the builders refuse).
import path from "node:path";
import ts from "typescript";
import { describe, expect, expectTypeOf, it } from "vitest";
import type {
  ConfigInput,
  IACConfig,
  IACConfigInput,
  MAACConfigInput,
  MADPOConfig,
  MADPOConfigInput,
  MAGRPOConfig,
  MAGRPOConfigInput,
  MAGRPO_FIELDS,
  MARLHFConfig,
  MARLHFConfigInput,
  SnakeCase,
} from "../../src/config/index.js";

const INDEX = path.resolve(__dirname, "../../src/config/index.ts");

/** The public config types, and the members each may declare outside its field specs (what its builder derives). */
const CONFIG_TYPES: Record<string, readonly string[]> = {
  MAGRPOConfig: ["objectives"],
  MAREINFORCEConfig: ["objectives"],
  MAReMaxConfig: ["objectives"],
  MARLOOConfig: ["objectives"],
  CentralizedMAGRPOConfig: ["objectives"],
  ActorCriticConfig: ["objectives"],
  IACConfig: ["objectives"],
  MAACConfig: ["objectives"],
  MADPOConfig: [],
  MARLHFConfig: [],
  MADPOIterConfig: [],
  MARLHFIterConfig: [],
  IterativeFields: [],
  SamplingConfig: [],
  PlacementFields: [],
  EvalConfig: [],
  ReferenceKlConfig: [],
  RuntimeConfig: [],
};

describe("config types derive from their field specs", () => {
  const program = ts.createProgram([INDEX], { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, strict: true });
  const checker = program.getTypeChecker();
  const exported = new Map(checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(INDEX)!)!).map((s) => [s.name, s]));

  it.each(Object.entries(CONFIG_TYPES))("every member of %s is a documented field spec", (name, derived) => {
    const symbol = exported.get(name);
    expect(symbol, `${name} is exported from src/config`).toBeDefined();
    const type = checker.getDeclaredTypeOfSymbol(checker.getAliasedSymbol(symbol!));
    const members = checker.getPropertiesOfType(type);
    expect(members.length).toBeGreaterThan(0);
    for (const member of members) {
      const declaration = member.declarations?.[0];
      const bySpec = declaration !== undefined && ts.isPropertyAssignment(declaration);
      expect(bySpec || derived.includes(member.name), `${name}.${member.name} is declared by a field spec`).toBe(true);
      expect(ts.displayPartsToString(member.getDocumentationComment(checker)), `${name}.${member.name} has a doc comment`).not.toBe("");
    }
  });
});

describe("config types and inputs", () => {
  it("type each field as its spec produces it, and as the builder settles it", () => {
    expectTypeOf<MAGRPOConfig["numGenerations"]>().toEqualTypeOf<number>();
    expectTypeOf<MAGRPOConfig["trainBatchSize"]>().toEqualTypeOf<number>();
    expectTypeOf<MAGRPOConfigInput["trainBatchSize"]>().toEqualTypeOf<number | null | undefined>();
    expectTypeOf<IACConfig["criticLearningRate"]>().toEqualTypeOf<number>();
    expectTypeOf<MARLHFConfig["advantageMode"]>().toEqualTypeOf<"mean" | "raw" | "max" | "rloo">();
    expectTypeOf<MARLHFConfigInput["advantageMode"]>().toEqualTypeOf<"mean" | "raw" | "max" | "rloo" | null | undefined>();
  });

  it("spell keys as camelToSnake does", () => {
    expectTypeOf<SnakeCase<"comparatorApiMaxNPerRequest">>().toEqualTypeOf<"comparator_api_max_n_per_request">();
    expectTypeOf<SnakeCase<"topK">>().toEqualTypeOf<"top_k">();
    expectTypeOf<SnakeCase<"seed">>().toEqualTypeOf<"seed">();
  });

  it("take CoMLRL's snake_case keys and aliases, and refuse what the builders refuse", () => {
    expectTypeOf({ num_generations: 2, top_k: null, parallel_training: null, joint_mode: "align" as const, dtype: "bf16" as const }).toMatchTypeOf<MAGRPOConfigInput>();
    expectTypeOf({ rl_algorithm: "mareforce" as const, advantage_mode: null }).toMatchTypeOf<MARLHFConfigInput>();
    expectTypeOf({ critic_type: "q" as const, critic_learning_rate: null }).toMatchTypeOf<IACConfigInput>();
    expectTypeOf({ critic_learning_rate: null }).not.toMatchTypeOf<MAACConfigInput>();
    expectTypeOf({ joint_mode: "diagonal" as const }).not.toMatchTypeOf<MAGRPOConfigInput>();
    expectTypeOf<ConfigInput<typeof MAGRPO_FIELDS>>().toEqualTypeOf<MAGRPOConfigInput>();
  });

  it("leave MARLHF's RL-phase rollout fields out of MADPO's config", () => {
    expectTypeOf<Extract<keyof MARLHFConfig, "discount" | "earlyTerminationThreshold" | "advantageMode">>().toEqualTypeOf<"discount" | "earlyTerminationThreshold" | "advantageMode">();
    expectTypeOf<Extract<keyof MADPOConfig, "discount" | "earlyTerminationThreshold" | "externalPromptPassthrough" | "advantageNormalization" | "advantageMode">>().toEqualTypeOf<never>();
    expectTypeOf<Extract<keyof MADPOConfigInput, "advantage_mode" | "advantageMode">>().toEqualTypeOf<never>();
  });
});
