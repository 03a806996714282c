// comlrl launch on more ranks than cores: the ranks still start (oversubscription can be meant, e.g. to test), but
// the launcher says so, with the cores it saw and the one thread each rank gets.
import { mkdtempSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { runLaunch } from "../../src/cli/launch.js";

afterEach(() => vi.restoreAllMocks());

const script = path.join(mkdtempSync(path.join(tmpdir(), "comlrl-launch-")), "rank.mjs");
writeFileSync(script, "process.exit(0);\n");

describe("comlrl launch and the cores", () => {
  it("more ranks than cores: a warning naming both, and every rank still runs", async () => {
    const cores = availableParallelism();
    const said: string[] = [];
    vi.spyOn(console, "warn").mockImplementation((...args) => void said.push(args.join(" ")));
    const status = await runLaunch({ nproc: cores + 1, nnodes: 1, nodeRank: 0, master: null, command: [script] });
    expect(status).toBe(0);
    expect(said).toEqual([`comlrl launch: ${cores + 1} ranks on ${cores} cores: the ranks share cores, one intra-op thread each; expect each step to be slower than with ${cores} ranks`]);
  });

  it("no more ranks than cores: nothing said", async () => {
    const said: string[] = [];
    vi.spyOn(console, "warn").mockImplementation((...args) => void said.push(args.join(" ")));
    expect(await runLaunch({ nproc: 1, nnodes: 1, nodeRank: 0, master: null, command: [script] })).toBe(0);
    expect(said).toEqual([]);
  });
});
