// comlrl launch and the torchrun environment without libtorch: the command line, the variables each rank gets, the
// thread split, exit statuses, and the environment reader's errors.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { splitPassthrough, type Command } from "../../src/cli/args.js";
import { checkLaunchOptions, parseMaster } from "../../src/cli/launch.js";
import { threadsPerRank } from "../../src/distributed/local-ranks.js";
import { readDistributedEnvironment } from "../../src/distributed/environment.js";

const cli = path.join(import.meta.dirname, "..", "..", "src", "cli", "main.ts");
const dir = mkdtempSync(path.join(tmpdir(), "comlrl-launch-"));
const launch = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, ["--import", "tsx", cli, "launch", ...args], { encoding: "utf8", env: { ...process.env, ...env }, timeout: 60_000 });

describe("comlrl launch", () => {
  it("gives each rank the torchrun variables and its share of the cores, and passes the script its arguments", () => {
    const script = path.join(dir, "env.mjs");
    writeFileSync(
      script,
      `import { writeFileSync } from "node:fs";
const e = process.env;
writeFileSync(process.argv[2] + "-" + e.RANK + ".json", JSON.stringify({ args: process.argv.slice(3), RANK: e.RANK, WORLD_SIZE: e.WORLD_SIZE, LOCAL_RANK: e.LOCAL_RANK, LOCAL_WORLD_SIZE: e.LOCAL_WORLD_SIZE, MASTER_ADDR: e.MASTER_ADDR, MASTER_PORT: e.MASTER_PORT, COMLRL_NUM_THREADS: e.COMLRL_NUM_THREADS }));`,
    );
    const prefix = path.join(dir, "out");
    const run = launch(["--nproc", "2", "--nnodes", "2", "--node-rank", "1", "--master", "127.0.0.1:29999", script, prefix, "--epochs", "3"], { COMLRL_NUM_THREADS: "1" });
    expect(run.status, run.stderr).toBe(0);
    const ranks = [2, 3].map((r) => JSON.parse(readFileSync(`${prefix}-${r}.json`, "utf8")));
    ranks.forEach((env, local) =>
      expect(env).toEqual({ args: ["--epochs", "3"], RANK: `${2 + local}`, WORLD_SIZE: "4", LOCAL_RANK: `${local}`, LOCAL_WORLD_SIZE: "2", MASTER_ADDR: "127.0.0.1", MASTER_PORT: "29999", COMLRL_NUM_THREADS: "1" }),
    );
  });

  it("runs comlrl's own train command as the ranks' program", () => {
    const run = launch(["--nproc", "2", "train", "--help"]);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout.match(/usage: comlrl train --config FILE/g)).toHaveLength(2);
  });

  it("exits with a failing rank's status and says which rank failed", () => {
    const script = path.join(dir, "fail.mjs");
    writeFileSync(script, `if (process.env.RANK === "1") process.exit(3); await new Promise((r) => setTimeout(r, 30000));`);
    const started = Date.now();
    const run = launch(["--nproc", "2", script]);
    expect(run.status).toBe(3);
    expect(run.stderr).toContain("comlrl launch: rank 1 exited with status 3; stopping the other ranks");
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it("refuses bad command lines with usage and exit 2", () => {
    const cases: Array<[string[], RegExp]> = [
      [["script.ts"], /--nproc N is required/],
      [["--nproc", "0", "script.ts"], /--nproc must be an integer ≥ 1/],
      [["--nproc", "2"], /a script to run is required/],
      [["--nproc", "2", "--nnodes", "2", "script.ts"], /--master ADDR:PORT is required with --nnodes > 1/],
      [["--nproc", "2", "--nnodes", "2", "--node-rank", "2", "--master", "h:1", "script.ts"], /--node-rank must be below --nnodes \(2\)/],
      [["--nproc", "1", "--master", "nohost", "script.ts"], /--master must be ADDR:PORT/],
      [["--nproc", "1", "--bogus", "script.ts"], /Unknown option '--bogus'/],
    ];
    for (const [args, message] of cases) {
      const run = launch(args);
      expect(run.status, args.join(" ")).toBe(2);
      expect(run.stderr).toMatch(message);
    }
  });

  it("splits its own options from the script's command line", () => {
    const command = { name: "launch", usage: "", options: { nproc: { type: "string" }, quiet: { type: "boolean" } }, passthrough: true, run: async () => {} } as Command;
    expect(splitPassthrough(command, ["--nproc", "2", "a.ts", "--nproc", "9"])).toEqual([["--nproc", "2"], ["a.ts", "--nproc", "9"]]);
    expect(splitPassthrough(command, ["--nproc=2", "--quiet", "a.ts"])).toEqual([["--nproc=2", "--quiet"], ["a.ts"]]);
    expect(splitPassthrough(command, ["--nproc", "2", "--", "-weird.ts"])).toEqual([["--nproc", "2"], ["-weird.ts"]]);
    expect(parseMaster("[::1]:29500")).toEqual({ addr: "::1", port: 29500 });
    expect(threadsPerRank(2, {}, 16)).toBe("8");
    expect(threadsPerRank(4, {}, 2)).toBe("1");
    expect(threadsPerRank(2, { COMLRL_NUM_THREADS: "3" }, 16)).toBe("3");
    expect(() => checkLaunchOptions({ nproc: 1, nnodes: 1, nodeRank: 0, master: "a:70000", command: ["x.ts"] })).toThrow(/port in \[1, 65535\]/);
    expect(execFileSync(process.execPath, ["--import", "tsx", cli, "launch", "--help"], { encoding: "utf8" })).toContain("usage: comlrl launch --nproc N");
  });
});

describe("the torchrun environment", () => {
  it("is absent, complete, or an error naming what is missing or malformed", () => {
    expect(readDistributedEnvironment({})).toBeNull();
    expect(readDistributedEnvironment({ RANK: "1", WORLD_SIZE: "2", MASTER_ADDR: " 10.0.0.1 ", MASTER_PORT: "29500", COMLRL_DIST_TIMEOUT: "2.5", GLOO_SOCKET_IFNAME: "eth1" })).toEqual({
      rank: 1, worldSize: 2, localRank: 1, masterAddr: "10.0.0.1", masterPort: 29500, timeoutMs: 2500, interface: "eth1",
    });
    expect(readDistributedEnvironment({ RANK: "0", WORLD_SIZE: "1", MASTER_ADDR: "h", MASTER_PORT: "1" })?.timeoutMs).toBe(1_800_000);
    expect(() => readDistributedEnvironment({ RANK: "0", WORLD_SIZE: "2" })).toThrow("MASTER_ADDR, MASTER_PORT must be set beside RANK, WORLD_SIZE");
    expect(() => readDistributedEnvironment({ RANK: "2", WORLD_SIZE: "2", MASTER_ADDR: "h", MASTER_PORT: "1" })).toThrow('RANK must be an integer in [0, 1], got "2"');
    expect(() => readDistributedEnvironment({ RANK: "0", WORLD_SIZE: "2", MASTER_ADDR: "h", MASTER_PORT: "http" })).toThrow("MASTER_PORT must be an integer in [1, 65535]");
    expect(() => readDistributedEnvironment({ RANK: "0", WORLD_SIZE: "2", MASTER_ADDR: "h", MASTER_PORT: "1", COMLRL_DIST_TIMEOUT: "0" })).toThrow("COMLRL_DIST_TIMEOUT must be a positive number of seconds");
  });
});
