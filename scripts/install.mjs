#!/usr/bin/env node
// `npm install` step: use a prebuilt addon when one matches this machine's libtorch, else build from source.
//   COMLRL_BUILD=gyp    build with node-gyp instead of cmake-js
//   COMLRL_SKIP_BUILD=1 do nothing (packaging, docs builds)
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { findLibtorch } from "./find-libtorch.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function log(message) {
  console.log(`comlrl: ${message}`);
}

function matchingPrebuild(libtorch) {
  const dir = path.join(root, "prebuilds", `${process.platform}-${process.arch}`);
  const infoFile = path.join(dir, "comlrl.json");
  if (!existsSync(infoFile)) return null;
  const info = JSON.parse(readFileSync(infoFile, "utf8"));
  if (info.torchVersion !== libtorch.version || info.variant !== libtorch.variant) {
    log(`prebuild in ${dir} is for libtorch ${info.torchVersion} (${info.variant}); building from source instead`);
    return null;
  }
  const file = path.join(dir, "comlrl.node");
  try {
    createRequire(import.meta.url)(file);
    return file;
  } catch (error) {
    log(`prebuild ${file} does not load (${error.message.split("\n")[0]}); building from source instead`);
    return null;
  }
}

function build(tool) {
  const bin = (name) => path.join(root, "node_modules", ".bin", name);
  const [command, args] =
    tool === "gyp" ? [existsSync(bin("node-gyp")) ? bin("node-gyp") : "node-gyp", ["rebuild", "-j", "max"]] : [bin("cmake-js"), ["compile", "--out", "build"]];
  log(`building the native addon with ${tool === "gyp" ? "node-gyp" : "cmake-js"}`);
  const started = Date.now();
  const result = spawnSync(command, args, { cwd: root, stdio: "inherit" });
  if (result.status !== 0) {
    console.error(`comlrl: native build failed (${command} ${args.join(" ")} exited with ${result.status ?? result.signal})`);
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
log(`libtorch ${libtorch.version} (${libtorch.variant}) from ${libtorch.source}: ${libtorch.cmakeDir}`);
const prebuild = matchingPrebuild(libtorch);
if (prebuild) {
  log(`using prebuild ${prebuild}`);
} else {
  build(process.env.COMLRL_BUILD === "gyp" ? "gyp" : "cmake");
}
