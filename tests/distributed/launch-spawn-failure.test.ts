// comlrl launch when a rank cannot be started, and its bound on --nproc. A rank whose spawn fails (here EMFILE: the
// launcher's descriptors are used up after its first rank starts, as a pids limit's EAGAIN would) must stop the ranks
// that did start and nothing else: signalling a ChildProcess that never got a pid signals the launcher's own process
// group, which killed the script that called it.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { checkLaunchOptions, MAX_RANKS_PER_CORE } from "../../src/cli/launch.js";

const cli = path.join(import.meta.dirname, "..", "..", "src", "cli", "main.ts");
const dir = mkdtempSync(path.join(tmpdir(), "comlrl-launch-spawn-"));

/** Runs `script` in a shell of its own process group; resolves to its output and how it ended. */
function shell(script: string): Promise<{ stdout: string; stderr: string; code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    const child = spawn("sh", ["-c", script], { detached: true, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("close", (code, signal) => resolve({ stdout, stderr, code, signal }));
  });
}

describe("comlrl launch with a rank that cannot start", () => {
  it("stops the started ranks, reports the rank, and signals no rank it did not start", { timeout: 60_000 }, async () => {
    // Loaded into the launcher: from the second spawn on, every descriptor is taken, so the spawn fails with EMFILE;
    // and a signal sent to a ChildProcess without a pid (it goes to whatever pid its handle holds: 0, the process
    // group, under EAGAIN; an uninitialized one under EMFILE) is reported.
    const exhaust = path.join(dir, "exhaust.mjs");
    writeFileSync(
      exhaust,
      `import childProcess from "node:child_process";
import { openSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
const spawn = childProcess.spawn;
const held = [];
let calls = 0;
childProcess.spawn = (...args) => {
  if (calls++ === 1) {
    try { for (;;) held.push(openSync("/dev/null", "r")); } catch {}
  }
  return spawn(...args);
};
syncBuiltinESMExports();
const kill = childProcess.ChildProcess.prototype.kill;
childProcess.ChildProcess.prototype.kill = function (signal) {
  if (this.pid === undefined) console.error("signalled a ChildProcess that has no pid");
  return kill.call(this, signal);
};`,
    );
    const rank = path.join(dir, "rank.mjs");
    writeFileSync(rank, `setTimeout(() => {}, 30_000);`);
    const started = Date.now();
    const run = await shell(`ulimit -n 512; "${process.execPath}" --import "${exhaust}" --import tsx "${cli}" launch --nproc 3 "${rank}"; echo "launcher exited $?"`);
    expect(run.signal, run.stderr).toBeNull();
    expect(run.stdout).toBe("launcher exited 1\n");
    expect(run.stderr).toMatch(/comlrl launch: rank 1 could not start: spawn .*EMFILE; stopping the other ranks/);
    // Rank 2 was never attempted, and rank 0 was stopped at once, not left to its 30 s.
    expect(run.stderr).not.toMatch(/rank 2|signalled a ChildProcess that has no pid/);
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it(`refuses more than ${MAX_RANKS_PER_CORE} ranks per core, naming --nproc`, () => {
    const options = { nproc: 100_000, nnodes: 1, nodeRank: 0, master: null, command: ["x.mjs"] };
    expect(() => checkLaunchOptions(options, 2)).toThrow(`--nproc must be at most ${2 * MAX_RANKS_PER_CORE} (${MAX_RANKS_PER_CORE} ranks per core on this node's 2 cores), got 100000`);
    expect(() => checkLaunchOptions({ ...options, nproc: 2 * MAX_RANKS_PER_CORE }, 2)).not.toThrow();
  });
});
