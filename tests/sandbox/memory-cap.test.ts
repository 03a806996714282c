// A run killed by the kernel at its cgroup's memory limit says so, on cgroup v1 as on v2: v1 kernels may leave
// memory.failcnt at 0 for an OOM kill (only memory.oom_control's oom_kill counts it), which reported a bare "exit 137".
// The run holds five processes of 60 MiB under a 128 MiB cap; each stays under its own address-space limit. Which
// process the kernel kills is its choice, so one kill must end the whole run: a parent that outlives its killed
// children must not report a pass.
import { describe, expect, it } from "vitest";
import { checkSandbox, runSandboxed } from "../../src/sandbox/sandbox.js";

const check = await checkSandbox();
const hasCgroup = check.ok && check.memoryBound.kind === "cgroup";

const HOG = `import os, time
def hog():
    for _ in range(4):
        if os.fork() == 0:
            held = bytearray(60 << 20)
            time.sleep(3)
            os._exit(0)
    held = bytearray(60 << 20)
    time.sleep(3)
    return True`;

const CHILDREN_ONLY = `import os, time
def hog():
    pids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            held = bytearray(60 << 20)
            time.sleep(3)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    return True`;

describe("sandbox memory cap", () => {
  it.runIf(hasCgroup)("a run killed at its cgroup's memory limit is reported as killed at the memory limit", async () => {
    const limit = 128 << 20;
    const r = await runSandboxed({ code: HOG, tests: ["assert hog()"], entryPoint: "hog", testTimeoutMs: 20_000, limits: { memoryBytes: limit } });
    expect(r.passed).toBe(0);
    expect(r.error).toBe(`killed at the memory limit (${limit} bytes for the whole run)`);
    expect(r.results[0]).toMatchObject({ status: "not run", message: r.error });
  }, 60_000);

  it.runIf(hasCgroup)("children killed at the limit end the run, though the parent that waits for them is small", async () => {
    const limit = 128 << 20;
    const r = await runSandboxed({ code: CHILDREN_ONLY, tests: ["assert hog()"], entryPoint: "hog", testTimeoutMs: 20_000, limits: { memoryBytes: limit } });
    expect(r.passed).toBe(0);
    expect(r.error).toBe(`killed at the memory limit (${limit} bytes for the whole run)`);
  }, 60_000);
});
