// A memory cgroup per sandboxed run, made under this process's own cgroup where the machine allows it (cgroup v1's
// memory hierarchy, or v2 with the memory controller enabled for our children). It bounds everything the run holds
// in memory as one — its processes, its tmpfs files, shared memory, pipes — which per-process limits cannot: a run
// that passes its limit is killed by the kernel, inside the cgroup, and nothing else on the machine is touched.
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import path from "node:path";

interface Hierarchy {
  version: 1 | 2;
  /** This process's own cgroup directory, under which the runs' cgroups are made. */
  base: string;
}

/** Where run cgroups can be made, or why not (found once per process). */
export type CgroupSupport = { ok: true; hierarchy: Hierarchy } | { ok: false; reason: string };

let support: CgroupSupport | undefined;

function locate(): Hierarchy | string {
  let lines: string[];
  try {
    lines = readFileSync("/proc/self/cgroup", "utf8").trim().split("\n");
  } catch (error) {
    return `cannot read /proc/self/cgroup: ${(error as Error).message}`;
  }
  const v1 = lines.map((line) => line.split(":")).find(([, controllers]) => controllers.split(",").includes("memory"));
  if (v1 && existsSync(path.join("/sys/fs/cgroup/memory", v1[2], "memory.limit_in_bytes"))) return { version: 1, base: path.join("/sys/fs/cgroup/memory", v1[2]) };
  const v2 = lines.find((line) => line.startsWith("0::"));
  if (v2 && existsSync("/sys/fs/cgroup/cgroup.controllers")) {
    const base = path.join("/sys/fs/cgroup", v2.slice(3));
    const delegated = readFileSync(path.join(base, "cgroup.subtree_control"), "utf8").split(/\s+/).includes("memory");
    return delegated ? { version: 2, base } : `the memory controller is not enabled for ${base}'s children (cgroup.subtree_control)`;
  }
  return "no cgroup v1 memory hierarchy and no cgroup v2 at /sys/fs/cgroup";
}

let sequence = 0;

export class RunCgroup {
  private constructor(
    readonly hierarchy: Hierarchy,
    readonly dir: string,
  ) {}

  /** A fresh cgroup whose memory (swap included) may not pass `bytes`. */
  static create(hierarchy: Hierarchy, bytes: number): RunCgroup {
    const dir = path.join(hierarchy.base, `comlrl-sandbox-${process.pid}-${++sequence}`);
    mkdirSync(dir);
    const cgroup = new RunCgroup(hierarchy, dir);
    try {
      if (hierarchy.version === 1) {
        writeFileSync(path.join(dir, "memory.limit_in_bytes"), String(bytes));
        if (existsSync(path.join(dir, "memory.memsw.limit_in_bytes"))) writeFileSync(path.join(dir, "memory.memsw.limit_in_bytes"), String(bytes));
      } else {
        writeFileSync(path.join(dir, "memory.max"), String(bytes));
        if (existsSync(path.join(dir, "memory.swap.max"))) writeFileSync(path.join(dir, "memory.swap.max"), "0");
        // One OOM kill ends the whole run, so a run's result never depends on which of its processes the kernel chose.
        if (existsSync(path.join(dir, "memory.oom.group"))) writeFileSync(path.join(dir, "memory.oom.group"), "1");
      }
    } catch (error) {
      cgroup.remove();
      throw error;
    }
    return cgroup;
  }

  get procsFile(): string {
    return path.join(this.dir, "cgroup.procs");
  }

  /** The most memory the run held at once, bytes (null where the kernel does not record it). */
  peakBytes(): number | null {
    const file = path.join(this.dir, this.hierarchy.version === 1 ? "memory.max_usage_in_bytes" : "memory.peak");
    return existsSync(file) ? Number(readFileSync(file, "utf8").trim()) : null;
  }

  /**
   * Whether the kernel's OOM killer has killed a process of the run. v1 has no group kill, so the sandbox polls this
   * during the run and ends the whole run at the first kill, as v2's memory.oom.group does.
   */
  oomKilled(): boolean {
    // The OOM killer's count (v1 kernels since 4.13) is the one v1 keeps reliably: failcnt may stay 0 for a kill.
    const file = path.join(this.dir, this.hierarchy.version === 1 ? "memory.oom_control" : "memory.events");
    return /^oom_kill [1-9]/m.test(readFileSync(file, "utf8"));
  }

  /** Whether the run hit its memory limit (killed, or on v1 refused a charge). */
  hitLimit(): boolean {
    if (this.oomKilled()) return true;
    return this.hierarchy.version === 1 && Number(readFileSync(path.join(this.dir, "memory.failcnt"), "utf8")) > 0;
  }

  /** Removes the cgroup; its last processes may take a moment to leave after the sandbox's pid namespace ends. */
  async removeWhenEmpty(): Promise<void> {
    for (let attempt = 0; attempt < 50; attempt++) {
      if (this.remove()) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error(`could not remove the sandbox's cgroup ${this.dir}: processes are still in it`);
  }

  /** Removes the cgroup if no process is left in it; false if one is. */
  remove(): boolean {
    try {
      rmdirSync(this.dir);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EBUSY") return false;
      throw error;
    }
  }
}

/** Whether runs get a memory cgroup here: a probe cgroup is made and removed once. */
export function cgroupSupport(): CgroupSupport {
  if (support) return support;
  const found = locate();
  if (typeof found === "string") return (support = { ok: false, reason: found });
  try {
    if (!RunCgroup.create(found, 1 << 30).remove()) throw new Error("the probe cgroup could not be removed");
    support = { ok: true, hierarchy: found };
  } catch (error) {
    support = { ok: false, reason: `cannot make a cgroup under ${found.base}: ${(error as Error).message}` };
  }
  return support;
}
