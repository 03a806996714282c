// The foundation: the addon loads (local build and prebuild), libtorch errors become TorchErrors, async calls keep
// the event loop alive, and the runtime reports threads and an optimized BLAS.
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { addon, addonPath, AddonLoadError, loadAddonFrom, packageRoot, prebuildPlatformDir, selectedPrebuild } from "../../src/native/loader.js";
import { runtimeInfo, setNumThreads } from "../../src/runtime.js";
import { illTyped } from "../support/ill-typed.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-addon-"));
const defaultThreads = runtimeInfo().numThreads;
afterAll(() => setNumThreads(defaultThreads));

describe("loading", () => {
  it("loads from the local build", () => {
    expect(addon()).toBeDefined();
    expect(addonPath()).toBe(path.join(packageRoot, "build", "Release", "comlrl.node"));
  });

  // The prebuild of this build, as `npm run prebuild` stores it: prebuilds/<platform>-<arch>/<variant>-torch<version>.
  function storedPrebuild(): { name: string; dir: string } {
    const run = spawnSync(process.execPath, [path.join(packageRoot, "scripts", "prebuild.mjs"), "--from-build"], { encoding: "utf8" });
    expect(run.status, run.stderr).toBe(0);
    const info = runtimeInfo();
    const name = `${info.cudaCompiled ? "cuda" : "cpu"}-torch${info.torchVersion}`;
    return { name, dir: path.join(prebuildPlatformDir(packageRoot), name) };
  }

  it("loads the prebuild chosen at install when there is no local build", () => {
    const { name, dir: stored } = storedPrebuild();
    const root = path.join(scratch, "package-with-prebuild");
    const dir = path.join(prebuildPlatformDir(root), name);
    mkdirSync(dir, { recursive: true });
    for (const file of ["comlrl.node", "comlrl.json"]) copyFileSync(path.join(stored, file), path.join(dir, file));
    expect(() => loadAddonFrom(root)).toThrow(AddonLoadError); // not chosen by an install yet
    writeFileSync(path.join(prebuildPlatformDir(root), "selected.json"), JSON.stringify({ prebuild: name }));
    const { addon: fromPrebuild, file } = loadAddonFrom(root);
    expect(file).toBe(path.join(dir, "comlrl.node"));
    expect(fromPrebuild.runtimeInfo().torchVersion).toBe(runtimeInfo().torchVersion);
  });

  it("install uses the prebuild that matches the detected libtorch's version and variant, and records it", () => {
    const { name } = storedPrebuild();
    const root = path.join(scratch, "package-with-prebuild");
    mkdirSync(path.join(root, "scripts"), { recursive: true });
    for (const script of ["install.mjs", "find-libtorch.mjs", "prebuild.mjs"]) {
      copyFileSync(path.join(packageRoot, "scripts", script), path.join(root, "scripts", script));
    }
    rmSync(path.join(prebuildPlatformDir(root), "selected.json"), { force: true });
    const run = spawnSync(process.execPath, [path.join(root, "scripts", "install.mjs")], { encoding: "utf8" });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toContain(`using prebuild ${path.join(prebuildPlatformDir(root), name, "comlrl.node")}`);
    expect(selectedPrebuild(root)).toBe(path.join(prebuildPlatformDir(root), name));
  });

  it("names every file it tried and the libtorch it expected when nothing loads", () => {
    const empty = path.join(scratch, "empty-package");
    const brokenDir = path.join(prebuildPlatformDir(empty), "cpu-torch0.0.0");
    mkdirSync(brokenDir, { recursive: true });
    writeFileSync(path.join(brokenDir, "comlrl.node"), "not a shared object");
    writeFileSync(path.join(prebuildPlatformDir(empty), "selected.json"), JSON.stringify({ prebuild: "cpu-torch0.0.0" }));
    let error: unknown;
    try {
      loadAddonFrom(empty);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(AddonLoadError);
    const message = (error as Error).message;
    expect(message).toContain(path.join(empty, "build", "Release", "comlrl.node"));
    expect(message).toContain(path.join(brokenDir, "comlrl.node"));
    expect(message).toMatch(/Expected a build against libtorch \d+\.\d+\.\d+ \((cpu|cuda)\)/);
  });

  it("refuses a bad LIBTORCH path with a message that says how to get libtorch", () => {
    const run = spawnSync(process.execPath, [path.join(packageRoot, "scripts", "install.mjs")], {
      encoding: "utf8",
      env: { ...process.env, LIBTORCH: "/nonexistent/libtorch" },
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain("LIBTORCH=/nonexistent/libtorch is not a libtorch directory");
    expect(run.stderr).toContain("apt-get install libtorch-dev");
  });
});

describe("errors", () => {
  const a = new Float32Array([1, 2, 3, 4, 5, 6]);
  const b = new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]);

  it("turns a libtorch shape mismatch into a short TorchError and keeps running", () => {
    let error: Error | undefined;
    try {
      addon().matmul(a, [2, 3], b, [4, 2]);
    } catch (caught) {
      error = caught as Error;
    }
    expect(error?.name).toBe("TorchError");
    expect(error?.message).toContain("shapes cannot be multiplied");
    expect(error!.message.length).toBeLessThan(200);
    const ok = addon().matmul(a, [2, 3], b.subarray(0, 6), [3, 2]);
    expect(Array.from(ok.data)).toEqual([22, 28, 49, 64]);
    expect(ok.shape).toEqual([2, 2]);
  });

  it("rejects an async call cleanly", async () => {
    await expect(addon().matmulAsync(a, [2, 3], b, [4, 2])).rejects.toMatchObject({ name: "TorchError" });
    const ok = await addon().matmulAsync(a, [3, 2], b.subarray(0, 4), [2, 2]);
    expect(Array.from(ok.data)).toEqual([7, 10, 15, 22, 23, 34]);
  });

  it("rejects arguments of the wrong kind by name", () => {
    expect(() => addon().matmul(illTyped<Float32Array>([1, 2]), [1, 2], b, [2, 4])).toThrow(/a must be a Float32Array/);
  });
});

describe("async work", () => {
  it("leaves the event loop responsive while it runs", async () => {
    const n = 384;
    const m = new Float32Array(n * n).fill(0.001);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 5);
    const started = Date.now();
    await addon().matmulAsync(m, [n, n], m, [n, n], 400);
    const elapsed = Date.now() - started;
    clearInterval(timer);
    expect(elapsed).toBeGreaterThan(100);
    // The timer fires throughout: at least a third of the ideal count (5 ms period).
    expect(ticks).toBeGreaterThan(elapsed / 5 / 3);
  });
});

describe("runtime", () => {
  it("reports the configured thread count and the BLAS in use", () => {
    setNumThreads(1);
    expect(runtimeInfo().numThreads).toBe(1);
    setNumThreads(2);
    const info = runtimeInfo();
    expect(info.numThreads).toBe(2);
    expect(info.torchVersion).toMatch(/^\d+\.\d+\.\d+$/);
    expect(info.blas).toMatch(/OpenBLAS|MKL|BLIS/);
    if (process.env.CI) expect(info.blas).toContain("(openmp)");
    expect(() => setNumThreads(0)).toThrow(RangeError);
  });

  it("keeps freed large CPU blocks for reuse up to its limit, and COMLRL_CPU_CACHE_MB=0 turns that off", async () => {
    expect(runtimeInfo().cpuCacheLimitBytes).toBeGreaterThan(0);
    const n = 1024;
    const m = new Float32Array(n * n).fill(0.5);
    // The product's 4 MiB result tensor is freed once copied out, and stays in the cache.
    await addon().matmulAsync(m, [n, n], m, [n, n], 2);
    expect(runtimeInfo().cpuCacheBytes).toBeGreaterThanOrEqual(n * n * 4);
    expect(runtimeInfo().cpuCacheBytes).toBeLessThanOrEqual(runtimeInfo().cpuCacheLimitBytes);
    const script = `import("${path.join(packageRoot, "src", "runtime.ts")}").then((r) => console.log(JSON.stringify(r.runtimeInfo())))`;
    const run = spawnSync(process.execPath, ["--import", "tsx", "-e", script], { encoding: "utf8", env: { ...process.env, COMLRL_CPU_CACHE_MB: "0" } });
    expect(run.stderr).toBe("");
    expect(JSON.parse(run.stdout)).toMatchObject({ cpuCacheBytes: 0, cpuCacheLimitBytes: 0 });
  });

  it("a request no cached block fits first gives back cached blocks of at least its size", () => {
    // A fresh process: a 1024² product leaves its 4 MiB blocks cached; each 9 MiB block of a 1536² product misses and
    // gives back cached blocks first, so that the 4 MiB ones are gone and the cache holds the 9 MiB blocks only.
    const script = `import("${path.join(packageRoot, "src", "native", "loader.ts")}").then(async ({ addon }) => {
      const cached = () => addon().runtimeInfo().cpuCacheBytes;
      const product = (n) => { const m = new Float32Array(n * n).fill(0.5); return addon().matmulAsync(m, [n, n], m, [n, n], 2); };
      await product(1024);
      const small = cached();
      await product(1536);
      console.log(JSON.stringify({ small, large: cached() }));
    })`;
    const run = spawnSync(process.execPath, ["--import", "tsx", "-e", script], { encoding: "utf8" });
    expect(run.stderr).toBe("");
    const { small, large } = JSON.parse(run.stdout) as { small: number; large: number };
    const block = 1536 * 1536 * 4;
    expect(small).toBeGreaterThanOrEqual(1024 * 1024 * 4);
    expect(large).toBeGreaterThanOrEqual(block);
    expect(large % block).toBe(0);
  });

  it("gives blocks above 256 MiB back to the system when they are freed", async () => {
    const before = runtimeInfo().cpuCacheBytes;
    // Two 300 MiB tensors (the copy's source and target), both freed when the measurement ends.
    await addon().measureCopy({ bytes: 300 * 2 ** 20, device: "cpu", iterations: 1 });
    expect(runtimeInfo().cpuCacheBytes - before).toBeLessThan(256 * 2 ** 20);
  });
});
