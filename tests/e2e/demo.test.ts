// The README's main job, shortened: the demo writes its metrics, plot and agents, and shows samples.
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { expect, it, vi } from "vitest";
import { runDemo } from "../../src/cli/demo.js";

it("runs end to end and writes metrics.jsonl, reward.svg and both agents", async () => {
  const out = path.join(mkdtempSync(path.join(tmpdir(), "comlrl-demo-")), "demo");
  const lines: string[] = [];
  const log = vi.spyOn(console, "log").mockImplementation((...args) => void lines.push(args.join(" ")));
  try {
    await runDemo({ outputDir: out, epochs: 2, seed: 7, quiet: true });
  } finally {
    log.mockRestore();
  }
  expect(existsSync(path.join(out, "metrics.jsonl"))).toBe(true);
  expect(readFileSync(path.join(out, "reward.svg"), "utf8")).toContain("<svg");
  for (const agent of ["agent_0", "agent_1"]) expect(existsSync(path.join(out, "agents", agent, "model.safetensors"))).toBe(true);
  const text = lines.join("\n");
  expect(text).toContain("before training");
  expect(text).toContain("after training");
  expect(text).toMatch(/reward \d\.\d\d -> \d\.\d\d \(max 1\.0\)/);
}, 120_000);
