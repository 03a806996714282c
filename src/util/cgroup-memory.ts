// The memory a container allows this process: the smallest cgroup memory limit on the way from its own cgroup up to
// the hierarchy's root, in cgroup v2 (memory.max) and v1 (the memory controller's memory.limit_in_bytes) alike. A
// container's limit is usually far below the host's RAM, which os.totalmem() reports.
import { readFileSync } from "node:fs";
import path from "node:path";

/** A cgroup memory limit and the file it was read from. */
export interface CgroupMemoryLimit {
  bytes: number;
  file: string;
}

// cgroup v1 writes "no limit" as the largest page-aligned signed 64-bit value; anything this large is no limit.
const NO_LIMIT = 2 ** 60;

function readLimit(file: string): number | null {
  let text: string;
  try {
    text = readFileSync(file, "utf8").trim();
  } catch {
    return null;
  }
  if (!/^\d+$/.test(text)) return null;
  const bytes = Number(text);
  return bytes < NO_LIMIT ? bytes : null;
}

/** The directories from `top`/`cgroupPath` up to `top`, the deepest first. */
function ancestors(top: string, cgroupPath: string): string[] {
  const dirs: string[] = [];
  let rel = path.posix.normalize(`/${cgroupPath}`);
  for (;;) {
    dirs.push(path.join(top, rel));
    if (rel === "/") return dirs;
    rel = path.posix.dirname(rel);
  }
}

/**
 * The smallest memory limit among this process's cgroups (v2 memory.max, v1 memory.limit_in_bytes) and their
 * ancestors, or null when none is set or the files cannot be read. `root` is where /proc and /sys are found
 * ("/" but in tests).
 */
export function cgroupMemoryLimit(root = "/"): CgroupMemoryLimit | null {
  let lines: string[];
  try {
    lines = readFileSync(path.join(root, "proc/self/cgroup"), "utf8").trim().split("\n");
  } catch {
    return null;
  }
  const candidates: string[] = [];
  // A container sees its own cgroup mounted as the root while /proc/self/cgroup may name it from the host's root:
  // walking up from the named path reaches the mount's root either way. cgroup v2 is at /sys/fs/cgroup, or at
  // /sys/fs/cgroup/unified beside v1's controllers.
  for (const line of lines) {
    const match = /^(\d+):([^:]*):(.*)$/.exec(line);
    if (!match) continue;
    const [, id, controllers, cgroupPath] = match;
    const v2 = id === "0" && controllers === "";
    const mounts = v2 ? ["sys/fs/cgroup", "sys/fs/cgroup/unified"] : controllers.split(",").includes("memory") ? ["sys/fs/cgroup/memory"] : [];
    for (const mount of mounts) {
      for (const dir of ancestors(path.join(root, mount), cgroupPath)) candidates.push(path.join(dir, v2 ? "memory.max" : "memory.limit_in_bytes"));
    }
  }
  let smallest: CgroupMemoryLimit | null = null;
  for (const file of candidates) {
    const bytes = readLimit(file);
    if (bytes !== null && (smallest === null || bytes < smallest.bytes)) smallest = { bytes, file };
  }
  return smallest;
}
