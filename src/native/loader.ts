// Finds and loads the native addon: the local build first, then the prebuild `npm install` chose for this machine's
// libtorch (install.mjs matches libtorch version and variant and records its choice).
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { NativeAddon } from "./binding.js";
import { numThreadsFromEnvironment } from "./threads.js";

export const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

/** What a prebuild was built against, written beside it by `npm run prebuild`. */
export interface PrebuildInfo {
  torchVersion: string;
  variant: "cpu" | "cuda";
  cxxStandard: number;
  napiVersion: number;
  platform: string;
  arch: string;
}

/** prebuilds/<platform>-<arch>: one folder per prebuild, named <variant>-torch<version>. */
export function prebuildPlatformDir(root = packageRoot): string {
  return path.join(root, "prebuilds", `${process.platform}-${process.arch}`);
}

export function readPrebuildInfo(dir: string): PrebuildInfo | null {
  const file = path.join(dir, "comlrl.json");
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as PrebuildInfo) : null;
}

/** The prebuild folder `npm install` chose for this machine's libtorch (scripts/install.mjs writes selected.json). */
export function selectedPrebuild(root = packageRoot): string | null {
  const file = path.join(prebuildPlatformDir(root), "selected.json");
  if (!existsSync(file)) return null;
  const { prebuild } = JSON.parse(readFileSync(file, "utf8")) as { prebuild: string };
  return path.join(prebuildPlatformDir(root), prebuild);
}

/** The native addon could not be loaded; the message lists every path tried and how to build it. */
export class AddonLoadError extends Error {
  /** Always "AddonLoadError". */
  override name = "AddonLoadError";
}

function candidates(root: string): Array<{ file: string; note: string }> {
  if (process.env.COMLRL_ADDON) return [{ file: path.resolve(process.env.COMLRL_ADDON), note: "from COMLRL_ADDON" }];
  const local = { file: path.join(root, "build", "Release", "comlrl.node"), note: "local build" };
  const selected = selectedPrebuild(root);
  if (!selected) return [local];
  const info = readPrebuildInfo(selected);
  const note = info ? `prebuild for libtorch ${info.torchVersion} (${info.variant}), chosen at install` : "prebuild chosen at install";
  return [local, { file: path.join(selected, "comlrl.node"), note }];
}

/** Loads the addon of the package at root: its local build, else its prebuild. Throws AddonLoadError naming each try. */
export function loadAddonFrom(root: string): { addon: NativeAddon; file: string } {
  const require = createRequire(import.meta.url);
  const failures: string[] = [];
  for (const { file, note } of candidates(root)) {
    if (!existsSync(file)) {
      failures.push(`  ${file} (${note}): not found`);
      continue;
    }
    try {
      return { addon: require(file) as NativeAddon, file };
    } catch (error) {
      failures.push(`  ${file} (${note}): ${(error as Error).message.split("\n")[0]}`);
    }
  }
  throw new AddonLoadError(
    `comlrl: could not load the native addon. Tried:\n${failures.join("\n")}\n` +
      `Expected a build against ${expectedLibtorch()}. Build it with \`npm run build:native\` ` +
      "(or reinstall the package); set LIBTORCH=/path/to/libtorch to choose another libtorch.",
  );
}

let loaded: { addon: NativeAddon; file: string } | null = null;

/** The native addon, loaded once per process. Intra-op threads start at COMLRL_NUM_THREADS, else the machine's core count. */
export function addon(): NativeAddon {
  if (loaded) return loaded.addon;
  const threads = numThreadsFromEnvironment(availableParallelism());
  loaded = loadAddonFrom(packageRoot);
  loaded.addon.setNumThreads(threads);
  return loaded.addon;
}

/** The file the addon was loaded from (after `addon()` has run). */
export function addonPath(): string {
  return loaded?.file ?? "";
}

function expectedLibtorch(): string {
  try {
    const script = path.join(packageRoot, "scripts", "find-libtorch.mjs");
    const output = execFileSync(process.execPath, [script], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    const info = JSON.parse(output) as { version: string; variant: string; libDir: string };
    return `libtorch ${info.version} (${info.variant}) in ${info.libDir}`;
  } catch (error) {
    return `a libtorch, but none was found: ${((error as { stderr?: string }).stderr ?? String(error)).trim()}`;
  }
}
