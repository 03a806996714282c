// Python as the other side of interoperability tests: Debian's python3 with python3-torch (scripts/setup.sh installs
// it). The `python3` on PATH may be another interpreter without torch, so this one is called by its path.
import { spawnSync } from "node:child_process";

export const PYTHON = "/usr/bin/python3";

/** Runs `script` under Debian's python3 with torch; its last stdout line is JSON. Fails (never skips) without torch. */
export function runPython(script: string, args: string[]): any {
  const result = spawnSync(PYTHON, ["-c", script, ...args], { encoding: "utf8", timeout: 90_000 });
  if (result.error || /No module named '?torch'?/.test(result.stderr)) {
    throw new Error(
      `${PYTHON} with torch is needed (${result.error?.message ?? "no module named torch"}): ` +
        `run scripts/setup.sh, which installs Debian's python3-torch`,
    );
  }
  if (result.status !== 0) throw new Error(`${PYTHON} failed (${result.status}): ${result.stderr}`);
  return JSON.parse(result.stdout.trim().split("\n").pop()!);
}
