#!/usr/bin/env node
// `npm run prebuild`: builds the addon for each variant this machine's libtorch offers (cpu; cuda too when it is a
// CUDA libtorch) and stores it as prebuilds/<platform>-<arch>/<variant>-torch<version>/comlrl.node with a
// comlrl.json saying what it was built against (libtorch version, variant, NCCL), so `npm install` on a machine with
// the same libtorch skips the native build (scripts/install.mjs picks the match).
//   --variants cpu,cuda   which variants to build (default: every one this libtorch offers)
//   --from-build [DIR]    store the existing DIR/Release/comlrl.node (default build/; built for this environment's
//                         COMLRL_VARIANT) instead of building
//   --out BASE            with --from-build: store under BASE/prebuilds instead of this package's prebuilds (the
//                         GPU check carries one in .gpu/)
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { findLibtorch } from "./find-libtorch.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** prebuilds/<platform>-<arch>: every prebuild for this machine kind, one folder per libtorch variant and version. */
export function prebuildPlatformDir(base = root) {
  return path.join(base, "prebuilds", `${process.platform}-${process.arch}`);
}

/** The file in prebuildPlatformDir where install.mjs records the prebuild it chose; src/native/loader.ts reads it. */
export const SELECTED_FILE = "selected.json";

/** <base>/prebuilds/<platform>-<arch>/<variant>-torch<version>: where install.mjs looks for a match. */
function prebuildDir(libtorch, base) {
  return path.join(prebuildPlatformDir(base), `${libtorch.variant}-torch${libtorch.version}`);
}

/**
 * What the addon at `built` was compiled against: comlrl.build.json beside it (CMakeLists.txt writes it), else this
 * environment's libtorch as find-libtorch describes it (a node-gyp build).
 */
function builtAgainst(built, libtorch) {
  const file = path.join(path.dirname(built), "comlrl.build.json");
  if (!existsSync(file)) return { version: libtorch.version, variant: libtorch.variant, nccl: libtorch.ncclFlag === 1 };
  const info = JSON.parse(readFileSync(file, "utf8"));
  return { version: info.torchVersion, variant: info.variant, nccl: info.nccl === 1 };
}

function store(built, libtorch, base = root) {
  const against = builtAgainst(built, libtorch);
  if (against.version !== libtorch.version) {
    fail(`${built} was built against libtorch ${against.version}, but the libtorch found now is ${libtorch.version} (${libtorch.cmakeDir})`);
  }
  const dir = prebuildDir({ ...libtorch, variant: against.variant }, base);
  mkdirSync(dir, { recursive: true });
  rmSync(path.join(dir, "libs"), { recursive: true, force: true }); // links an install made here; never packed
  copyFileSync(built, path.join(dir, "comlrl.node.tmp"));
  renameSync(path.join(dir, "comlrl.node.tmp"), path.join(dir, "comlrl.node"));
  // nccl: whether DDP reduces GPU gradients with NCCL; install.mjs builds from source rather than take a prebuild
  // without it where this machine's libtorch has it.
  const info = {
    torchVersion: libtorch.version, variant: against.variant, nccl: against.nccl, cxxStandard: libtorch.cxxStandard, napiVersion: 8,
    platform: process.platform, arch: process.arch,
  };
  writeFileSync(path.join(dir, "comlrl.json"), `${JSON.stringify(info, null, 2)}\n`);
  console.log(`comlrl: wrote ${path.join(dir, "comlrl.node")} for libtorch ${libtorch.version} (${against.variant}${against.nccl ? ", NCCL" : ""})`);
}

function fail(message) {
  console.error(`comlrl: ${message}`);
  process.exit(1);
}

function buildVariant(variant) {
  const env = { ...process.env, COMLRL_VARIANT: variant };
  const libtorch = findLibtorch(env);
  const out = path.join("build", `prebuild-${variant}`);
  const cmakeJs = path.join(root, "node_modules", "cmake-js", "bin", "cmake-js");
  console.log(`comlrl: building the ${variant} variant against libtorch ${libtorch.version} in ${out}`);
  const result = spawnSync(process.execPath, [cmakeJs, "compile", "--out", out], {
    cwd: root,
    stdio: "inherit",
    env: { ...env, CMAKE_BUILD_PARALLEL_LEVEL: process.env.CMAKE_BUILD_PARALLEL_LEVEL ?? String(availableParallelism()) },
  });
  if (result.status !== 0) fail(`the ${variant} build failed (cmake-js exited with ${result.status ?? result.signal})`);
  store(path.join(root, out, "Release", "comlrl.node"), libtorch);
}

/** Whether this libtorch has a CUDA half (COMLRL_VARIANT=cuda is accepted for it). */
function hasCuda() {
  try {
    findLibtorch({ ...process.env, COMLRL_VARIANT: "cuda" });
    return true;
  } catch {
    return false;
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const from = process.argv.indexOf("--from-build");
  if (from >= 0) {
    const dir = process.argv[from + 1] && !process.argv[from + 1].startsWith("--") ? process.argv[from + 1] : "build";
    const built = path.join(root, dir, "Release", "comlrl.node");
    if (!existsSync(built)) fail(`${built} does not exist; run \`npm run build:native\` first`);
    const out = process.argv.indexOf("--out");
    store(built, findLibtorch(), out >= 0 ? path.resolve(process.argv[out + 1]) : root);
  } else {
    const at = process.argv.indexOf("--variants");
    const offered = hasCuda() ? ["cpu", "cuda"] : ["cpu"];
    const variants = at >= 0 ? process.argv[at + 1].split(",") : offered;
    for (const variant of variants) {
      if (variant !== "cpu" && variant !== "cuda") fail(`--variants takes cpu and/or cuda, got "${variant}"`);
      buildVariant(variant);
    }
  }
}
