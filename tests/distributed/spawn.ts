// Starting real ranks on loopback for the data-parallel tests: a free port, the torchrun variables, one thread each,
// and a registry of every child so that afterAll can kill whatever is left.
import { spawn, type ChildProcess } from "node:child_process";
import { freeLoopbackPort } from "../../src/distributed/local-ranks.js";

const children = new Set<ChildProcess>();

/** A port nobody listens on now (the kernel's pick for port 0 on loopback). */
export const freePort = freeLoopbackPort;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  pid: number;
}

/** Starts one process (a TS file run through tsx) with env added; resolves when it exits. */
export function start(args: string[], env: Record<string, string>): { child: ChildProcess; exit: Promise<Exit> } {
  const child = spawn(process.execPath, ["--import", "tsx", ...args], {
    env: { ...process.env, COMLRL_NUM_THREADS: "1", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  children.add(child);
  let stderr = "";
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const exit = new Promise<Exit>((resolve) => child.on("exit", (code, signal) => (children.delete(child), resolve({ code, signal, stderr, pid: child.pid!}))));
  return { child, exit };
}

/** The torchrun variables of `rank` in a job of `worldSize` on 127.0.0.1:port. */
export function rankEnv(rank: number, worldSize: number, port: number, timeoutSeconds = 20): Record<string, string> {
  return { RANK: `${rank}`, WORLD_SIZE: `${worldSize}`, LOCAL_RANK: `${rank}`, MASTER_ADDR: "127.0.0.1", MASTER_PORT: `${port}`, COMLRL_DIST_TIMEOUT: `${timeoutSeconds}` };
}

/** Whether a process of this id still exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Kills every child still running (afterAll). */
export function killAll(): void {
  for (const child of children) child.kill("SIGKILL");
  children.clear();
}
