// A data-parallel job on GPUs whose addon has no NCCL reduces every GPU gradient through the CPU: each rank is told
// so at the start, and only then (one rank, no GPU, or NCCL present need no warning).
import { describe, expect, it } from "vitest";
import type { CudaFacts } from "../../src/config/index.js";
import { missingNcclWarning } from "../../src/distributed/context.js";

const noCuda: CudaFacts = { cudaAvailable: false, deviceCount: 0 };
const eightGpus: CudaFacts = { cudaAvailable: true, deviceCount: 8 };

describe("the missing-NCCL warning at DDP start", () => {
  it("warns a multi-rank job on GPUs without NCCL, naming the slow path and the way out", () => {
    const warning = missingNcclWarning(8, eightGpus, false);
    expect(warning).toContain("no NCCL");
    expect(warning).toContain("8 ranks reduce their GPU gradients through the CPU (Gloo)");
    expect(warning).toContain("nvidia-nccl");
  });

  it("stays silent with NCCL, with one rank, or without GPUs", () => {
    expect(missingNcclWarning(8, eightGpus, true)).toBeNull();
    expect(missingNcclWarning(1, eightGpus, false)).toBeNull();
    expect(missingNcclWarning(4, noCuda, false)).toBeNull();
    expect(missingNcclWarning(4, { cudaAvailable: true, deviceCount: 0 }, false)).toBeNull();
  });
});
