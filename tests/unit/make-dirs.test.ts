// Directory creation for output and checkpoint dirs: Node's own recursive mkdir loops forever when a file system
// answers mkdir with ENOENT although the parent exists (/proc), and reports ENOENT instead of EROFS on a read-only
// mount (it stats the missing directory after the real error). Each case runs in a child process with a time limit,
// so a regression is a failed test, not a hung suite.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const helper = path.resolve("src/util/make-dirs.ts");
const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-dirs-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Runs makeDirs (async, then sync) on dir in a child process; its stdout is the error's code and message. */
function inChild(dir: string, wrap: string[] = []): { status: number | null; out: string } {
  const script = `import { makeDirs, makeDirsSync } from ${JSON.stringify(helper)};
    const report = (e) => console.log(e === null ? "ok" : e.code + " " + e.message);
    try { makeDirsSync(${JSON.stringify(dir)}); report(null); } catch (e) { report(e); }
    await makeDirs(${JSON.stringify(dir)}).then(() => report(null), report);`;
  const [command, ...args] = [...wrap, process.execPath, "--import", "tsx", "--input-type=module", "-e", script];
  const run = spawnSync(command!, args, { encoding: "utf8", timeout: 10_000 });
  return { status: run.status, out: `${run.stdout}${run.stderr}`.trim() };
}

// A read-only mount of our own needs a user namespace (unshare -rm); machines without one skip that case.
const canUnshare = spawnSync("unshare", ["-rm", "true"]).status === 0;

describe("makeDirs", () => {
  it("creates missing parents and accepts an existing directory", async () => {
    const { makeDirs, makeDirsSync } = await import("../../src/util/make-dirs.js");
    const deep = path.join(scratch, "a", "b", "c");
    await makeDirs(deep);
    await makeDirs(deep);
    makeDirsSync(path.join(scratch, "a", "d", "e"));
    expect(statSync(deep).isDirectory() && statSync(path.join(scratch, "a", "d", "e")).isDirectory()).toBe(true);
  });

  it("a file in the way is ENOTDIR naming the path", async () => {
    const { makeDirs } = await import("../../src/util/make-dirs.js");
    const { writeFileSync } = await import("node:fs");
    writeFileSync(path.join(scratch, "file"), "x");
    await expect(makeDirs(path.join(scratch, "file", "sub"))).rejects.toThrow(/ENOTDIR.*file/);
  });

  it("a directory under /proc fails at once (Node's recursive mkdir spins there forever)", () => {
    const { status, out } = inChild("/proc/comlrl-out/checkpoints");
    expect(status).toBe(0);
    const lines = out.split("\n");
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line).toMatch(/^ENOENT cannot create directory \/proc\/comlrl-out: .*\/proc does not allow/);
  });

  it.skipIf(!canUnshare)("a read-only mount reports EROFS, not ENOENT", () => {
    const mount = path.join(scratch, "ro");
    const script = `mkdir -p ${mount} && mount -t tmpfs -o ro tmpfs ${mount} && exec "$@"`;
    const { status, out } = inChild(path.join(mount, "out", "checkpoints"), ["unshare", "-rm", "sh", "-c", script, "sh"]);
    expect(status).toBe(0);
    for (const line of out.split("\n")) expect(line).toMatch(new RegExp(`^EROFS cannot create directory ${mount}/out: EROFS`));
  });

  it("a checkpoint or metrics file under /proc is an error naming the directory, not a hang", () => {
    const script = `import { writeDirAtomic } from ${JSON.stringify(path.resolve("src/util/atomic.ts"))};
      import { JsonlMetricsWriter } from ${JSON.stringify(path.resolve("src/logging/jsonl.ts"))};
      try { new JsonlMetricsWriter("/proc/comlrl-out/metrics.jsonl"); } catch (e) { console.log(e.message); }
      await writeDirAtomic("/proc/comlrl-out/checkpoints/checkpoint-1", async () => {}).catch((e) => console.log(e.message));`;
    const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8", timeout: 10_000 });
    expect(run.status).toBe(0);
    const lines = run.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^cannot create directory \/proc\/comlrl-out: ENOENT: the file system at \/proc does not allow/);
    expect(lines[1]).toMatch(/^cannot write \/proc\/comlrl-out\/checkpoints\/checkpoint-1: cannot create directory \/proc\/comlrl-out: ENOENT/);
  });
});

