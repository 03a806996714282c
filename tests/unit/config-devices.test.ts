// Device resolution (spec §5.4), with the machine's CUDA facts given by hand; placement.test.ts plans from it.
import { describe, expect, it } from "vitest";
import { ConfigError, resolveDevices, resolveSingleDevice } from "../../src/config/index.js";
import type { CudaFacts, DeviceSpec } from "../../src/config/index.js";

const noCuda: CudaFacts = { cudaAvailable: false, deviceCount: 0 };
const oneGpu: CudaFacts = { cudaAvailable: true, deviceCount: 1 };
const fourGpus: CudaFacts = { cudaAvailable: true, deviceCount: 4 };

describe("resolveDevices", () => {
  const table: Array<[string, DeviceSpec | null, number, CudaFacts, string[]]> = [
    ["auto without CUDA ⇒ cpu for all", null, 2, noCuda, ["cpu", "cpu"]],
    ['"auto" without CUDA ⇒ cpu for all', "auto", 3, noCuda, ["cpu", "cpu", "cpu"]],
    ["auto with fewer GPUs than models ⇒ all on cuda:0", null, 2, oneGpu, ["cuda:0", "cuda:0"]],
    ["auto with enough GPUs ⇒ one each", "auto", 3, fourGpus, ["cuda:0", "cuda:1", "cuda:2"]],
    ["a string ⇒ that device for all", "cuda:1", 3, fourGpus, ["cuda:1", "cuda:1", "cuda:1"]],
    ['"cuda" means cuda:0', "cuda", 2, oneGpu, ["cuda:0", "cuda:0"]],
    ["cpu works without CUDA", "cpu", 2, noCuda, ["cpu", "cpu"]],
    ["a list of 1 is broadcast", ["cuda:3"], 2, fourGpus, ["cuda:3", "cuda:3"]],
    ["a list of n gives one each", ["cuda:1", "cpu"], 2, fourGpus, ["cuda:1", "cpu"]],
    ["blanks and case are forgiven", [" CPU ", "Cuda:0"], 2, oneGpu, ["cpu", "cuda:0"]],
  ];
  for (const [what, spec, n, facts, expected] of table) {
    it(what, () => expect(resolveDevices(spec, n, "agentDevices", facts)).toEqual(expected));
  }

  it("other list lengths name the kind", () => {
    expect(() => resolveDevices(["cpu", "cpu", "cpu"], 2, "agentDevices", noCuda)).toThrow("agentDevices length (3) must be 1 or 2");
    expect(() => resolveDevices([], 2, "referenceDevices", noCuda)).toThrow("referenceDevices must not be an empty list");
  });

  it("rejects invalid names and devices the machine lacks", () => {
    expect(() => resolveDevices("tpu", 1, "agentDevices", noCuda)).toThrow(ConfigError);
    expect(() => resolveDevices("tpu", 1, "agentDevices", noCuda)).toThrow('agentDevices has an invalid device "tpu"');
    expect(() => resolveDevices(["auto"], 1, "agentDevices", noCuda)).toThrow("agentDevices has an invalid device");
    expect(() => resolveDevices("cuda:0", 1, "agentDevices", noCuda)).toThrow("agentDevices asks for cuda:0 but CUDA is not available");
    expect(() => resolveDevices(["cuda:0", "cuda:1"], 2, "agentDevices", oneGpu)).toThrow(
      "agentDevices asks for cuda:1 but only 1 CUDA device(s) are visible",
    );
  });
});

describe("resolveSingleDevice", () => {
  it("takes the first spec that is set: a string, or a list's first entry", () => {
    expect(resolveSingleDevice([null, "cuda:2", "cpu"], fourGpus)).toBe("cuda:2");
    expect(resolveSingleDevice([undefined, ["cuda:1", "cuda:0"]], fourGpus)).toBe("cuda:1");
  });

  it("is auto when nothing is set, or the first set spec says auto", () => {
    expect(resolveSingleDevice([], noCuda)).toBe("cpu");
    expect(resolveSingleDevice([null, null], fourGpus)).toBe("cuda:0");
    expect(resolveSingleDevice(["auto", "cpu"], oneGpu)).toBe("cuda:0");
  });

  it("validates what it picks", () => {
    expect(() => resolveSingleDevice([["cuda:1"]], oneGpu, "agentDevices")).toThrow("agentDevices asks for cuda:1");
    expect(() => resolveSingleDevice([[]], oneGpu, "agentDevices")).toThrow("agentDevices must not be an empty list");
  });
});
