#!/usr/bin/env node
// `npm run prebuild`: copies the built addon to prebuilds/<platform>-<arch>/ with the libtorch it was built against,
// so `npm install` on a machine with the same libtorch skips the native build.
import { copyFileSync, existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { findLibtorch } from "./find-libtorch.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const built = path.join(root, "build", "Release", "comlrl.node");
if (!existsSync(built)) {
  console.error(`comlrl: ${built} does not exist; run \`npm run build:native\` first`);
  process.exit(1);
}
const libtorch = findLibtorch();
const dir = path.join(root, "prebuilds", `${process.platform}-${process.arch}`);
mkdirSync(dir, { recursive: true });
copyFileSync(built, path.join(dir, "comlrl.node.tmp"));
renameSync(path.join(dir, "comlrl.node.tmp"), path.join(dir, "comlrl.node"));
const info = { torchVersion: libtorch.version, variant: libtorch.variant, napiVersion: 8, platform: process.platform, arch: process.arch };
writeFileSync(path.join(dir, "comlrl.json"), `${JSON.stringify(info, null, 2)}\n`);
console.log(`comlrl: wrote ${path.join(dir, "comlrl.node")} for libtorch ${libtorch.version} (${libtorch.variant})`);
