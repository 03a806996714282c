// The sandbox's resources as a whole: every place it can write is read-only or a size-capped tmpfs, no user namespace
// can be made inside, and a run that tries to fill every kind of memory (tmpfs files, /dev/shm, SysV shared memory,
// memfds, several processes) holds no more than its memory limit, measured on the host while it runs.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { checkSandbox, runSandboxed } from "../../src/sandbox/sandbox.js";

const check = await checkSandbox();
const hasCgroup = check.ok && check.memoryBound.kind === "cgroup";

const WRITE = `import ctypes, os
def write(path, size=4096):
    try:
        with open(path, 'wb') as f:
            for _ in range(max(1, size >> 20)):
                f.write(b'x' * min(size, 1 << 20))
        return 'written'
    except OSError as error:
        return error.strerror
def new_user_namespace():
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.unshare(0x10000000) == 0`;

const availableBytes = () => Number(/MemAvailable:\s+(\d+) kB/.exec(readFileSync("/proc/meminfo", "utf8"))![1]) * 1024;

describe("sandbox resources", () => {
  it("writes only to size-capped tmpfs: the root, /dev and /usr are read-only, /tmp and /dev/shm fill up at their size", async () => {
    const tests = [
      "assert write('/x') == 'Read-only file system'",
      "assert write('/dev/x') == 'Read-only file system'",
      "assert write('/usr/x') == 'Read-only file system'",
      "assert write('/tmp/x') == 'written'",
      "assert write('/dev/shm/x') == 'written'",
      "assert write('/tmp/big', 12 << 20) == 'No space left on device'",
      "assert write('/dev/shm/big', 12 << 20) == 'No space left on device'",
      "assert not new_user_namespace()",
    ];
    const r = await runSandboxed({ code: WRITE, tests, entryPoint: "write", testTimeoutMs: 5000, limits: { tmpfsBytes: 8 << 20, shmBytes: 8 << 20 } });
    expect(r.results.map((t) => `${t.test}: ${t.status} ${t.message ?? ""}`)).toEqual(tests.map((t) => `${t}: pass `));
  });

  it("the probe says how memory is bounded here", () => {
    expect(check).toMatchObject({ ok: true });
    if (check.ok && check.memoryBound.kind === "per-process") expect(check.memoryBound.reason).toMatch(/cgroup/);
  });

  it.runIf(hasCgroup)("a run filling every kind of memory holds at most its limit (cgroup), on the host too", async () => {
    const limit = 256 << 20;
    const code = `${WRITE}
import mmap, time
def hog():
    write('/tmp/fill', 1 << 30)
    write('/dev/shm/fill', 1 << 30)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    for _ in range(8):
        segment = libc.shmget(0, 64 << 20, 0o1600)
        address = libc.shmat(segment, None, 0)
        ctypes.memset(address, 1, 64 << 20)
        libc.shmdt(ctypes.c_void_p(address))
    memfds = [os.memfd_create('hog') for _ in range(24)]
    for fd in memfds:
        os.write(fd, b'x' * (15 << 20))
    for _ in range(6):
        if os.fork() == 0:
            held = bytearray(200 << 20)
            time.sleep(2)
            os._exit(0)
    time.sleep(3)
    return True`;
    const before = availableBytes();
    let lowest = before;
    const sampler = setInterval(() => (lowest = Math.min(lowest, availableBytes())), 10);
    const r = await runSandboxed({
      code,
      tests: ["assert hog()"],
      entryPoint: "hog",
      testTimeoutMs: 20_000,
      limits: { memoryBytes: limit, tmpfsBytes: 1 << 30, shmBytes: 1 << 30 },
    });
    clearInterval(sampler);
    console.log(`memory-hog run: peak ${((r.memoryPeakBytes ?? 0) / 2 ** 20).toFixed(0)} MiB in its cgroup (limit ${limit / 2 ** 20} MiB); host MemAvailable fell by at most ${((before - lowest) / 2 ** 20).toFixed(0)} MiB`);
    expect(r.passed).toBe(0);
    expect(r.memoryPeakBytes).toBeLessThanOrEqual(limit);
    // Other work on the machine moves MemAvailable too; the run alone would take ~3 GiB without the bound.
    expect(before - lowest).toBeLessThan(limit + (512 << 20));
  }, 60_000);
});
