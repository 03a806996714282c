// Hostile code in the sandbox: each attack ends as a failed test, the run returns, no process outlives it and the
// machine's files are untouched. Timeouts are short so the file stays fast.
import { accessSync, constants, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkSandbox, runSandboxed, type SandboxRequest } from "../../src/sandbox/sandbox.js";

const marker = `comlrl-sandbox-marker-${process.pid}-${Date.now()}`;
const outsideFile = path.join("/tmp", `${marker}.txt`);
const readableFile = path.join("/tmp", `${marker}-readable.txt`);
const projectFile = path.resolve("package.json");

/** Every process on the machine whose command line carries the marker. */
function markedProcesses(): string[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .flatMap((pid) => {
      try {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
        return cmdline.includes(marker) ? [`${pid}: ${cmdline.replaceAll("\0", " ")}`] : [];
      } catch {
        return [];
      }
    });
}

const quick = (code: string, tests: string[], extra: Partial<SandboxRequest> = {}) => runSandboxed({ code, tests, testTimeoutMs: 500, ...extra });

beforeAll(async () => {
  const check = await checkSandbox();
  if (!check.ok) throw new Error(`the sandbox does not work on this machine: ${check.reason} (fix: ${check.fix})`);
});

afterAll(() => {
  rmSync(outsideFile, { force: true });
  rmSync(readableFile, { force: true });
});

describe("sandboxed execution", () => {
  it("runs a correct program: every test passes; a failing assert fails", async () => {
    const r = await quick("def add(a, b):\n    return a + b", ["assert add(1, 2) == 3", "assert add(2, 2) == 5", "assert add('a', 'b') == 'ab'"]);
    expect(r.results.map((t) => t.status)).toEqual(["pass", "fail", "pass"]);
    expect(r.results[1].errorType).toBe("AssertionError");
    expect(r).toMatchObject({ syntaxOk: true, passed: 2, failed: 1, timedOut: false });
  });

  it("reports a syntax error with its position and runs no test", async () => {
    const r = await quick("def f(:\n    return 1", ["assert f() == 1"]);
    expect(r.syntaxOk).toBe(false);
    expect(r.syntaxError).toMatchObject({ line: 1 });
    expect(r.passed).toBe(0);
  });

  it("an infinite loop times out per test; after maxTimeouts the rest are skipped", async () => {
    const r = await quick("def spin():\n    while True:\n        pass", ["spin()", "spin()", "assert 1 == 1"], { maxTimeouts: 2 });
    expect(r.results.map((t) => t.status)).toEqual(["timeout", "timeout", "skipped"]);
    expect(r.timeouts).toBe(2);
  });

  it("a loop that swallows the per-test timer is killed by the wall clock", async () => {
    const code = "def stubborn():\n    while True:\n        try:\n            while True:\n                pass\n        except BaseException:\n            pass";
    const started = Date.now();
    const r = await quick(code, ["stubborn()", "assert True"], { wallTimeoutMs: 1500 });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(r.timedOut).toBe(true);
    expect(r.results.every((t) => t.status !== "pass")).toBe(true);
  });

  it("a fork bomb is stopped by the process limit and leaves nothing behind", async () => {
    const code = `import os, time\ndef bomb():\n    while True:\n        try:\n            if os.fork() == 0:\n                os.execv("/usr/bin/python3", ["python3", "-c", "import time; time.sleep(30)  # ${marker}"])\n        except OSError:\n            time.sleep(0.05)`;
    const r = await quick(code, ["bomb()"], { wallTimeoutMs: 1500 });
    expect(r.passed).toBe(0);
    expect(markedProcesses()).toEqual([]);
  });

  it("a child process started and left running does not outlive the run", async () => {
    const code = `import subprocess\ndef spawn():\n    subprocess.Popen(["/usr/bin/python3", "-c", "import time; time.sleep(30)  # ${marker}"], start_new_session=True)\n    return True`;
    const r = await quick(code, ["assert spawn()"]);
    expect(r.passed).toBe(1);
    expect(markedProcesses()).toEqual([]);
  });

  it("a memory hog gets a MemoryError, not the machine's memory", async () => {
    const r = await quick("def hog():\n    return bytearray(8 * 1024 ** 3)", ["assert len(hog()) > 0"], { limits: { memoryBytes: 512 << 20 } });
    expect(r.results[0]).toMatchObject({ status: "fail", errorType: "MemoryError" });
  });

  it("huge output is capped and the run still reports", async () => {
    const r = await quick("import sys\ndef flood():\n    for _ in range(2000):\n        sys.stdout.write('x' * 10000)\n    return True", ["assert flood()"], { outputLimitBytes: 1000 });
    expect(r.passed).toBe(1);
    expect(r.stdout.length).toBeLessThan(1200);
    expect(r.stdout).toMatch(/more bytes dropped/);
  });

  it("cannot write outside its tmpfs, and a big file hits the size limit", async () => {
    const r = await quick(
      "def write(path, size):\n    with open(path, 'w') as f:\n        f.write('x' * size)\n    return True",
      [`assert write(${JSON.stringify(outsideFile)}, 10)`, "assert write('/usr/evil', 10)", "assert write('big', 4 << 20)", "assert write('small', 10)"],
      { limits: { fileSizeBytes: 1 << 20 } },
    );
    // Its /tmp is its own tmpfs: the write "succeeds" there and never reaches the machine's /tmp.
    expect(r.results.map((t) => t.status)).toEqual(["pass", "fail", "fail", "pass"]);
    expect(existsSync(outsideFile)).toBe(false);
    expect(existsSync("/usr/evil")).toBe(false);
  });

  it("cannot read the project's files or the machine's /root, /etc and /tmp", async () => {
    writeFileSync(readableFile, "on the machine");
    // Only files this process can read: each is read unsandboxed, so a failure inside is the sandbox's.
    const files = [projectFile, "/root/.bashrc", "/etc/passwd", readableFile].filter((file) => {
      try {
        accessSync(file, constants.R_OK);
        return true;
      } catch {
        return false;
      }
    });
    expect(files).toContain(projectFile);
    const code = "def read(path):\n    return open(path).read()";
    const tests = files.map((file) => `assert read(${JSON.stringify(file)})`);
    expect((await quick(code, tests, { mode: "none" })).results.map((t) => t.status)).toEqual(files.map(() => "pass"));
    const r = await quick(code, tests);
    expect(r.results.map((t) => [t.status, t.errorType])).toEqual(files.map(() => ["fail", "FileNotFoundError"]));
  });

  it("cannot open a network connection that works outside it", async () => {
    // A listener on this host's loopback: reachable from an unsandboxed python, so a refusal inside is the sandbox's.
    const server = createServer((socket) => socket.end());
    let accepted = 0;
    server.on("connection", () => accepted++);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const connect = `import socket\ndef connect():\n    socket.create_connection(('127.0.0.1', ${port}), timeout=1).close()\n    return True`;
      const unsandboxed = await quick(connect, ["assert connect()"], { mode: "none" });
      expect(unsandboxed.results[0].status).toBe("pass");
      expect(accepted).toBe(1);
      const sandboxed = await quick(connect, ["assert connect()"]);
      expect(sandboxed.results[0].status).toBe("fail");
      expect(sandboxed.results[0].errorType).toBe("ConnectionRefusedError");
      expect(accepted).toBe(1);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("a process that exits mid-run fails the remaining tests", async () => {
    const r = await quick("import os\ndef quit():\n    os._exit(3)", ["assert 1", "quit()", "assert 1"]);
    expect(r.results.map((t) => t.status)).toEqual(["pass", "not run", "not run"]);
    expect(r.error).toMatch(/exit 3/);
  });

  it("measures the overhead of a trivial passing program", async () => {
    const runs = 6;
    const started = performance.now();
    for (let i = 0; i < runs; i++) expect((await quick("x = 1", ["assert x == 1"])).passed).toBe(1);
    const bwrap = (performance.now() - started) / runs;
    const direct = performance.now();
    for (let i = 0; i < runs; i++) expect((await quick("x = 1", ["assert x == 1"], { mode: "none" })).passed).toBe(1);
    const none = (performance.now() - direct) / runs;
    console.log(`sandbox overhead per completion: bwrap ${bwrap.toFixed(1)} ms, unsandboxed python ${none.toFixed(1)} ms`);
    expect(bwrap).toBeLessThan(2000);
  });
});

describe("sandbox probe", () => {
  it("explains a missing interpreter and refuses to run", async () => {
    const check = await checkSandbox({ python: "/usr/bin/no-such-python" });
    expect(check).toMatchObject({ ok: false, reason: expect.stringMatching(/does not exist/) });
    await expect(runSandboxed({ code: "", tests: [], python: "/usr/bin/no-such-python" })).rejects.toThrow(/code-executing rewards refuse to run: .*does not exist\. Fix:/);
  });

  it("explains an interpreter the sandbox cannot see", async () => {
    const outsideUsr = path.join("/tmp", `${marker}-python`);
    writeFileSync(outsideUsr, "");
    try {
      const check = await checkSandbox({ python: outsideUsr });
      expect(check).toMatchObject({ ok: false, reason: expect.stringMatching(/outside \/usr/), fix: expect.stringMatching(/readOnlyPaths/) });
    } finally {
      rmSync(outsideUsr);
    }
  });

  it("explains a missing bwrap", async () => {
    const check = await checkSandbox({ bwrap: "/nonexistent/bwrap" });
    expect(check).toMatchObject({ ok: false, reason: expect.stringMatching(/bubblewrap \(bwrap\) is not installed/), fix: expect.stringMatching(/apt-get install bubblewrap/) });
  });
});
