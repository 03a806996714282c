// scripts/find-libtorch.mjs on PyTorch layouts laid out by hand (empty files where libraries go): the CUDA headers of
// a wheel (CUDA 13's CCCL folder included) and of a conda environment, whether the NCCL process group is compiled in
// (COMLRL_NCCL=AUTO/ON/OFF), and the warnings for a CUDA PyTorch built as the CPU variant or without NCCL. Then
// install.mjs: a prebuild without NCCL is refused where this libtorch can compile it.
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { packageRoot } from "../../src/native/loader.js";

interface Description {
  includeDirs: string[];
  runtimeLibDirs: string[];
  variant: string;
  torchCuda: string | null;
  torchNccl: boolean;
  ncclFlag: number;
  warnings: string[];
}

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-find-libtorch-"));

function touch(file: string, text = ""): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
}

interface Layout {
  /** Caffe2Targets.cmake exports USE_C10D_NCCL (libtorch built with NCCL). */
  torchNccl?: boolean;
  /** The CUDA libraries (cuBLAS stands for them) are installed. */
  cublas?: boolean;
  /** nccl.h is installed. */
  ncclHeader?: boolean;
}

/** A CUDA 13 PyTorch wheel in site-packages/torch with the nvidia-* wheels beside it; returns torch's folder. */
function wheel(name: string, { torchNccl = true, cublas = true, ncclHeader = true }: Layout = {}): string {
  const site = path.join(scratch, name, "site-packages");
  const torch = path.join(site, "torch");
  libtorch(torch, torchNccl);
  touch(path.join(site, "nvidia", "cu13", "include", "cuda_runtime.h"));
  touch(path.join(site, "nvidia", "cu13", "include", "cccl", "nv", "target"));
  touch(path.join(site, "nvidia", "cu13", "lib", "libcudart.so.13"));
  if (cublas) touch(path.join(site, "nvidia", "cu13", "lib", "libcublas.so.13"));
  if (ncclHeader) touch(path.join(site, "nvidia", "nccl", "include", "nccl.h"));
  return torch;
}

/** The files find-libtorch reads of a bundled libtorch 2.11 built for CUDA 13.0. */
function libtorch(torch: string, torchNccl: boolean): void {
  touch(path.join(torch, "share", "cmake", "Torch", "TorchConfig.cmake"), 'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=1")\n');
  touch(path.join(torch, "share", "cmake", "Caffe2", "Caffe2Targets.cmake"), `INTERFACE_COMPILE_DEFINITIONS "USE_NVSHMEM${torchNccl ? ";USE_C10D_NCCL" : ""}"\n`);
  touch(path.join(torch, "include", "torch", "headeronly", "version.h"), "#define TORCH_VERSION_MAJOR 2\n#define TORCH_VERSION_MINOR 11\n#define TORCH_VERSION_PATCH 0\n");
  touch(path.join(torch, "lib", "libtorch_cuda.so"));
  touch(path.join(torch, "version.py"), "from typing import Optional\n__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\n");
}

/** find-libtorch's description of the libtorch at LIBTORCH, or its error message. */
function find(torch: string, env: Record<string, string> = {}): { description?: Description; error?: string; stderr: string } {
  const run = spawnSync(process.execPath, [path.join(packageRoot, "scripts", "find-libtorch.mjs")], {
    encoding: "utf8",
    env: { PATH: process.env.PATH, LIBTORCH: torch, ...env },
  });
  return run.status === 0 ? { description: JSON.parse(run.stdout) as Description, stderr: run.stderr } : { error: run.stderr, stderr: run.stderr };
}

describe("find-libtorch on a CUDA PyTorch wheel", () => {
  it("builds the CUDA variant with NCCL and CUDA 13's CCCL headers, with no warning", () => {
    const torch = wheel("complete");
    const { description, stderr } = find(torch);
    expect(description).toMatchObject({ variant: "cuda", torchCuda: "13.0", torchNccl: true, ncclFlag: 1, warnings: [] });
    const nvidia = path.join(path.dirname(torch), "nvidia");
    expect(description!.includeDirs).toEqual(
      expect.arrayContaining([path.join(nvidia, "cu13", "include"), path.join(nvidia, "cu13", "include", "cccl"), path.join(nvidia, "nccl", "include")]),
    );
    expect(stderr).toBe("");
  });

  it("leaves NCCL out under COMLRL_NCCL=OFF, and refuses COMLRL_NCCL=ON when it cannot be compiled", () => {
    expect(find(wheel("complete"), { COMLRL_NCCL: "OFF" }).description).toMatchObject({ variant: "cuda", ncclFlag: 0, warnings: [] });
    expect(find(wheel("no-nccl-header", { ncclHeader: false }), { COMLRL_NCCL: "ON" }).error).toContain("COMLRL_NCCL=ON but NCCL cannot be compiled in: nccl.h was not found");
    expect(find(wheel("no-nccl-torch", { torchNccl: false }), { COMLRL_NCCL: "on" }).error).toContain("this libtorch was built without NCCL");
    expect(find(wheel("complete"), { COMLRL_NCCL: "maybe" }).error).toContain('COMLRL_NCCL must be ON, OFF or AUTO, got "maybe"');
  });

  it("warns when this libtorch has NCCL but nccl.h is missing, and builds without it", () => {
    const { description, stderr } = find(wheel("no-nccl-header", { ncclHeader: false }));
    expect(description).toMatchObject({ variant: "cuda", torchNccl: true, ncclFlag: 0 });
    expect(description!.warnings).toEqual([expect.stringContaining("nccl.h was not found")]);
    expect(stderr).toContain("comlrl: warning: this libtorch has NCCL but nccl.h was not found");
  });

  it("warns that a CUDA PyTorch without its CUDA libraries gets the CPU variant, and not when the CPU variant is asked for", () => {
    const torch = wheel("no-cublas", { cublas: false });
    const { description } = find(torch);
    expect(description).toMatchObject({ variant: "cpu", torchCuda: "13.0", ncclFlag: 0 });
    expect(description!.warnings).toEqual([expect.stringMatching(/built for CUDA 13\.0, but its CUDA libraries .* the addon is the CPU variant/)]);
    expect(find(torch, { COMLRL_VARIANT: "cpu" }).description!.warnings).toEqual([]);
  });
});

describe("find-libtorch on conda's CUDA PyTorch", () => {
  // conda keeps the CUDA libraries in <env>/lib, the toolkit headers under <env>/targets/<triplet>/include and
  // conda-forge's nccl.h in <env>/include.
  const prefix = path.join(scratch, "conda-env");
  const torch = path.join(prefix, "lib", "python3.11", "site-packages", "torch");
  libtorch(torch, true);
  touch(path.join(prefix, "conda-meta", "history"));
  touch(path.join(prefix, "lib", "libcublas.so.12"));
  touch(path.join(prefix, "targets", "x86_64-linux", "include", "cuda_runtime.h"));
  touch(path.join(prefix, "include", "nccl.h"));

  it.each([
    ["activated (CONDA_PREFIX set)", { CONDA_PREFIX: prefix }],
    ["not activated (found from torch's folder)", {}],
  ])("finds its CUDA headers, libraries and nccl.h when %s", (_, env) => {
    const { description } = find(torch, env);
    expect(description).toMatchObject({ variant: "cuda", ncclFlag: 1, warnings: [] });
    expect(description!.includeDirs).toEqual(expect.arrayContaining([path.join(prefix, "targets", "x86_64-linux", "include"), path.join(prefix, "include")]));
    expect(description!.runtimeLibDirs).toContain(path.join(prefix, "lib"));
  });
});

describe("install.mjs and a prebuild's NCCL", () => {
  // A package holding a cuda-torch2.11.0 prebuild, installed where find-libtorch sees the complete wheel above. The
  // refused prebuild is never loaded; the source build that follows fails at once here (no cmake-js in the copy).
  function installWith(prebuildNccl: boolean, env: Record<string, string> = {}): string {
    const root = mkdtempSync(path.join(scratch, "package-"));
    mkdirSync(path.join(root, "scripts"));
    for (const script of ["install.mjs", "find-libtorch.mjs", "prebuild.mjs"]) {
      copyFileSync(path.join(packageRoot, "scripts", script), path.join(root, "scripts", script));
    }
    const dir = path.join(root, "prebuilds", `${process.platform}-${process.arch}`, "cuda-torch2.11.0");
    touch(path.join(dir, "comlrl.node"), "not loaded when refused");
    touch(path.join(dir, "comlrl.json"), JSON.stringify({ torchVersion: "2.11.0", variant: "cuda", nccl: prebuildNccl }));
    const run = spawnSync(process.execPath, [path.join(root, "scripts", "install.mjs")], {
      encoding: "utf8",
      env: { PATH: process.env.PATH, LIBTORCH: wheel("complete"), ...env },
    });
    return run.stdout + run.stderr;
  }

  it("refuses a prebuild without NCCL for a libtorch that has it, and builds from source instead", () => {
    const output = installWith(false);
    expect(output).toContain("prebuild cuda-torch2.11.0 was built without NCCL, but this libtorch has it");
    expect(output).toContain("cannot find cmake-js"); // the source build was started (there is none to run here)
  });

  it("tries the prebuild when it has NCCL, or when NCCL is turned off here", () => {
    for (const output of [installWith(true), installWith(false, { COMLRL_NCCL: "OFF" })]) {
      expect(output).not.toContain("was built without NCCL");
      expect(output).toContain("prebuild"); // loading the stand-in file then fails: what matters is that it was tried
      expect(output).toMatch(/prebuild .*comlrl\.node does not load/);
    }
  });
});
