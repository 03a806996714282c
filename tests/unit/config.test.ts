// MAGRPO-family configs: CoMLRL's defaults and constraints (spec §2.1, test_config_constraints.py), our additions,
// and the field machinery's key handling (camelCase / snake_case, unknown keys, doubled spellings).
import { adamW } from "../../src/trainers/options.js";
import { trainerDefinition } from "../../src/trainers/builtins.js";
import { describe, expect, it } from "vitest";
import {
  ConfigError,
  MADPO_FIELDS,
  centralizedMagrpoConfig,
  magrpoConfig,
  mareinforceConfig,
  maremaxConfig,
  marlooConfig,
  marlhfConfig,
  type MAGRPOConfig,
} from "../../src/config/index.js";
import { buildConfig, fieldValue, int } from "../../src/config/fields.js";
import { illTyped } from "../support/ill-typed.js";

/** Runs fn and returns the ConfigError it throws. */
function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error("expected a ConfigError");
}

describe("MAGRPOConfig defaults", () => {
  it("are CoMLRL's, plus ours", () => {
    const expected: MAGRPOConfig = {
      numTrainEpochs: 20,
      agentLearningRate: 5e-6,
      loggingSteps: 50,
      numAgents: 2,
      parallelTraining: "none",
      agentDevices: null,
      numGenerations: 4,
      maxNewTokens: 256,
      temperature: 0.6,
      topP: 0.6,
      topK: 50,
      maxPromptTokens: null,
      promptOverflow: "truncate",
      numTurns: 2,
      discount: 1.0,
      jointMode: "aligned",
      earlyTerminationThreshold: -0.2,
      externalPromptPassthrough: false,
      evalInterval: 16,
      evalNumSamples: 4,
      rolloutBufferSize: 2,
      trainBatchSize: 2,
      advantageNormalization: true,
      advantageMode: "mean",
      referenceKlEnabled: false,
      referenceKlCoef: 0.1,
      referenceDevices: null,
      seed: 0,
      dtype: "float32",
      precision: "auto",
      maxGradNorm: null,
      weightDecay: 0.01,
      adamBetas: [0.9, 0.999],
      adamEps: 1e-8,
      gradientCheckpointing: false,
      rewardTimeoutSeconds: 600,
      // (ours) the objective fields (tests/unit/config-objectives.test.ts): CoMLRL's loss for every agent.
      lossType: "comlrl",
      importanceSamplingLevel: "token",
      numIterations: 1,
      epsilon: 0.2,
      epsilonHigh: null,
      delta: null,
      klEstimator: "k3",
      klIn: "reward",
      useBiasCorrectionKl: true,
      entropyCoef: 0,
      scaleRewards: null,
      maskTruncatedCompletions: false,
      zeroVarianceFilter: null,
      advantageGrouping: "joint",
      objectives: magrpoConfig().objectives,
      tokenAccounting: "exact",
      stepInBackward: true,
    };
    expect(magrpoConfig()).toEqual(expected);
    expect(magrpoConfig({})).toEqual(expected);
  });

  it("returns a frozen plain object", () => {
    const config = magrpoConfig({ agentDevices: ["cpu"] });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.agentDevices)).toBe(true);
    expect(Object.getPrototypeOf(config)).toBe(Object.prototype);
  });

  it("trainBatchSize defaults to rolloutBufferSize, and null means the same", () => {
    expect(magrpoConfig({ rolloutBufferSize: 8 }).trainBatchSize).toBe(8);
    expect(magrpoConfig({ rolloutBufferSize: 8, trainBatchSize: null }).trainBatchSize).toBe(8);
    expect(magrpoConfig({ rolloutBufferSize: 8, trainBatchSize: 3 }).trainBatchSize).toBe(3);
  });

  it("treats an undefined field as not given", () => {
    expect(magrpoConfig({ topK: undefined, numTurns: undefined })).toEqual(magrpoConfig());
  });
});

describe("MAGRPOConfig bounds", () => {
  // [field, values to reject, a value on the accepted side of the bound, the reason in the message]
  const bounded: Array<[keyof MAGRPOConfig, number[], number, string]> = [
    // Bounds from CoMLRL.
    ["numTrainEpochs", [0, -1], 1, "must be ≥ 1"],
    ["loggingSteps", [0, -1], 1, "must be ≥ 1"],
    ["numAgents", [0, -1], 1, "must be ≥ 1"],
    ["numGenerations", [1, 0, -1], 2, "must be ≥ 2"],
    ["numTurns", [0, -1], 1, "must be ≥ 1"],
    ["evalInterval", [-1], 0, "must be ≥ 0"],
    ["evalNumSamples", [-1], 0, "must be ≥ 0"],
    ["rolloutBufferSize", [0, -1], 1, "must be ≥ 1"],
    ["trainBatchSize", [0, -1], 1, "must be ≥ 1"],
    ["referenceKlCoef", [-1, -0.01], 0, "must be ≥ 0"],
    // Ours.
    ["maxNewTokens", [0, -1], 1, "must be ≥ 1"],
    ["temperature", [0, -1], 0.01, "must be > 0"],
    ["topP", [0, -1], 1, "must be > 0"],
    ["topK", [-1, -5], 0, "must be ≥ 0"], // 0: no top-k filter, as top_k=0 in transformers
    ["seed", [-1], 0, "must be ≥ 0"],
    ["maxGradNorm", [0, -1], 0.5, "must be > 0"],
    ["agentLearningRate", [-1, -1e-6], 0, "must be ≥ 0"],
    ["discount", [-1, -0.1], 0, "must be ≥ 0"],
  ];

  for (const [field, rejected, accepted, reason] of bounded) {
    it(`${field} rejects ${rejected.join(", ")} and accepts ${accepted}`, () => {
      for (const value of rejected) {
        const error = configError(() => magrpoConfig({ [field]: value }));
        expect(error.message).toBe(`MAGRPOConfig.${field} ${reason}, got ${value}`);
        expect(error.field).toBe(field);
      }
      expect(magrpoConfig({ [field]: accepted })[field]).toBe(accepted);
    });
  }

  it("upper bounds: topP ≤ 1, discount ≤ 1", () => {
    expect(() => magrpoConfig({ topP: 1.01 })).toThrow("MAGRPOConfig.topP must be ≤ 1, got 1.01");
    expect(() => magrpoConfig({ discount: 1.5 })).toThrow("MAGRPOConfig.discount must be ≤ 1, got 1.5");
  });

  it("integer fields reject fractions and numeric strings", () => {
    expect(() => magrpoConfig({ numGenerations: 2.5 })).toThrow("MAGRPOConfig.numGenerations must be an integer, got 2.5");
    expect(() => magrpoConfig({ num_generations: illTyped("4") })).toThrow(
      'MAGRPOConfig.numGenerations (num_generations) must be an integer, got "4"',
    );
  });

  it("other types are checked too", () => {
    expect(() => magrpoConfig({ temperature: Number.NaN })).toThrow("MAGRPOConfig.temperature must be a finite number");
    expect(() => magrpoConfig({ advantageNormalization: illTyped("yes") })).toThrow(
      "MAGRPOConfig.advantageNormalization must be true or false",
    );
    expect(() => magrpoConfig({ numTurns: illTyped(null) })).toThrow("MAGRPOConfig.numTurns must be an integer, got null");
  });

  it("names the snake_case key too when the user spelled the field that way", () => {
    expect(() => magrpoConfig({ num_generations: 1 })).toThrow(
      "MAGRPOConfig.numGenerations (num_generations) must be ≥ 2, got 1",
    );
  });

  it("prefixes the source when one is given", () => {
    expect(() => magrpoConfig({ numTurns: 0 }, { source: "runs/a.json" })).toThrow(
      "runs/a.json: MAGRPOConfig.numTurns must be ≥ 1, got 0",
    );
  });

  it("nullable fields accept null", () => {
    expect(magrpoConfig({ topK: null }).topK).toBeNull();
    expect(magrpoConfig({ earlyTerminationThreshold: null }).earlyTerminationThreshold).toBeNull();
    expect(magrpoConfig({ earlyTerminationThreshold: 5 }).earlyTerminationThreshold).toBe(5);
    expect(magrpoConfig({ maxGradNorm: 1 }).maxGradNorm).toBe(1);
  });
});

describe("MAGRPOConfig enums", () => {
  it("parallelTraining is normalised: case, blanks, and null/'null' mean none", () => {
    for (const value of ["none", "NONE", " None ", "null", "Null", null]) {
      expect(magrpoConfig({ parallelTraining: illTyped(value) }).parallelTraining).toBe("none");
    }
    expect(magrpoConfig({ parallelTraining: illTyped(" MP "), agentDevices: "cpu" }).parallelTraining).toBe("mp");
  });

  it('parallelTraining rejects "invalid" and the removed "auto", and takes our data-parallel "ddp"', () => {
    for (const value of ["invalid", "auto"]) {
      expect(() => magrpoConfig({ parallelTraining: illTyped(value) })).toThrow(
        `MAGRPOConfig.parallelTraining must be one of "none", "mp", "ddp", got "${value}"`,
      );
    }
    expect(magrpoConfig({ parallelTraining: "ddp" }).parallelTraining).toBe("ddp");
  });

  it("mp requires agentDevices", () => {
    const error = configError(() => magrpoConfig({ parallelTraining: "mp" }));
    expect(error.message).toMatch(/^MAGRPOConfig\.agentDevices must be set when parallelTraining is "mp"/);
    expect(error.field).toBe("agentDevices");
    expect(magrpoConfig({ parallelTraining: "mp", agentDevices: ["cuda:0", "cuda:1"] }).agentDevices).toEqual(["cuda:0", "cuda:1"]);
    expect(magrpoConfig({ parallelTraining: "mp", agentDevices: "auto" }).agentDevices).toBe("auto");
  });

  it("jointMode accepts CoMLRL's aliases", () => {
    const cases: Array<[string, string]> = [
      ["aligned", "aligned"],
      ["align", "aligned"],
      ["Aligned", "aligned"],
      ["cross", "cross"],
      ["crossed", "cross"],
    ];
    for (const [given, expected] of cases) expect(magrpoConfig({ jointMode: illTyped(given) }).jointMode).toBe(expected);
    expect(() => magrpoConfig({ jointMode: illTyped("diagonal") })).toThrow(
      'MAGRPOConfig.jointMode must be one of "aligned", "cross", got "diagonal"',
    );
  });

  it("advantageMode and dtype are checked", () => {
    expect(() => magrpoConfig({ advantageMode: illTyped("median") })).toThrow("MAGRPOConfig.advantageMode must be one of");
    expect(magrpoConfig({ dtype: "bf16" }).dtype).toBe("bfloat16");
    expect(() => magrpoConfig({ dtype: illTyped("float16") })).toThrow('MAGRPOConfig.dtype must be one of "float32", "bfloat16"');
  });

  it("tokenAccounting is exact or comlrl, comlrl only with CoMLRL's objective and the MAGRPO family", () => {
    expect(magrpoConfig({ tokenAccounting: "comlrl" }).tokenAccounting).toBe("comlrl");
    expect(magrpoConfig({ token_accounting: "comlrl" }).tokenAccounting).toBe("comlrl");
    expect(() => magrpoConfig({ tokenAccounting: illTyped("trl") })).toThrow('MAGRPOConfig.tokenAccounting must be one of "exact", "comlrl", got "trl"');
    const objective = configError(() => magrpoConfig({ tokenAccounting: "comlrl", lossType: "dapo" }));
    expect(objective.field).toBe("tokenAccounting");
    expect(objective.message).toContain('lossType "dapo" needs tokenAccounting "exact"');
    expect(() => magrpoConfig({ tokenAccounting: "comlrl", maskTruncatedCompletions: true })).toThrow(/MAGRPOConfig\.tokenAccounting "comlrl" scores CoMLRL's rows, which maskTruncatedCompletions cannot tell truncated/);
    expect(marlhfConfig({ tokenAccounting: "comlrl" }).tokenAccounting).toBe("comlrl");
    const backEnd = configError(() => trainerDefinition("marlhf").config({ tokenAccounting: "comlrl", rlAlgorithm: "iac" }, {}));
    expect(backEnd.field).toBe("tokenAccounting");
    expect(backEnd.message).toContain('tokenAccounting has no effect with rlAlgorithm "iac", whose learner has no tokenAccounting: leave it at "exact"');
  });

  it("precision is auto, bf16-mixed or pure-bf16, and reaches every optimizer a trainer makes", () => {
    expect(magrpoConfig({ precision: "bf16-mixed" }).precision).toBe("bf16-mixed");
    expect(adamW(magrpoConfig({ precision: "pure-bf16" }), 1e-5)).toMatchObject({ lr: 1e-5, precision: "pure-bf16" });
    expect(() => magrpoConfig({ precision: illTyped("bf16") })).toThrow(/MAGRPOConfig\.precision must be one of "auto", "bf16-mixed", "pure-bf16"/);
  });

  it("device specs are validated at config time", () => {
    expect(magrpoConfig({ agentDevices: " CUDA:1 " }).agentDevices).toBe("cuda:1");
    // Index-less "cuda" is kept as written: under ddp it is each rank's own GPU (tests/unit/ddp-placement.test.ts).
    expect(magrpoConfig({ agentDevices: " CUDA" }).agentDevices).toBe("cuda");
    expect(magrpoConfig({ agentDevices: "Cuda:1" }).agentDevices).toBe("cuda:1");
    expect(() => magrpoConfig({ agentDevices: "gpu0" })).toThrow('MAGRPOConfig.agentDevices must name devices as "cpu", "cuda" or "cuda:N"');
    expect(() => magrpoConfig({ referenceDevices: [] })).toThrow("MAGRPOConfig.referenceDevices must not be an empty list");
    expect(() => magrpoConfig({ agentDevices: ["cpu", "auto"] })).toThrow("MAGRPOConfig.agentDevices must name devices");
    expect(() => magrpoConfig({ agentDevices: illTyped(0) })).toThrow("MAGRPOConfig.agentDevices must be a device string");
  });
});

describe("keys", () => {
  it("fieldValue reads one field as the builder would: either spelling, its default, undefined when invalid", () => {
    expect(fieldValue(MADPO_FIELDS, { collaborationMode: " Centralized " }, "collaborationMode")).toBe("centralized");
    expect(fieldValue(MADPO_FIELDS, { collaboration_mode: "centralized" }, "collaborationMode")).toBe("centralized");
    expect(fieldValue(MADPO_FIELDS, { numAgents: 3 }, "collaborationMode")).toBe("decentralized");
    expect(fieldValue(MADPO_FIELDS, undefined, "collaborationMode")).toBe("decentralized");
    expect(fieldValue(MADPO_FIELDS, { collaborationMode: "both" }, "collaborationMode")).toBeUndefined();
  });

  it("a built config builds again to itself (trainers and config files pass built configs back in)", () => {
    const built = magrpoConfig({ lossType: "dapo", epsilonHigh: 0.28 });
    expect(magrpoConfig(built)).toEqual(built);
    expect(centralizedMagrpoConfig(centralizedMagrpoConfig({}))).toEqual(centralizedMagrpoConfig({}));
    const contradicted = { ...built, objectives: [] };
    expect(configError(() => magrpoConfig(contradicted)).field).toBe("objectives");
  });

  it("snake_case and camelCase spellings give the same config", () => {
    const snake = magrpoConfig({
      num_train_epochs: 3,
      agent_learning_rate: 1e-5,
      top_p: 0.9,
      top_k: null,
      train_batch_size: 1,
      early_termination_threshold: null,
      parallel_training: "mp",
      agent_devices: ["cpu", "cpu"],
      reference_kl_enabled: true,
      max_grad_norm: 1,
    });
    const camel = magrpoConfig({
      numTrainEpochs: 3,
      agentLearningRate: 1e-5,
      topP: 0.9,
      topK: null,
      trainBatchSize: 1,
      earlyTerminationThreshold: null,
      parallelTraining: "mp",
      agentDevices: ["cpu", "cpu"],
      referenceKlEnabled: true,
      maxGradNorm: 1,
    });
    expect(snake).toEqual(camel);
    expect(camel.agentLearningRate).toBe(1e-5);
  });

  it("rejects both spellings of one field", () => {
    const error = configError(() => magrpoConfig({ topP: 0.5, top_p: 0.5 }));
    expect(error.message).toBe('MAGRPOConfig.topP is given twice, as "topP" and "top_p"; keep one');
    expect(error.field).toBe("topP");
  });

  it("rejects unknown keys and suggests the closest field in the user's spelling", () => {
    const cases: Array<[string, string]> = [
      ["num_generation", "num_generations"],
      ["numGeneration", "numGenerations"],
      ["agent_learning_rat", "agent_learning_rate"],
      ["learning_rate", "agent_learning_rate"],
      ["termination_threshold", "early_termination_threshold"],
      ["topp", "topP"],
    ];
    for (const [key, guess] of cases) {
      const error = configError(() => magrpoConfig({ [key]: 1 }));
      expect(error.message).toBe(`MAGRPOConfig has no field "${key}" (did you mean "${guess}"?)`);
      expect(error.field).toBe(key);
    }
  });

  it("refuses a CoMLRL field comlrl does not take with the reason, in either spelling and at any value", () => {
    for (const [key, value] of [["evalBatchSize", 1], ["eval_batch_size", 8]] as const) {
      const error = configError(() => magrpoConfig({ [key]: value }));
      const spelled = key === "evalBatchSize" ? "evalBatchSize" : "evalBatchSize (eval_batch_size)";
      expect(error.message).toBe(`MAGRPOConfig.${spelled} is not supported: evaluation runs its items one at a time, as CoMLRL 1.4.3 does with its default of 1; remove the field`);
      expect(error.field).toBe("evalBatchSize");
    }
  });

  it("names every unknown key and suggests nothing when nothing is close", () => {
    expect(() => magrpoConfig(illTyped({ wandb_project: "x", numGeneration: 4 }))).toThrow(
      'MAGRPOConfig has no field "wandb_project", "numGeneration" (did you mean "numGenerations"?)',
    );
  });

  it("only the exact snake_case twin maps to a field", () => {
    expect(() => magrpoConfig(illTyped({ Top_P: 0.5 }))).toThrow('MAGRPOConfig has no field "Top_P"');
    expect(() => magrpoConfig(illTyped({ toString: 1 }))).toThrow('MAGRPOConfig has no field "toString"');
    expect(() => magrpoConfig(JSON.parse('{"__proto__": {"numTurns": 1}}'))).toThrow('has no field "__proto__"');
  });

  it("rejects input that is not an object", () => {
    expect(() => magrpoConfig(illTyped([]))).toThrow("MAGRPOConfig must be built from an object of fields, got []");
    expect(() => magrpoConfig(illTyped(null))).toThrow("MAGRPOConfig must be built from an object of fields, got null");
  });

  it("a field without a default is required", () => {
    expect(() => buildConfig({ steps: int({ min: 1 }) }, {}, { configName: "T" })).toThrow("T.steps is required");
    expect(buildConfig({ steps: int({ min: 1 }) }, { steps: 3 }, { configName: "T" })).toEqual({ steps: 3 });
  });
});

describe("MAGRPO variants", () => {
  it("the REINFORCE / ReMax / RLOO configs differ only in advantageMode", () => {
    const base = magrpoConfig();
    expect(mareinforceConfig()).toEqual({ ...base, advantageMode: "raw" });
    expect(maremaxConfig()).toEqual({ ...base, advantageMode: "max" });
    expect(marlooConfig()).toEqual({ ...base, advantageMode: "rloo" });
    expect(marlooConfig({ advantageMode: "mean" }).advantageMode).toBe("mean");
  });

  it("name their own config in errors", () => {
    expect(() => mareinforceConfig({ numGenerations: 1 })).toThrow("MAREINFORCEConfig.numGenerations must be ≥ 2, got 1");
    expect(() => maremaxConfig({ numGenerations: 1 })).toThrow("MAReMaxConfig.numGenerations");
    expect(() => marlooConfig({ numGenerations: 1 })).toThrow("MARLOOConfig.numGenerations");
  });

  it("centralized MAGRPO defaults to one turn and centralized collaboration", () => {
    const config = centralizedMagrpoConfig();
    expect(config).toEqual({ ...magrpoConfig(), numTurns: 1, collaborationMode: "centralized" });
    expect(magrpoConfig().numTurns).toBe(2);
    expect(centralizedMagrpoConfig({ num_turns: 1, collaboration_mode: "centralized" }).numTurns).toBe(1);
  });

  it("centralized MAGRPO rejects more than one turn", () => {
    const error = configError(() => centralizedMagrpoConfig({ numTurns: 2 }));
    expect(error.message).toContain("CentralizedMAGRPOConfig.numTurns");
    expect(error.message).toContain("num_turns=1");
    expect(() => centralizedMagrpoConfig({ numTurns: 0 })).toThrow("num_turns=1");
  });

  it("centralized MAGRPO requires centralized collaboration", () => {
    expect(() => centralizedMagrpoConfig({ collaborationMode: illTyped("decentralized") })).toThrow(
      'CentralizedMAGRPOConfig.collaborationMode must be "centralized": CentralizedMAGRPOConfig requires centralized collaboration, got "decentralized"',
    );
  });

  it("collaborationMode is not a field of the decentralized configs", () => {
    expect(() => magrpoConfig(illTyped({ collaborationMode: "centralized" }))).toThrow('MAGRPOConfig has no field "collaborationMode"');
  });
});
