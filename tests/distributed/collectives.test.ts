// c10d collectives between two real processes on loopback: small payloads, parameter broadcast, weighted gradient
// all-reduce against a hand computation, and failures (a peer that never joins, a peer that dies) that become
// errors within the timeout.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, killAll, rankEnv, start } from "./spawn.js";

const worker = path.join(import.meta.dirname, "collectives-worker.ts");
const dir = mkdtempSync(path.join(tmpdir(), "comlrl-dist-"));
const read = (file: string) => JSON.parse(readFileSync(file, "utf8"));

async function runRanks(scenario: string, worldSize: number, started = worldSize, timeoutSeconds = 20) {
  const port = await freePort();
  const files = Array.from({ length: started }, (_, r) => path.join(dir, `${scenario}-${r}.json`));
  const exits = await Promise.all(files.map((file, r) => start([worker, scenario, file], rankEnv(r, worldSize, port, timeoutSeconds)).exit));
  return { exits, files };
}

afterAll(killAll);

describe("process group (Gloo, 2 ranks on 127.0.0.1)", () => {
  it("reduces, gathers and broadcasts small payloads, and reduces gradients weighted by samples", async () => {
    const { exits, files } = await runRanks("collectives", 2);
    exits.forEach((e) => expect(e.code, e.stderr).toBe(0));
    const [r0, r1] = files.map(read);
    for (const r of [r0, r1]) {
      expect(r.sum).toEqual([3, 10, 1]);
      expect(r.mean).toEqual([1.5]);
      expect(r.max).toEqual([1, 0]);
      expect(r.min).toEqual([0, -1]);
      expect(r.gathered).toEqual([{ rank: 0, text: "x".repeat(1000) }, { rank: 1, list: [1, 2, 3] }]);
      expect(r.empty).toEqual(["", "abc"]);
      expect(r.broadcast).toEqual({ from: 1, values: [3, 1, 4] });
      expect(r.totalWeight).toBe(4);
      expect(r.values).toEqual([7]);
    }
    // Rank 1 started from other weights and now holds rank 0's, exactly.
    expect(r1.weights).toEqual(r0.weights);
    // Σ w_r g_r / Σ w_r with w = (1, 3), identical bytes on both ranks.
    expect(r1.gradients).toEqual(r0.gradients);
    r0.gradients.forEach((reduced: number[], p: number) => {
      const g0 = r0.localGradients[p];
      const g1 = r1.localGradients[p];
      expect(reduced.length).toBe(g0.length);
      reduced.forEach((v, i) => expect(v).toBeCloseTo((1 * g0[i] + 3 * g1[i]) / 4, 6));
    });
    expect(r0.localGradients.flat().some((v: number) => v !== 0)).toBe(true);
    const elements = r0.gradients.flat().length;
    // The scalars reduced first: the weight, the one value, a presence flag per gradient and the ranks' NCCL vote.
    expect(r0.bytes).toBe(elements * 4 + (1 + 1 + r0.gradients.length + 1) * 8);
  });

  it("a rank whose peer never joins fails to join within the timeout", async () => {
    const { exits, files } = await runRanks("never-joined", 2, 1, 3);
    expect(exits[0].code, exits[0].stderr).toBe(0);
    const r0 = read(files[0]);
    expect(r0.name).toBe("TorchError");
    expect(r0.error).toMatch(/rank 0 of 2 could not join the group at 127\.0\.0\.1:\d+ within 3000 ms/);
    expect(r0.seconds).toBeLessThan(15);
  });

  it("a peer that dies turns the next collective into an error, and the group stays failed", async () => {
    const { exits, files } = await runRanks("dead-peer", 2, 2, 10);
    expect(exits[1].code).toBe(7);
    expect(exits[0].code, exits[0].stderr).toBe(0);
    const r0 = read(files[0]);
    expect(r0.name).toBe("TorchError");
    expect(r0.error).toMatch(/allReduce failed on rank 0 of 2 \(a peer rank died/);
    expect(r0.seconds).toBeLessThan(12);
    expect(r0.again).toMatch(/the process group has failed earlier: allReduce failed/);
  });
});
