// How many CPU agent lanes a trainer's actors get (src/trainers/lanes.ts).
import { describe, expect, it } from "vitest";
import type { CausalLM } from "../../src/models/causal-lm.js";
import { planCpuLanes, type LaneFacts } from "../../src/trainers/lanes.js";

const facts = (over: Partial<LaneFacts> = {}): LaneFacts => ({ parallelTraining: "none", devices: ["cpu", "cpu"], sources: ["m", "m"], threads: 2, ...over });

describe("planCpuLanes", () => {
  it("by default gives each intra-op thread a lane when the agents are at least as many as the threads", () => {
    expect(planCpuLanes(facts(), {})).toBe(2);
    expect(planCpuLanes(facts({ sources: ["m", "m", "m"], devices: ["cpu", "cpu", "cpu"] }), {})).toBe(2);
    expect(planCpuLanes(facts({ threads: 16 }), {})).toBe(1);
    expect(planCpuLanes(facts({ threads: 1 }), {})).toBe(1);
    expect(planCpuLanes(facts({ parallelTraining: "mp" }), {})).toBe(2);
  });

  it("takes COMLRL_CPU_LANES, at most one lane per agent, and refuses a count that is not one", () => {
    expect(planCpuLanes(facts({ threads: 16 }), { COMLRL_CPU_LANES: "2" })).toBe(2);
    expect(planCpuLanes(facts({ threads: 1 }), { COMLRL_CPU_LANES: "8" })).toBe(2);
    expect(planCpuLanes(facts(), { COMLRL_CPU_LANES: "1" })).toBe(1);
    for (const bad of ["0", "two", "1.5", "-1"]) {
      expect(() => planCpuLanes(facts(), { COMLRL_CPU_LANES: bad })).toThrow(`COMLRL_CPU_LANES must be a positive integer, got "${bad}"`);
    }
  });

  it("gives none to one agent, data parallelism, an agent or reference off the CPU, or one model shared by agents", () => {
    const lanes = { COMLRL_CPU_LANES: "2" };
    expect(planCpuLanes(facts({ sources: ["m"], devices: ["cpu"] }), lanes)).toBe(1);
    expect(planCpuLanes(facts({ parallelTraining: "ddp" }), lanes)).toBe(1);
    expect(planCpuLanes(facts({ devices: ["cpu", "cpu", "cuda:0", "cpu"] }), lanes)).toBe(1);
    const model = {} as CausalLM;
    expect(planCpuLanes(facts({ sources: [model, model] }), lanes)).toBe(1);
    expect(planCpuLanes(facts({ sources: [model, {} as CausalLM] }), lanes)).toBe(2);
  });
});
