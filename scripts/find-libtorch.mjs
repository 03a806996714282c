#!/usr/bin/env node
// Finds the libtorch to build against, in the documented order, and describes it for cmake-js, node-gyp and the
// prebuild matcher. One source of truth: CMakeLists.txt, binding.gyp and scripts/install.mjs all ask this script.
//
//   node scripts/find-libtorch.mjs            JSON description
//   node scripts/find-libtorch.mjs --field F  one field (cmakeDir, includeDirs, libDir, runtimeLibDirs, libs, linkFlags,
//                                             cxxStandard, cxxFlags, version, variant, cudaFlag, openmp, torchCuda,
//                                             torchNccl, ncclFlag, warnings)
// COMLRL_VARIANT=cpu|cuda chooses the variant of a CUDA libtorch; COMLRL_NCCL=AUTO|ON|OFF whether the CUDA variant
// compiles the NCCL process group (ON: fail when it cannot); PYTHON names the interpreter asked for torch. With no --field,
// warnings (PyTorch is CUDA but the variant is cpu; NCCL left out) go to stderr.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HOW_TO_GET =
  "Install one of: Debian's package (apt-get install libtorch-dev libopenblas0-openmp), " +
  "a libtorch archive unpacked anywhere (then LIBTORCH=/path/to/libtorch), " +
  "or PyTorch for python3 (its bundled libtorch is found automatically).";

export class LibtorchNotFoundError extends Error {
  constructor(message) {
    super(`${message}\n${HOW_TO_GET}`);
    this.name = "LibtorchNotFoundError";
  }
}

function readVersion(includeDirs) {
  // 2.x keeps the numbers in torch/headeronly/version.h, 1.13 in the C++ API's torch/version.h.
  const files = includeDirs.flatMap((dir) => [
    path.join(dir, "torch", "headeronly", "version.h"),
    path.join(dir, "torch", "csrc", "api", "include", "torch", "version.h"),
  ]);
  for (const file of files) {
    if (!existsSync(file)) continue;
    const text = readFileSync(file, "utf8");
    const part = (name) => text.match(new RegExp(`#define TORCH_VERSION_${name} (\\d+)`))?.[1];
    if (part("MAJOR") !== undefined) return `${part("MAJOR")}.${part("MINOR")}.${part("PATCH")}`;
  }
  return null;
}

// The C++ standard libtorch's headers demand: 2.x from PyTorch's wheels `#error` below C++20, 1.13 wants C++17.
function cxxStandard(includeRoot) {
  const aten = path.join(includeRoot, "ATen", "ATen.h");
  return existsSync(aten) && /__cplusplus < 202002L/.test(readFileSync(aten, "utf8")) ? 20 : 17;
}

// The conda environment a libtorch belongs to: $CONDA_PREFIX, or the prefix above <prefix>/lib/pythonX.Y/site-packages/torch
// when that holds conda-meta (an environment used without being activated).
function condaPrefixes(root, env) {
  const above = path.resolve(root, "..", "..", "..", "..");
  return [...new Set([env.CONDA_PREFIX, above].filter(Boolean))].filter((prefix) => existsSync(path.join(prefix, "conda-meta")));
}

// Where a CUDA libtorch's CUDA headers and libraries live. A PyTorch wheel takes them from the nvidia-* wheels beside
// it (site-packages/nvidia/<part>/{include,lib}); conda's PyTorch from its environment (headers under
// targets/<triplet>/include, libraries in lib); a libtorch archive from CUDA_HOME or /usr/local/cuda. CUDA 13 moved
// CCCL (nv/target, cuda/std, which cuda_fp16.h includes) into include/cccl.
function cudaDirs(root, env) {
  const nvidia = path.resolve(root, "..", "nvidia");
  const parts = existsSync(nvidia) ? readdirSync(nvidia).map((part) => path.join(nvidia, part)) : [];
  const conda = condaPrefixes(root, env).flatMap((prefix) => {
    const targets = path.join(prefix, "targets");
    const includes = existsSync(targets) ? readdirSync(targets).map((triplet) => path.join(targets, triplet, "include")) : [];
    // nccl.h sits in the environment's own include/ (conda-forge's nccl); the rest of that folder is not CUDA's.
    const own = ["nccl.h", "cuda_runtime.h"].some((header) => existsSync(path.join(prefix, "include", header))) ? [path.join(prefix, "include")] : [];
    return [{ includes: [...includes, ...own], lib: path.join(prefix, "lib") }];
  });
  const toolkit = [env.CUDA_HOME, env.CUDA_PATH, "/usr/local/cuda"].filter(Boolean).filter((dir) => existsSync(path.join(dir, "include")));
  const dirs = [...parts, ...toolkit.slice(0, 1)];
  const includeDirs = [...dirs.map((dir) => path.join(dir, "include")), ...conda.flatMap((found) => found.includes)];
  return {
    includeDirs: includeDirs.flatMap((dir) => [dir, path.join(dir, "cccl")]).filter(existsSync),
    libDirs: [
      ...dirs.map((dir) => path.join(dir, "lib")), ...toolkit.slice(0, 1).map((dir) => path.join(dir, "lib64")), ...conda.map((found) => found.lib),
    ].filter(existsSync),
  };
}

// Whether the libraries libtorch_cuda needs at load time (cuBLAS stands for the set) are where the addon will look:
// a wheel installed with --no-deps has libtorch_cuda but not cuBLAS, and only its CPU half can be used.
function cudaRuntimePresent(libDir, cudaLibDirs) {
  return [libDir, ...cudaLibDirs, "/usr/lib/x86_64-linux-gnu", "/usr/local/cuda/lib64"].some(
    (dir) => existsSync(dir) && readdirSync(dir).some((f) => /^libcublas\.so/.test(f)),
  );
}

// The CUDA version PyTorch was built with (torch/version.py's `cuda`), or null: a CPU PyTorch, or a libtorch
// without the Python package.
function torchCudaVersion(root) {
  const file = path.join(root, "version.py");
  if (!existsSync(file)) return null;
  return readFileSync(file, "utf8").match(/^cuda(?:: [^=]+)? = '([^']+)'/m)?.[1] ?? null;
}

// Whether libtorch was built with NCCL: its CMake targets then export USE_C10D_NCCL to their users.
function torchHasNccl(cmakeDir) {
  const targets = path.resolve(cmakeDir, "..", "Caffe2", "Caffe2Targets.cmake");
  return existsSync(targets) && /USE_C10D_NCCL/.test(readFileSync(targets, "utf8"));
}

// COMLRL_NCCL: AUTO (the default: NCCL whenever the CUDA variant can have it), ON (fail when it cannot) or OFF.
function ncclSetting(env) {
  const value = (env.COMLRL_NCCL ?? "AUTO").toUpperCase();
  if (!["AUTO", "ON", "OFF"].includes(value)) throw new LibtorchNotFoundError(`COMLRL_NCCL must be ON, OFF or AUTO, got "${env.COMLRL_NCCL}".`);
  return value;
}

// Describes the libtorch whose CMake package lives in cmakeDir, or returns null when that is not a libtorch.
// COMLRL_VARIANT=cpu builds against a CUDA libtorch's CPU half only; =cuda insists on CUDA.
function describe(cmakeDir, source, env = process.env) {
  if (!existsSync(path.join(cmakeDir, "TorchConfig.cmake"))) return null;
  // Bundled layout: <root>/share/cmake/Torch. Debian layout: /usr/lib/<triplet>/cmake/Torch with headers in /usr/include.
  const bundledRoot = path.resolve(cmakeDir, "..", "..", "..");
  const bundled = existsSync(path.join(bundledRoot, "include", "torch"));
  const root = bundled ? bundledRoot : "/usr";
  const includeRoot = path.join(root, "include");
  const libDir = bundled ? path.join(root, "lib") : path.resolve(cmakeDir, "..", "..");
  const torchIncludeDirs = [includeRoot, path.join(includeRoot, "torch", "csrc", "api", "include")];
  const version = readVersion([includeRoot]);
  if (!version) return null;
  const libFiles = existsSync(libDir) ? readdirSync(libDir) : [];
  const hasCudaLib = libFiles.some((f) => /^libtorch_cuda\.(so|dylib)/.test(f) || f === "torch_cuda.lib");
  const cuda = hasCudaLib ? cudaDirs(root, env) : { includeDirs: [], libDirs: [] };
  const cudaUsable = hasCudaLib && cudaRuntimePresent(libDir, cuda.libDirs);
  const requested = env.COMLRL_VARIANT;
  if (requested !== undefined && requested !== "cpu" && requested !== "cuda") {
    throw new LibtorchNotFoundError(`COMLRL_VARIANT must be "cpu" or "cuda", got "${requested}".`);
  }
  if (requested === "cuda" && !hasCudaLib) throw new LibtorchNotFoundError(`COMLRL_VARIANT=cuda but the libtorch in ${libDir} has no libtorch_cuda.`);
  const variant = requested ?? (cudaUsable ? "cuda" : "cpu");
  const withCuda = variant === "cuda";
  const torchCuda = torchCudaVersion(root);
  const warnings = [];
  if (torchCuda && !withCuda && requested !== "cpu") {
    warnings.push(
      `PyTorch here is built for CUDA ${torchCuda}, but its CUDA libraries (cuBLAS, ...) were not found beside it ` +
        `(looked in ${[libDir, ...cuda.libDirs].join(", ")}), so the addon is the CPU variant and trains on the CPU. ` +
        "Install PyTorch with its nvidia-* dependencies, set CUDA_HOME, or set COMLRL_VARIANT=cuda to build the CUDA variant anyway.",
    );
  }
  // NCCL is compiled in only for the CUDA variant of a libtorch built with it, with nccl.h among the CUDA headers.
  const torchNccl = hasCudaLib && torchHasNccl(cmakeDir);
  const ncclHeader = cuda.includeDirs.some((dir) => existsSync(path.join(dir, "nccl.h")));
  const ncclWanted = ncclSetting(env);
  const nccl = withCuda && torchNccl && ncclHeader && ncclWanted !== "OFF";
  const ncclMissing = !withCuda ? "the variant is cpu" : !torchNccl ? "this libtorch was built without NCCL" : !ncclHeader ? "nccl.h was not found" : "";
  if (ncclWanted === "ON" && !nccl) {
    throw new LibtorchNotFoundError(`COMLRL_NCCL=ON but NCCL cannot be compiled in: ${ncclMissing} (CUDA headers searched: ${cuda.includeDirs.join(", ") || "none"}).`);
  }
  if (withCuda && torchNccl && !ncclHeader && ncclWanted === "AUTO") {
    warnings.push(
      "this libtorch has NCCL but nccl.h was not found (install the nvidia-nccl wheel PyTorch names, or set CUDA_HOME): " +
        "the addon is built without NCCL, and DDP reduces GPU gradients through the CPU (Gloo).",
    );
  }
  // libtorch_cpu of a CUDA build still NEEDS libcudart and libcupti: their directories go on the rpath either way.
  const runtimeLibDirs = [libDir, ...cuda.libDirs];
  // A CUDA libtorch's libtorch.so NEEDS libtorch_cuda: its CPU half links libtorch_cpu alone.
  const libs = withCuda ? ["torch", "torch_cpu", "c10", "torch_cuda", "c10_cuda"] : [...(hasCudaLib ? [] : ["torch"]), "torch_cpu", "c10"];
  // The ABI define must match the one libtorch was built with: a mismatch links but fails at load time.
  const config = readFileSync(path.join(cmakeDir, "TorchConfig.cmake"), "utf8");
  const abiFlags = [...config.matchAll(/set\(TORCH_CXX_FLAGS "([^"]*)"\)/g)].at(-1)?.[1].split(/\s+/).filter(Boolean) ?? [];
  // ATen's parallel_for is a header template: built without -fopenmp, its `omp parallel` is dropped and every
  // parallel loop the addon writes runs on one thread, whatever the intra-op thread count says.
  const atenConfig = path.join(includeRoot, "ATen", "Config.h");
  const openmp = existsSync(atenConfig) && /#define AT_PARALLEL_OPENMP 1/.test(readFileSync(atenConfig, "utf8"));
  const parallelFlags = openmp ? ["-fopenmp"] : [];
  const standard = cxxStandard(includeRoot);
  // Run path: the directories found here, after $ORIGIN/libs (which binding.gyp and CMakeLists.txt put first: an
  // installed prebuild finds this machine's libtorch linked there, see install.mjs). DT_RPATH, not DT_RUNPATH:
  // libtorch_cuda has no run path of its own, and only an RPATH of the addon is searched for the libraries it needs
  // in turn (cuBLAS, NCCL, ... in the nvidia wheels).
  // --no-as-needed around them: Debian's gcc links --as-needed, which drops libtorch_cuda from the CUDA variant (the
  // addon calls nothing in it directly), and only its static initialisers register the CUDA kernels.
  const linkFlags = [
    `-L${libDir}`, "-Wl,--no-as-needed", ...libs.map((lib) => `-l${lib}`), "-Wl,--as-needed", "-Wl,--disable-new-dtags",
    ...runtimeLibDirs.map((dir) => `-Wl,-rpath,${dir}`), ...parallelFlags,
  ];
  return {
    source, cmakeDir, root, includeDirs: [...torchIncludeDirs, ...(withCuda ? cuda.includeDirs : [])], libDir, runtimeLibDirs, libs,
    linkFlags, cxxStandard: standard, cxxFlags: [...abiFlags, ...parallelFlags], version,
    variant, cudaFlag: withCuda ? 1 : 0, openmp: openmp ? 1 : 0, torchCuda, torchNccl, ncclFlag: nccl ? 1 : 0, warnings,
  };
}

function fromPrefixList(list, source, env) {
  for (const prefix of list.split(path.delimiter).filter(Boolean)) {
    for (const candidate of [prefix, path.join(prefix, "share", "cmake", "Torch"), path.join(prefix, "lib", "cmake", "Torch")]) {
      const found = describe(candidate, source, env);
      if (found) return found;
    }
  }
  return null;
}

// python3 on PATH (a venv's when one is active): torch's location is asked of the import system without importing
// torch, which would fail for a wheel installed without its nvidia-* dependencies (`import torch` preloads cuBLAS).
function fromPython(env) {
  const python = env.PYTHON ?? "python3";
  try {
    const dir = execFileSync(python, ["-c", "import importlib.util as u; s = u.find_spec('torch'); print(s.submodule_search_locations[0] if s else '')"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 60_000,
    }).trim();
    return dir ? describe(path.join(dir, "share", "cmake", "Torch"), `${python} torch`, env) : null;
  } catch {
    return null; // no python3: the next source is tried
  }
}

function fromSystem(env) {
  for (const base of ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/usr/local/lib"]) {
    const found = describe(path.join(base, "cmake", "Torch"), "system", env);
    if (found) return found;
  }
  return null;
}

export function findLibtorch(env = process.env) {
  if (env.LIBTORCH) {
    const found = describe(path.join(env.LIBTORCH, "share", "cmake", "Torch"), "LIBTORCH", env) ?? describe(env.LIBTORCH, "LIBTORCH", env);
    if (!found) {
      throw new LibtorchNotFoundError(
        `LIBTORCH=${env.LIBTORCH} is not a libtorch directory (expected ${path.join(env.LIBTORCH, "share", "cmake", "Torch", "TorchConfig.cmake")} and include/torch).`,
      );
    }
    return found;
  }
  if (env.Torch_DIR) {
    const found = describe(env.Torch_DIR, "Torch_DIR", env);
    if (!found) throw new LibtorchNotFoundError(`Torch_DIR=${env.Torch_DIR} holds no TorchConfig.cmake with libtorch headers.`);
    return found;
  }
  const fromPrefix = env.CMAKE_PREFIX_PATH ? fromPrefixList(env.CMAKE_PREFIX_PATH, "CMAKE_PREFIX_PATH", env) : null;
  const found = fromPrefix ?? fromPython(env) ?? fromSystem(env);
  if (!found) throw new LibtorchNotFoundError("No libtorch found (looked at LIBTORCH, Torch_DIR, CMAKE_PREFIX_PATH, python3's torch, the system).");
  return found;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (process.argv.includes("--sources")) {
    // binding.gyp's source list: every .cc under native/, as CMakeLists.txt globs them.
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
    const sources = readdirSync(path.join(root, "native"), { recursive: true }).filter((f) => f.endsWith(".cc"));
    console.log(sources.map((f) => path.join("native", f)).join(" "));
    process.exit(0);
  }
  try {
    const info = findLibtorch();
    const fieldAt = process.argv.indexOf("--field");
    if (fieldAt < 0) {
      for (const warning of info.warnings) console.error(`comlrl: warning: ${warning}`);
      console.log(JSON.stringify(info, null, 2));
    } else {
      const value = info[process.argv[fieldAt + 1]];
      // node-gyp splits command output on whitespace; cmake reads a ;-list.
      const sep = process.argv.includes("--cmake") ? ";" : " ";
      console.log(Array.isArray(value) ? value.join(sep) : String(value));
    }
  } catch (error) {
    console.error(`comlrl: ${error.message}`);
    process.exit(1);
  }
}
