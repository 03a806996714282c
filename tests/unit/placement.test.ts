// The placement plan (spec §5.4): every module's device and lane from the algorithm's declaration, with the
// machine's facts given by hand, and the memory estimate made from that same plan.
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { iacConfig, maacConfig, magrpoConfig, marlhfConfig, rewardModelDeviceGiven, type CudaFacts } from "../../src/config/index.js";
import { checkMemoryPlan, estimateMemory, type MemoryPlan } from "../../src/config/memory-estimate.js";
import type { CausalLM } from "../../src/models/causal-lm.js";
import { iacModules } from "../../src/trainers/actor-critic/iac.js";
import { maacModules } from "../../src/trainers/actor-critic/maac.js";
import { plannedModels } from "../../src/trainers/memory-check.js";
import { actorsOnly, planPlacement, type MachineFacts, type ModuleDeclaration, type PlacementConfig } from "../../src/trainers/placement.js";

const noCuda: CudaFacts = { cudaAvailable: false, deviceCount: 0 };
const twoGpus: CudaFacts = { cudaAvailable: true, deviceCount: 2 };
const fourGpus: CudaFacts = { cudaAvailable: true, deviceCount: 4 };
/** One intra-op thread and no COMLRL_CPU_LANES: no CPU agent lanes unless a test asks for them. */
const on = (facts: CudaFacts, threads = 1): MachineFacts => ({ ...facts, threads, env: {} });
const ids = (n: number, id = "m") => Array<string>(n).fill(id);

/** The plan of the config's actors, with its references, and nothing else (MAGRPO's family). */
const placeActors = (config: PlacementConfig & { numAgents: number; referenceKlEnabled: boolean }, facts: CudaFacts, n = config.numAgents) =>
  planPlacement(config, on(facts), { modules: actorsOnly(config), actors: ids(n), localRank: 0 });

describe("actors and references", () => {
  it('"none" puts every actor on the first agent device and runs them in turn', () => {
    const config = magrpoConfig({ numAgents: 3, agentDevices: ["cuda:1", "cuda:2", "cuda:3"] });
    expect(placeActors(config, fourGpus)).toEqual({
      agentDevices: ["cuda:1", "cuda:1", "cuda:1"],
      referenceDevices: ["cuda:1", "cuda:1", "cuda:1"],
      criticDevices: [],
      rewardModel: null,
      updatesInTurn: false,
      lanes: 1,
      concurrent: false,
    });
  });

  it('"none" with auto devices takes one device', () => {
    expect(placeActors(magrpoConfig(), fourGpus).agentDevices).toEqual(["cuda:0", "cuda:0"]);
    expect(placeActors(magrpoConfig(), noCuda).agentDevices).toEqual(["cpu", "cpu"]);
  });

  it('"mp" gives one device per agent and runs them concurrently on distinct devices', () => {
    const config = magrpoConfig({ parallelTraining: "mp", agentDevices: ["cuda:0", "cuda:1"] });
    expect(placeActors(config, fourGpus)).toMatchObject({ agentDevices: ["cuda:0", "cuda:1"], referenceDevices: ["cuda:0", "cuda:1"], concurrent: true });
  });

  it('"mp" is not concurrent when all agents share a device or there is one agent', () => {
    expect(placeActors(magrpoConfig({ parallelTraining: "mp", agentDevices: "cuda:0" }), fourGpus).concurrent).toBe(false);
    expect(placeActors(magrpoConfig({ parallelTraining: "mp", agentDevices: ["cpu", "cpu"] }), noCuda).concurrent).toBe(false);
    const single = magrpoConfig({ parallelTraining: "mp", agentDevices: "auto", numAgents: 1 });
    expect(placeActors(single, fourGpus)).toMatchObject({ agentDevices: ["cuda:0"], referenceDevices: ["cuda:0"], concurrent: false });
  });

  it("places one actor per source given, whatever the config's count (the trainer's count wins; centralized: one)", () => {
    const config = magrpoConfig({ parallelTraining: "mp", agentDevices: "auto" });
    expect(placeActors(config, fourGpus, 3).agentDevices).toEqual(["cuda:0", "cuda:1", "cuda:2"]);
    expect(() => placeActors(magrpoConfig({ parallelTraining: "mp", agentDevices: ["cpu", "cpu"] }), noCuda, 3)).toThrow("agentDevices length (2) must be 1 or 3");
    expect(placeActors(magrpoConfig({ numAgents: 3, parallelTraining: "mp", agentDevices: ["cuda:2"] }), fourGpus, 1)).toMatchObject({ agentDevices: ["cuda:2"], referenceDevices: ["cuda:2"], concurrent: false });
  });

  it("explicit referenceDevices are honoured in both modes and must fit the actor count", () => {
    const none = magrpoConfig({ agentDevices: "cuda:0", referenceDevices: "cuda:1" });
    expect(placeActors(none, fourGpus).referenceDevices).toEqual(["cuda:1", "cuda:1"]);
    const mp = magrpoConfig({ parallelTraining: "mp", agentDevices: ["cuda:0", "cuda:1"], referenceDevices: ["cuda:2", "cuda:3"] });
    expect(placeActors(mp, fourGpus).referenceDevices).toEqual(["cuda:2", "cuda:3"]);
    const tooMany = magrpoConfig({ referenceDevices: ["cpu", "cpu", "cpu"] });
    expect(() => placeActors(tooMany, noCuda)).toThrow("referenceDevices length (3) must be 1 or 2");
  });
});

describe("critics", () => {
  it("per agent: one per critic on criticDevices under \"mp\" (default: the agents'), else on the agents' one device", () => {
    const mp = iacConfig({ parallelTraining: "mp", agentDevices: ["cuda:0", "cuda:1"], criticDevices: ["cuda:2", "cuda:3"] });
    expect(planPlacement(mp, on(fourGpus), { modules: iacModules(mp, ids(2, "c")), actors: ids(2), localRank: 0 }).criticDevices).toEqual(["cuda:2", "cuda:3"]);
    const mpDefault = { ...mp, criticDevices: null };
    expect(planPlacement(mpDefault, on(fourGpus), { modules: iacModules(mp, ids(2, "c")), actors: ids(2), localRank: 0 }).criticDevices).toEqual(["cuda:0", "cuda:1"]);
    const none = iacConfig({ agentDevices: "cuda:1", criticDevices: ["cuda:2", "cuda:3"] });
    expect(planPlacement(none, on(fourGpus), { modules: iacModules(none, ids(2, "c")), actors: ids(2), localRank: 0 }).criticDevices).toEqual(["cuda:1", "cuda:1"]);
    const heads = iacConfig({ useSeparateCritic: false });
    expect(planPlacement(heads, on(noCuda), { modules: iacModules(heads, []), actors: ids(2), localRank: 0 }).criticDevices).toEqual([]);
  });

  it("centralized: one, on criticDevices' one device under \"mp\", else agent 0's; two devices for it are refused", () => {
    const mp = maacConfig({ parallelTraining: "mp", agentDevices: ["cuda:1", "cuda:2"], criticDevices: "cuda:3" });
    expect(planPlacement(mp, on(fourGpus), { modules: maacModules(mp, "c"), actors: ids(2), localRank: 0 }).criticDevices).toEqual(["cuda:3"]);
    expect(planPlacement({ ...mp, criticDevices: null }, on(fourGpus), { modules: maacModules(mp, "c"), actors: ids(2), localRank: 0 }).criticDevices).toEqual(["cuda:1"]);
    expect(() => planPlacement({ ...mp, criticDevices: ["cuda:0", "cuda:3"] }, on(fourGpus), { modules: maacModules(mp, "c"), actors: ids(2), localRank: 0 })).toThrow(
      "criticDevices must name one device for the one centralized critic, got 2: cuda:0, cuda:3",
    );
  });

  it('under "ddp" the critics sit on the rank\'s own GPU', () => {
    const ddp = maacConfig({ parallelTraining: "ddp" });
    expect(planPlacement(ddp, on(fourGpus), { modules: maacModules(ddp, "c"), actors: ids(2), localRank: 3 }).criticDevices).toEqual(["cuda:3"]);
  });
});

describe("updates in turn and CPU agent lanes", () => {
  const cpu = magrpoConfig({ agentDevices: "cpu" });
  const model = {} as CausalLM;

  it("two CPU agents on two threads get a lane each, and update concurrently", () => {
    expect(planPlacement(cpu, on(noCuda, 2), { modules: actorsOnly(cpu), actors: ids(2), localRank: 0 })).toMatchObject({ lanes: 2, updatesInTurn: false, concurrent: true });
  });

  it("a centralized critic, or one critic model shared by the agents, makes the updates take turns on no lanes", () => {
    const maac = maacConfig({ agentDevices: "cpu" });
    expect(planPlacement(maac, on(noCuda, 2), { modules: maacModules(maac, "c"), actors: ids(2), localRank: 0 })).toMatchObject({ lanes: 1, updatesInTurn: true, concurrent: false });
    const iac = iacConfig({ agentDevices: "cpu" });
    expect(planPlacement(iac, on(noCuda, 2), { modules: iacModules(iac, [model, model]), actors: ids(2), localRank: 0 })).toMatchObject({ lanes: 1, updatesInTurn: true });
    expect(planPlacement(iac, on(noCuda, 2), { modules: iacModules(iac, ids(2, "c")), actors: ids(2), localRank: 0 })).toMatchObject({ lanes: 2, updatesInTurn: false });
  });

  it("a reference off the CPU (with the KL term on) leaves the agents without lanes; with it off it does not count", () => {
    const offCpu = magrpoConfig({ agentDevices: "cpu", referenceDevices: "cuda:0", referenceKlEnabled: true });
    expect(planPlacement(offCpu, on(twoGpus, 2), { modules: actorsOnly(offCpu), actors: ids(2), localRank: 0 }).lanes).toBe(1);
    expect(planPlacement(offCpu, on(twoGpus, 2), { modules: { ...actorsOnly(offCpu), references: false }, actors: ids(2), localRank: 0 }).lanes).toBe(2);
  });
});

describe("the reward model", () => {
  const rewardModel = (config: ReturnType<typeof marlhfConfig>): ModuleDeclaration => ({
    ...actorsOnly(config),
    rewardModel: { source: "rm", trainsBackbone: true, device: config.rewardModelDevice, deviceGiven: rewardModelDeviceGiven(config) },
  });
  const place = (config: ReturnType<typeof marlhfConfig>, facts: CudaFacts, localRank = 0) =>
    planPlacement(config, on(facts), { modules: rewardModel(config), actors: ids(2), localRank }).rewardModel;

  it("null = the trainer's device; the default falls back without CUDA, saying so; an explicit CUDA device does not", () => {
    expect(place(marlhfConfig({ rewardModelDevice: null }), noCuda)).toEqual({ device: "cpu", note: null });
    expect(place(marlhfConfig(), noCuda)).toEqual({ device: "cpu", note: expect.stringMatching(/CUDA is not available, so the default "cuda:0" falls back to the trainer's device \(cpu\)/) });
    expect(() => place(marlhfConfig({ rewardModelDevice: "cuda:0" }), noCuda)).toThrow(/rewardModelDevice asks for cuda:0 but CUDA is not available/);
    expect(place(marlhfConfig({ agentDevices: "cpu" }), twoGpus)).toEqual({ device: "cuda:0", note: null });
    expect(place(marlhfConfig({ rewardModelDevice: "cuda:1" }), twoGpus)?.device).toBe("cuda:1");
  });

  it('under "ddp" the default is each rank\'s own GPU, and a given GPU is read as every device field is', () => {
    expect(place(marlhfConfig({ parallelTraining: "ddp" }), twoGpus, 1)?.device).toBe("cuda:1");
    expect(place(marlhfConfig({ parallelTraining: "ddp", rewardModelDevice: "cuda" }), twoGpus, 1)?.device).toBe("cuda:1");
    expect(() => place(marlhfConfig({ parallelTraining: "ddp", rewardModelDevice: "cuda:0" }), twoGpus, 1)).toThrow(/rewardModelDevice asks for cuda:0 under parallelTraining "ddp"/);
  });

  it("is absent from a plan whose declaration has none", () => {
    expect(placeActors(magrpoConfig(), noCuda).rewardModel).toBeNull();
  });
});

describe("the memory estimate, from the plan", () => {
  const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-placement-"));
  const shaped = (name: string, hidden: number) => {
    const dir = path.join(scratch, name);
    mkdirSync(dir);
    writeFileSync(path.join(dir, "config.json"), JSON.stringify({ hidden_size: hidden, num_hidden_layers: 2, num_attention_heads: 4, vocab_size: 1000 }));
    return dir;
  };
  const actor = shaped("actor", 64);
  const critic = shaped("critic", 128);
  const rm = shaped("rm", 256);
  const budget = (models: MemoryPlan["models"]): MemoryPlan => ({ models, dtype: "float32", precision: "auto", numGenerations: 2, maxNewTokens: 8, promptTokens: 16, processBytes: 0 });

  it('under "ddp" local rank 1 on two GPUs, every model is estimated on cuda:1, not rank 0\'s cuda:0', () => {
    const ddp = iacConfig({ parallelTraining: "ddp", referenceKlEnabled: true });
    const modules = iacModules(ddp, [critic, critic]);
    const placement = planPlacement(ddp, on(twoGpus), { modules, actors: [actor, actor], localRank: 1 });
    const models = plannedModels({ actors: [actor, actor], modules, placement });
    expect(new Set(models.map((m) => m.device))).toEqual(new Set(["cuda:1"]));
    expect([...estimateMemory(budget(models)).keys()]).toEqual(["cuda:1"]);
  });

  it("counts the critics and the reward model, on their planned devices, beside the actors and references", () => {
    const mp = iacConfig({ parallelTraining: "mp", agentDevices: ["cpu", "cpu"], criticDevices: "cuda:1" });
    const modules: ModuleDeclaration = { ...iacModules(mp, [critic, critic]), rewardModel: { source: rm, trainsBackbone: false, device: "cuda:0", deviceGiven: true } };
    const placement = planPlacement(mp, on(twoGpus), { modules, actors: [actor, actor], localRank: 0 });
    const models = plannedModels({ actors: [actor, actor], modules, placement });
    expect(models.map(({ device, role, trained }) => [role, device, trained])).toEqual([
      ["actor", "cpu", true],
      ["actor", "cpu", true],
      ["critic", "cuda:1", true],
      ["critic", "cuda:1", true],
      ["reward model", "cuda:0", false],
    ]);
    const shares = estimateMemory(budget(models));
    expect(shares.get("cuda:1")!.lines[0]).toMatch(/^2 critics of 0\.\d+B parameters \(.*critic.*config\.json: hidden_size 128/);
    expect(shares.get("cuda:0")!.lines[0]).toMatch(/^1 reward model with a frozen backbone of .* \(weights\) = /);
  });

  it("refuses a run whose critics, not its actors, put a CPU over the limit", () => {
    const config = maacConfig({ agentDevices: "cpu" });
    const big = shaped("big-critic", 4096);
    const plan = (modules: ModuleDeclaration) => {
      const placement = planPlacement(config, on(noCuda), { modules, actors: [actor, actor], localRank: 0 });
      return budget(plannedModels({ actors: [actor, actor], modules, placement }));
    };
    const limit = 2e8;
    expect(() => checkMemoryPlan(plan(actorsOnly(config)), limit)).not.toThrow();
    expect(() => checkMemoryPlan(plan(maacModules(config, big)), limit)).toThrow(/1 critic of 0\.\d+B parameters \(.*big-critic/);
  });
});
