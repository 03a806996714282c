#!/usr/bin/env node
// Finds the libtorch to build against, in the documented order, and describes it for cmake-js, node-gyp and the
// prebuild matcher. One source of truth: CMakeLists.txt, binding.gyp and scripts/install.mjs all ask this script.
//
//   node scripts/find-libtorch.mjs            JSON description
//   node scripts/find-libtorch.mjs --field F  one field (cmakeDir, includeDirs, libDir, libs, version, variant, openmp, ...)
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
  for (const dir of includeDirs) {
    const file = path.join(dir, "torch", "csrc", "api", "include", "torch", "version.h");
    if (!existsSync(file)) continue;
    const text = readFileSync(file, "utf8");
    const part = (name) => text.match(new RegExp(`#define TORCH_VERSION_${name} (\\d+)`))?.[1];
    if (part("MAJOR") !== undefined) return `${part("MAJOR")}.${part("MINOR")}.${part("PATCH")}`;
  }
  return null;
}

// Describes the libtorch whose CMake package lives in cmakeDir, or returns null when that is not a libtorch.
function describe(cmakeDir, source) {
  if (!existsSync(path.join(cmakeDir, "TorchConfig.cmake"))) return null;
  // Bundled layout: <root>/share/cmake/Torch. Debian layout: /usr/lib/<triplet>/cmake/Torch with headers in /usr/include.
  const bundledRoot = path.resolve(cmakeDir, "..", "..", "..");
  const bundled = existsSync(path.join(bundledRoot, "include", "torch"));
  const root = bundled ? bundledRoot : "/usr";
  const includeRoot = path.join(root, "include");
  const libDir = bundled ? path.join(root, "lib") : path.resolve(cmakeDir, "..", "..");
  const includeDirs = [includeRoot, path.join(includeRoot, "torch", "csrc", "api", "include")];
  const version = readVersion([includeRoot]);
  if (!version) return null;
  const libFiles = existsSync(libDir) ? readdirSync(libDir) : [];
  const cuda = libFiles.some((f) => /^libtorch_cuda\.(so|dylib)/.test(f) || f === "torch_cuda.lib");
  const libs = ["torch", "torch_cpu", "c10", ...(cuda ? ["torch_cuda", "c10_cuda"] : [])];
  // The ABI define must match the one libtorch was built with: a mismatch links but fails at load time.
  const config = readFileSync(path.join(cmakeDir, "TorchConfig.cmake"), "utf8");
  const cxxFlags = [...config.matchAll(/set\(TORCH_CXX_FLAGS "([^"]*)"\)/g)].at(-1)?.[1].split(/\s+/).filter(Boolean) ?? [];
  // ATen's parallel_for is a header template: built without -fopenmp, its `omp parallel` is dropped and every
  // parallel loop the addon writes runs on one thread, whatever the intra-op thread count says.
  const atenConfig = path.join(includeRoot, "ATen", "Config.h");
  const openmp = existsSync(atenConfig) && /#define AT_PARALLEL_OPENMP 1/.test(readFileSync(atenConfig, "utf8"));
  const parallelFlags = openmp ? ["-fopenmp"] : [];
  const linkFlags = [`-L${libDir}`, ...libs.map((lib) => `-l${lib}`), `-Wl,-rpath,${libDir}`, ...parallelFlags];
  return {
    source, cmakeDir, root, includeDirs, libDir, libs, linkFlags, cxxFlags: [...cxxFlags, ...parallelFlags], version,
    variant: cuda ? "cuda" : "cpu", cudaFlag: cuda ? 1 : 0, openmp: openmp ? 1 : 0,
  };
}

function fromPrefixList(list, source) {
  for (const prefix of list.split(path.delimiter).filter(Boolean)) {
    for (const candidate of [prefix, path.join(prefix, "share", "cmake", "Torch"), path.join(prefix, "lib", "cmake", "Torch")]) {
      const found = describe(candidate, source);
      if (found) return found;
    }
  }
  return null;
}

function fromPython() {
  try {
    const prefix = execFileSync("python3", ["-c", "import torch.utils; print(torch.utils.cmake_prefix_path)"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 60_000,
    }).trim();
    return prefix ? fromPrefixList(prefix, "python3 torch") : null;
  } catch {
    return null; // no python3 or no torch module: the next source is tried
  }
}

function fromSystem() {
  for (const base of ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/usr/local/lib"]) {
    const found = describe(path.join(base, "cmake", "Torch"), "system");
    if (found) return found;
  }
  return null;
}

export function findLibtorch(env = process.env) {
  if (env.LIBTORCH) {
    const found = describe(path.join(env.LIBTORCH, "share", "cmake", "Torch"), "LIBTORCH") ?? describe(env.LIBTORCH, "LIBTORCH");
    if (!found) {
      throw new LibtorchNotFoundError(
        `LIBTORCH=${env.LIBTORCH} is not a libtorch directory (expected ${path.join(env.LIBTORCH, "share", "cmake", "Torch", "TorchConfig.cmake")} and include/torch).`,
      );
    }
    return found;
  }
  if (env.Torch_DIR) {
    const found = describe(env.Torch_DIR, "Torch_DIR");
    if (!found) throw new LibtorchNotFoundError(`Torch_DIR=${env.Torch_DIR} holds no TorchConfig.cmake with libtorch headers.`);
    return found;
  }
  const fromPrefix = env.CMAKE_PREFIX_PATH ? fromPrefixList(env.CMAKE_PREFIX_PATH, "CMAKE_PREFIX_PATH") : null;
  const found = fromPrefix ?? fromPython() ?? fromSystem();
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
