// `comlrl launch`: starts the ranks of a data-parallel job on this node with the torchrun environment (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), splits the cores among them, forwards
// SIGINT/SIGTERM, warns when the ranks outnumber the cores, and stops every rank when one fails, so that a dead rank
// never leaves the others waiting. Only ranks that were started (have a pid) are ever signalled: a ChildProcess whose
// spawn failed (EAGAIN under a pids limit, EMFILE) still has a handle with pid 0 until its error is reported, and
// signalling it would signal pid 0, the launcher's own process group: the calling script and its other jobs.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { freeLoopbackPort, threadsPerRank } from "../distributed/local-ranks.js";
import { UsageError } from "./args.js";

export interface LaunchOptions {
  nproc: number;
  nnodes: number;
  nodeRank: number;
  /** ADDR:PORT of rank 0's rendezvous; null on one node picks a free port on 127.0.0.1. */
  master: string | null;
  /** The script (.ts through tsx, .js/.mjs with node) or a comlrl command (train, demo), and its arguments. */
  command: string[];
}

/** How long a rank asked to stop may take before it is killed. */
const GRACE_MS = 5000;
/** The most ranks per core a node may run: each rank holds its own models; past this, a job only thrashes. */
export const MAX_RANKS_PER_CORE = 8;

export function parseMaster(master: string): { addr: string; port: number } {
  const match = /^(.+):(\d+)$/.exec(master);
  const port = match ? Number(match[2]) : Number.NaN;
  if (!match || !(port >= 1 && port <= 65535)) throw new UsageError(`--master must be ADDR:PORT with a port in [1, 65535], got ${JSON.stringify(master)}`);
  return { addr: match[1].replace(/^\[(.*)\]$/, "$1"), port };
}

export function checkLaunchOptions(options: LaunchOptions, cores = availableParallelism()): void {
  const most = MAX_RANKS_PER_CORE * cores;
  if (options.nproc > most) throw new UsageError(`--nproc must be at most ${most} (${MAX_RANKS_PER_CORE} ranks per core on this node's ${cores} cores), got ${options.nproc}`);
  if (options.nodeRank >= options.nnodes) throw new UsageError(`--node-rank must be below --nnodes (${options.nnodes}), got ${options.nodeRank}`);
  if (options.nnodes > 1 && options.master === null) throw new UsageError("--master ADDR:PORT is required with --nnodes > 1 (rank 0's node and a free port)");
  if (options.master !== null) parseMaster(options.master);
  if (options.command.length === 0) throw new UsageError("a script to run is required: comlrl launch --nproc N script.ts [args...]");
}

/** comlrl's own commands a job can run (`comlrl launch --nproc 2 train --config cfg.yaml`). */
const COMLRL_COMMANDS = new Set(["train", "demo"]);

/** The node arguments that run the script: TypeScript through tsx, anything else with node, comlrl's own commands with this CLI. */
function scriptCommand(command: string[]): string[] {
  const [script, ...args] = command;
  if (COMLRL_COMMANDS.has(script) && !existsSync(script)) {
    const here = fileURLToPath(import.meta.url);
    const cli = path.join(path.dirname(here), `main${path.extname(here)}`);
    return [...(here.endsWith(".ts") ? ["--import", "tsx"] : []), cli, ...command];
  }
  return /\.(c|m)?tsx?$/.test(script) ? ["--import", "tsx", script, ...args] : [script, ...args];
}

/** What to say when a node runs more ranks than it has cores, or null. */
function oversubscriptionWarning(nproc: number, cores = availableParallelism()): string | null {
  if (nproc <= cores) return null;
  return `comlrl launch: ${nproc} ranks on ${cores} cores: the ranks share cores, one intra-op thread each; expect each step to be slower than with ${cores} ranks`;
}

/** Runs the ranks to their end; resolves to the exit status: 0 when all succeed, else the first failure's. */
export async function runLaunch(options: LaunchOptions): Promise<number> {
  checkLaunchOptions(options);
  const { addr, port } = options.master ? parseMaster(options.master) : { addr: "127.0.0.1", port: await freeLoopbackPort() };
  const worldSize = options.nnodes * options.nproc;
  const args = scriptCommand(options.command);
  const threads = threadsPerRank(options.nproc);
  const crowded = oversubscriptionWarning(options.nproc);
  if (crowded !== null) console.warn(crowded);
  const ranks: ChildProcess[] = [];
  let status: number | null = null;
  let killTimer: NodeJS.Timeout | null = null;

  const running = (child: ChildProcess) => child.pid !== undefined && child.exitCode === null && child.signalCode === null;
  const stopAll = (signal: NodeJS.Signals) => {
    for (const child of ranks) if (running(child)) child.kill(signal);
    killTimer ??= setTimeout(() => ranks.forEach((child) => running(child) && child.kill("SIGKILL")), GRACE_MS);
  };
  const forward = (signal: NodeJS.Signals) => () => {
    status ??= 128 + (signal === "SIGINT" ? 2 : 15);
    stopAll(signal);
  };
  const onInt = forward("SIGINT");
  const onTerm = forward("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);

  const exits: Array<Promise<void>> = [];
  for (let localRank = 0; localRank < options.nproc; localRank++) {
    const rank = options.nodeRank * options.nproc + localRank;
    const child = spawn(process.execPath, args, {
      stdio: "inherit",
      env: {
        ...process.env,
        RANK: `${rank}`,
        WORLD_SIZE: `${worldSize}`,
        LOCAL_RANK: `${localRank}`,
        LOCAL_WORLD_SIZE: `${options.nproc}`,
        GROUP_RANK: `${options.nodeRank}`,
        MASTER_ADDR: addr,
        MASTER_PORT: `${port}`,
        COMLRL_NUM_THREADS: threads,
      },
    });
    ranks.push(child);
    exits.push(
      new Promise<void>((resolve) => {
        child.on("error", (error) => {
          console.error(`comlrl launch: rank ${rank} could not start: ${error.message}; stopping the other ranks`);
          status ??= 1;
          stopAll("SIGTERM");
          resolve();
        });
        child.on("exit", (code, signal) => {
          if (code !== 0 && status === null) {
            status = code ?? 1;
            console.error(`comlrl launch: rank ${rank} ${signal ? `was killed by ${signal}` : `exited with status ${code}`}; stopping the other ranks`);
            stopAll("SIGTERM");
          }
          resolve();
        });
      }),
    );
    // The job cannot run without this rank, and the next spawn would fail as this one did.
    if (child.pid === undefined) break;
  }
  try {
    await Promise.all(exits);
  } finally {
    if (killTimer) clearTimeout(killTimer);
    process.off("SIGINT", onInt);
    process.off("SIGTERM", onTerm);
  }
  return status ?? 0;
}
