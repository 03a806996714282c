// memoryWindow(): the peak resident bytes of the time since the previous call, which the trainers' per-phase memory
// reads at every phase boundary; the process's own high-water mark is left as it is (what GNU time reports).
import { spawnSync } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { MemoryWindow } from "../../src/native/binding.js";
import { memoryWindow, runtimeInfo } from "../../src/runtime.js";

const MIB = 2 ** 20;

describe("memoryWindow", () => {
  it("a window's peak is its own: a copy below the process's peak is seen by sampling, and the process's peak stays", () => {
    const child = path.join(__dirname, "memory-window-child.ts");
    const run = spawnSync(process.execPath, ["--import", "tsx", child], { encoding: "utf8", env: { ...process.env, COMLRL_CPU_CACHE_MB: "0" }, timeout: 120_000 });
    expect(run.status, run.stderr).toBe(0);
    const { large, between, small } = JSON.parse(run.stdout.trim().split("\n").at(-1)!) as Record<string, MemoryWindow>;
    // Two 256 MiB buffers, then two of 128 MiB, each freed before the window closes.
    expect(large.peakResidentBytes - between.residentBytes).toBeGreaterThan(480 * MIB);
    expect(small.peakResidentBytes - between.residentBytes).toBeGreaterThan(224 * MIB);
    expect(small.peakResidentBytes).toBeLessThan(large.peakResidentBytes - 200 * MIB);
    expect(small.processPeakResidentBytes).toBe(large.processPeakResidentBytes);
    expect(between.peakResidentBytes).toBeLessThan(large.peakResidentBytes - 400 * MIB);
  });

  it("lists each visible CUDA device as runtimeInfo does (none on a CPU-only machine)", () => {
    const window = memoryWindow();
    expect(window.cudaMemory.map((d) => d.device)).toEqual(runtimeInfo().cudaMemory.map((d) => d.device));
    expect(window.processPeakResidentBytes).toBeGreaterThanOrEqual(window.peakResidentBytes);
    expect(window.peakResidentBytes).toBeGreaterThanOrEqual(window.residentBytes);
  });
});
