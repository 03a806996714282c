// Runs one benchmark case in a worker process (worker.ts) and reads back its result, its memory, and how much CPU
// other processes took meanwhile. From dist/ the worker is plain JavaScript; from the TypeScript sources (tests) it
// runs through tsx, so the suite needs no build.
import { execFile, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { secondsSince } from "./stats.js";
import { WORKER_RESULT_PREFIX, type AnyCase, type Measured, type WorkerOutput } from "./types.js";

export class BenchWorkerError extends Error {
  /** Always "BenchWorkerError". */
  override name = "BenchWorkerError";
}

function workerCommand(): string[] {
  const here = fileURLToPath(import.meta.url);
  if (!here.endsWith(".ts")) return [path.join(path.dirname(here), "worker.js")];
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
  return ["--import", tsx, path.join(path.dirname(here), "worker.ts")];
}

type WorkerPayload = (WorkerOutput & { peakRssMiB: number; cpuSeconds: number }) | { error: string };

/** The last `lines` lines of a process's stderr, for error messages. */
const tail = (text: string, lines = 15) => text.trimEnd().split("\n").slice(-lines).join("\n");

export async function runInWorker(spec: AnyCase, device: string, timeoutSeconds: number): Promise<Measured> {
  const busyBefore = machineBusySeconds();
  const started = performance.now();
  // The IPC channel is only there so that the worker notices when this process dies (see worker.ts).
  const child = spawn(process.execPath, [...workerCommand(), device, JSON.stringify(spec)], { stdio: ["ignore", "pipe", "pipe", "ipc"] });
  const deviceMemory = device.startsWith("cuda") ? sampleDeviceMemory(child.pid!) : null;
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (chunk) => (stdout += chunk));
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, timeoutSeconds * 1000);
  const { code, signal } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal }));
  }).finally(() => {
    clearTimeout(timer);
    deviceMemory?.stop();
  });
  const line = stdout.split("\n").find((l) => l.startsWith(WORKER_RESULT_PREFIX));
  const payload = line ? (JSON.parse(line.slice(WORKER_RESULT_PREFIX.length)) as WorkerPayload) : null;
  if (code !== 0 || !payload || "error" in payload) {
    const why =
      payload && "error" in payload
        ? payload.error
        : timedOut
          ? `worker killed after the ${timeoutSeconds} s limit`
          : `worker ended without a result (${signal === "SIGKILL" ? "killed: out of memory?" : signal ? `signal ${signal}` : `exit code ${code}`})`;
    throw new BenchWorkerError(`${why}${stderr.trim() ? `\n${tail(stderr)}` : ""}`);
  }
  const { cpuSeconds, ...output } = payload;
  const busyAfter = machineBusySeconds();
  const machineSeconds = secondsSince(started) * availableParallelism();
  const otherCpuShare = busyBefore === null || busyAfter === null ? null : Math.max(0, (busyAfter - busyBefore - cpuSeconds) / machineSeconds);
  return { ...output, peakDeviceMiB: deviceMemory?.peakMiB() ?? null, otherCpuShare };
}

/** Linux counts CPU time in /proc/stat in USER_HZ ticks, 100 per second on every mainstream architecture. */
const TICKS_PER_SECOND = 100;

/**
 * CPU seconds the whole machine has been busy (user, nice, system, irq, softirq, and steal: time the hypervisor gave
 * to other guests), from /proc/stat; null where there is none. The difference over a benchmark, less the worker's own
 * CPU time, is what others took from it: on a 2-core machine a second busy process stalls OpenMP's BLAS threads at
 * every barrier and can make small-model figures 10–100× slower.
 */
export function machineBusySeconds(): number | null {
  try {
    const fields = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, , , irq, softirq, steal = 0] = fields;
    return (user + nice + system + irq + softirq + steal) / TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

/**
 * The addon reports no CUDA memory statistics, so a GPU worker's device memory is sampled from nvidia-smi four times
 * a second; the peak is that of the samples (a spike shorter than 250 ms can be missed). Null without nvidia-smi.
 */
function sampleDeviceMemory(pid: number): { stop(): void; peakMiB(): number | null } {
  let peak: number | null = null;
  let stopped = false;
  const poll = () => {
    if (stopped) return;
    execFile("nvidia-smi", ["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"], (error, out) => {
      if (error) return; // no nvidia-smi: the figure stays null
      for (const row of out.trim().split("\n")) {
        const [rowPid, used] = row.split(",").map((field) => Number(field.trim()));
        if (rowPid === pid && Number.isFinite(used)) peak = Math.max(peak ?? 0, used);
      }
      setTimeout(poll, 250);
    });
  };
  poll();
  return {
    stop: () => void (stopped = true),
    peakMiB: () => peak,
  };
}
