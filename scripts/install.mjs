#!/usr/bin/env node
// `npm install` step: use a prebuilt addon when one matches this machine's libtorch, else build from source.
//   COMLRL_BUILD=gyp    build with node-gyp instead of cmake-js
//   COMLRL_SKIP_BUILD=1 do nothing (packaging, docs builds)
//   COMLRL_PREBUILD_ONLY=1 use a matching prebuild or exit with status 2, never build (scripts/gpu-check.sh builds
//                       itself when the carried prebuild does not fit)
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { findLibtorch } from "./find-libtorch.mjs";
import { SELECTED_FILE, prebuildPlatformDir } from "./prebuild.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function log(message) {
  console.log(`comlrl: ${message}`);
}

// Libraries in these directories are found by the loader without a run path; they are not linked into libs/.
const SYSTEM_LIB_DIRS = new Set(["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib", "/usr/lib64", "/lib", "/lib64"]);

// A prebuild's run path starts at $ORIGIN/libs: link the shared libraries of this machine's libtorch (and, for a
// wheel, of its nvidia-* wheels) there, since where they live differs from the machine the prebuild was built on.
function linkLibraries(dir, libtorch) {
  const libs = path.join(dir, "libs");
  rmSync(libs, { recursive: true, force: true });
  mkdirSync(libs);
  let count = 0;
  for (const libDir of libtorch.runtimeLibDirs.filter((d) => !SYSTEM_LIB_DIRS.has(d))) {
    for (const file of readdirSync(libDir).filter((f) => /\.so(\.|$)/.test(f))) {
      if (existsSync(path.join(libs, file))) continue; // the first directory to hold a library wins, as on a run path
      symlinkSync(path.join(libDir, file), path.join(libs, file));
      count += 1;
    }
  }
  return count;
}

/**
 * The prebuild for this machine's libtorch (version and variant), linked and loaded once here; else null. A prebuild
 * without NCCL is refused where this libtorch can compile it: DDP on GPUs needs it.
 */
function matchingPrebuild(libtorch) {
  const platformDir = prebuildPlatformDir(root);
  const name = `${libtorch.variant}-torch${libtorch.version}`;
  const dir = path.join(platformDir, name);
  if (!existsSync(path.join(dir, "comlrl.node"))) {
    const offered = existsSync(platformDir) ? readdirSync(platformDir).filter((d) => existsSync(path.join(platformDir, d, "comlrl.node"))) : [];
    log(`no prebuild for ${name} (the package has ${offered.length ? offered.join(", ") : "none"}); building from source instead`);
    return null;
  }
  const built = JSON.parse(readFileSync(path.join(dir, "comlrl.json"), "utf8"));
  if (libtorch.ncclFlag === 1 && built.nccl !== true) {
    log(`prebuild ${name} was built without NCCL, but this libtorch has it (DDP would reduce GPU gradients through the CPU); building from source instead`);
    return null;
  }
  const linked = linkLibraries(dir, libtorch);
  const file = path.join(dir, "comlrl.node");
  try {
    createRequire(import.meta.url)(file);
  } catch (error) {
    log(`prebuild ${file} does not load (${error.message.split("\n")[0]}); building from source instead`);
    return null;
  }
  writeFileSync(path.join(platformDir, SELECTED_FILE), `${JSON.stringify({ prebuild: name }, null, 2)}\n`);
  if (linked) log(`linked ${linked} libraries of libtorch ${libtorch.version} into ${path.join(dir, "libs")}`);
  return file;
}

// Build tools are found through Node's module resolution, not in ./node_modules/.bin: installed as a dependency,
// comlrl's own dependencies are usually hoisted into the consuming project's node_modules.
const requireHere = createRequire(import.meta.url);

/** The bin script `bin` of `pkg`, when that package resolves from here. */
function packageBin(pkg, bin) {
  let manifest;
  try {
    manifest = requireHere.resolve(`${pkg}/package.json`);
  } catch {
    return null;
  }
  const bins = JSON.parse(readFileSync(manifest, "utf8")).bin;
  const relative = typeof bins === "string" ? bins : bins?.[bin];
  return relative ? path.join(path.dirname(manifest), relative) : null;
}

/** [command, leading args]: a package's bin run with this Node, npm's bundled node-gyp, or node-gyp on PATH. */
function buildTool(tool) {
  if (tool === "cmake") {
    const script = packageBin("cmake-js", "cmake-js");
    if (!script) {
      console.error("comlrl: cannot find cmake-js (a dependency of comlrl); reinstall, or set COMLRL_BUILD=gyp");
      process.exit(1);
    }
    return [process.execPath, [script]];
  }
  const script = packageBin("node-gyp", "node-gyp") ?? process.env.npm_config_node_gyp;
  return script ? [process.execPath, [script]] : ["node-gyp", []];
}

function build(tool) {
  const [command, prefix] = buildTool(tool);
  const args = [...prefix, ...(tool === "gyp" ? ["rebuild", "-j", "max"] : ["compile", "--out", "build"])];
  log(`building the native addon with ${tool === "gyp" ? "node-gyp" : "cmake-js"}`);
  const started = Date.now();
  // With the Makefile generator (no ninja installed) cmake --build runs make serially unless told otherwise.
  const env = { ...process.env, CMAKE_BUILD_PARALLEL_LEVEL: process.env.CMAKE_BUILD_PARALLEL_LEVEL ?? String(availableParallelism()) };
  const result = spawnSync(command, args, { cwd: root, stdio: "inherit", env });
  if (result.status !== 0) {
    const why = result.error ? `could not start: ${result.error.message}` : `exited with ${result.status ?? result.signal}`;
    console.error(`comlrl: native build failed (${command} ${args.join(" ")} ${why})`);
    process.exit(1);
  }
  log(`native build finished in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

if (process.env.COMLRL_SKIP_BUILD === "1") {
  log("COMLRL_SKIP_BUILD=1: native build skipped");
  process.exit(0);
}
let libtorch;
try {
  libtorch = findLibtorch();
} catch (error) {
  console.error(`comlrl: ${error.message}`);
  process.exit(1);
}
log(`libtorch ${libtorch.version} (${libtorch.variant}${libtorch.ncclFlag ? ", NCCL" : ""}) from ${libtorch.source}: ${libtorch.cmakeDir}`);
for (const warning of libtorch.warnings) log(`warning: ${warning}`);
const prebuild = matchingPrebuild(libtorch);
if (prebuild) {
  log(`using prebuild ${prebuild}`);
} else if (process.env.COMLRL_PREBUILD_ONLY === "1") {
  log("COMLRL_PREBUILD_ONLY=1: no usable prebuild, nothing built");
  process.exit(2);
} else {
  build(process.env.COMLRL_BUILD === "gyp" ? "gyp" : "cmake");
}
