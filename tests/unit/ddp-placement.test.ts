// Data-parallel placement and the NCCL device each rank offers, with the machine's CUDA facts and the rank's
// LOCAL_RANK given by hand: every rank of a "ddp" job on a GPU node sits on its own GPU, and a rank that shares one
// (more ranks than GPUs) offers no NCCL device, so that the job's collectives agree on Gloo.
import { describe, expect, it } from "vitest";
import { canonicalDevice, magrpoConfig, rankDevice, type CudaFacts, type MAGRPOConfig } from "../../src/config/index.js";
import { ncclDeviceFor } from "../../src/distributed/context.js";
import { localRankOf } from "../../src/distributed/environment.js";
import { actorsOnly, planPlacement } from "../../src/trainers/placement.js";

const noCuda: CudaFacts = { cudaAvailable: false, deviceCount: 0 };
const oneGpu: CudaFacts = { cudaAvailable: true, deviceCount: 1 };
const eightGpus: CudaFacts = { cudaAvailable: true, deviceCount: 8 };

/** The plan of `actors` actors (and their references) on `facts`, with one intra-op thread (no CPU agent lanes). */
const place = (config: MAGRPOConfig, facts: CudaFacts, actors: number, localRank = 0) =>
  planPlacement(config, { ...facts, threads: 1, env: {} }, { modules: actorsOnly(config), actors: Array<string>(actors).fill("m"), localRank });

describe('"ddp" placement', () => {
  const ddp = magrpoConfig({ parallelTraining: "ddp" });

  it("auto puts each rank's models on the GPU of its local rank", () => {
    for (const localRank of [0, 1, 5, 7]) {
      expect(place(ddp, eightGpus, 2, localRank)).toMatchObject({
        agentDevices: [`cuda:${localRank}`, `cuda:${localRank}`],
        referenceDevices: [`cuda:${localRank}`, `cuda:${localRank}`],
        concurrent: false,
      });
    }
  });

  it("ranks past the GPU count share the GPUs round-robin; no CUDA means the CPU", () => {
    expect(place(ddp, oneGpu, 2, 1).agentDevices).toEqual(["cuda:0", "cuda:0"]);
    expect(rankDevice(9, eightGpus)).toBe("cuda:1");
    expect(place(ddp, noCuda, 2, 3).agentDevices).toEqual(["cpu", "cpu"]);
  });

  it('an index-less "cuda" is each rank\'s own GPU, for agents and references alike (a single-GPU config copied)', () => {
    for (const localRank of [0, 3, 7]) {
      const placed = place(magrpoConfig({ parallelTraining: "ddp", agentDevices: "cuda", referenceDevices: ["cuda"] }), eightGpus, 2, localRank);
      expect(placed.agentDevices).toEqual([`cuda:${localRank}`, `cuda:${localRank}`]);
      expect(placed.referenceDevices).toEqual([`cuda:${localRank}`, `cuda:${localRank}`]);
    }
    expect(place(magrpoConfig({ parallelTraining: "ddp", agentDevices: "cuda" }), oneGpu, 1, 1).agentDevices).toEqual(["cuda:0"]);
    expect(() => place(magrpoConfig({ parallelTraining: "ddp", agentDevices: "cuda" }), noCuda, 1, 0)).toThrow(/agentDevices asks for cuda:0 but CUDA is not available/);
  });

  it("an explicit GPU other than the rank's own is refused where the rank has one; the CPU, and the rank's own GPU, are kept", () => {
    const onGpu0 = magrpoConfig({ parallelTraining: "ddp", agentDevices: "cuda:0" });
    expect(() => place(onGpu0, eightGpus, 2, 3)).toThrow(/agentDevices asks for cuda:0 under parallelTraining "ddp", which puts every rank on it \(rank 3's own GPU is cuda:3\)/);
    expect(place(onGpu0, eightGpus, 2, 0).agentDevices).toEqual(["cuda:0", "cuda:0"]);
    // Two ranks on one GPU share it on purpose: rank 1 has no GPU of its own.
    expect(place(onGpu0, oneGpu, 2, 1).agentDevices).toEqual(["cuda:0", "cuda:0"]);
    expect(place(magrpoConfig({ parallelTraining: "ddp", agentDevices: "cpu" }), eightGpus, 1, 3).agentDevices).toEqual(["cpu"]);
    expect(() => place(magrpoConfig({ parallelTraining: "ddp", referenceDevices: "cuda:1" }), eightGpus, 1, 2)).toThrow(/referenceDevices asks for cuda:1 under parallelTraining "ddp"/);
  });

  it('outside "ddp" an index-less "cuda" is cuda:0, as in torch', () => {
    expect(place(magrpoConfig({ agentDevices: "cuda" }), eightGpus, 2, 3).agentDevices).toEqual(["cuda:0", "cuda:0"]);
    expect(place(magrpoConfig({ parallelTraining: "mp", agentDevices: ["cuda", "cuda:1"] }), eightGpus, 2).agentDevices).toEqual(["cuda:0", "cuda:1"]);
  });

  it('the local rank matters only under "ddp"', () => {
    expect(place(magrpoConfig(), eightGpus, 2, 5).agentDevices).toEqual(["cuda:0", "cuda:0"]);
  });

  it("the local rank comes from the given context, else LOCAL_RANK, else RANK, else 0", () => {
    const job = { RANK: "3", WORLD_SIZE: "4", MASTER_ADDR: "127.0.0.1", MASTER_PORT: "29500" };
    expect(localRankOf({ localRank: 2 }, job)).toBe(2);
    expect(localRankOf(null, { ...job, LOCAL_RANK: "1" })).toBe(1);
    expect(localRankOf(undefined, job)).toBe(3);
    expect(localRankOf(null, {})).toBe(0);
  });
});

describe("the NCCL device a rank offers", () => {
  it("is its own GPU when the build has NCCL and that GPU exists", () => {
    expect(ncclDeviceFor(0, eightGpus, true)).toBe(0);
    expect(ncclDeviceFor(7, eightGpus, true)).toBe(7);
  });

  it("is none for a rank that shares a GPU, has none, or runs a build without NCCL", () => {
    // Two ranks on one GPU: rank 1 shares cuda:0 with rank 0 and offers nothing, so the job reduces on Gloo.
    expect(ncclDeviceFor(1, oneGpu, true)).toBeNull();
    expect(ncclDeviceFor(0, noCuda, true)).toBeNull();
    expect(ncclDeviceFor(0, eightGpus, false)).toBeNull();
  });
});

describe("canonicalDevice", () => {
  it('spells "cuda" as cuda:0, and every device one way', () => {
    expect(canonicalDevice("cuda")).toBe("cuda:0");
    expect(canonicalDevice(" CUDA ")).toBe("cuda:0");
    expect(canonicalDevice("Cuda:1")).toBe("cuda:1");
    expect(canonicalDevice("cpu")).toBe("cpu");
  });

  it("hands back what is no device, for the native side to refuse by name", () => {
    expect(canonicalDevice("tpu")).toBe("tpu");
  });
});
