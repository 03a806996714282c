// Ranks that disagree fail by name before any tensor moves: two ranks loading different models (which aborted the
// process natively in the first broadcast, gloo::EnforceNotMet and SIGABRT) and two ranks with different
// numGenerations (which trained apart, silently) each exit with an error naming the rank and what differs.
import { existsSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTinyModel } from "../../src/models/tiny-model.js";
import { freePort, killAll, rankEnv, start } from "./spawn.js";

const worker = path.join(import.meta.dirname, "fingerprint-worker.ts");
const root = mkdtempSync(path.join(tmpdir(), "comlrl-fingerprint-"));
const small = path.join(root, "small");
const wide = path.join(root, "wide");

beforeAll(async () => {
  await createTinyModel(small, { seed: 11, hiddenSize: 32, numLayers: 1, vocabSize: 300 });
  await createTinyModel(wide, { seed: 11, hiddenSize: 48, numLayers: 1, vocabSize: 300 });
});
afterAll(killAll);

async function runRanks(name: string, models: string, generations: string) {
  const out = path.join(root, name);
  mkdirSync(out, { recursive: true });
  const port = await freePort();
  const exits = await Promise.all([0, 1].map((r) => start([worker, out, models, generations], rankEnv(r, 2, port, 20)).exit));
  return { out, exits };
}

describe("data-parallel ranks compare fingerprints at start", () => {
  it("ranks with different models fail by name, neither aborting natively", async () => {
    const { exits } = await runRanks("models", `${small},${wide}`, "4,4");
    exits.forEach((e, r) => {
      expect({ code: e.code, signal: e.signal }, `rank ${r}: ${e.stderr}`).toEqual({ code: 1, signal: null });
      expect(e.stderr).toMatch(/RankMismatchError: the 2 data-parallel ranks do not run the same models and config: component agent_0 has \d+ parameters in \d+ tensors on rank 1, \d+ in \d+ on rank 0/);
    });
  });

  it("ranks with different numGenerations fail by name instead of training apart", async () => {
    const { out, exits } = await runRanks("generations", `${small},${small}`, "4,8");
    exits.forEach((e, r) => {
      expect({ code: e.code, signal: e.signal }, `rank ${r}: ${e.stderr}`).toEqual({ code: 1, signal: null });
      expect(e.stderr).toContain("config numGenerations is 8 on rank 1, 4 on rank 0");
    });
    expect(existsSync(path.join(out, "rank-0.json"))).toBe(false);
  });

  it("ranks that agree train", async () => {
    const { out, exits } = await runRanks("agree", `${small},${small}`, "4,4");
    exits.forEach((e, r) => expect(e.code, `rank ${r}: ${e.stderr}`).toBe(0));
    expect(existsSync(path.join(out, "rank-1.json"))).toBe(true);
  });
});
