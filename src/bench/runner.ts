// Runs one benchmark case in a worker process (worker.ts) and reads back its result and memory. From dist/ the
// worker is plain JavaScript; from the TypeScript sources (tests) it runs through tsx, so the suite needs no build.
import { execFile, spawn } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { WORKER_RESULT_PREFIX, type AnyCase, type Measured, type WorkerOutput } from "./types.js";

export class BenchWorkerError extends Error {
  override name = "BenchWorkerError";
}

function workerCommand(): string[] {
  const here = fileURLToPath(import.meta.url);
  if (!here.endsWith(".ts")) return [path.join(path.dirname(here), "worker.js")];
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
  return ["--import", tsx, path.join(path.dirname(here), "worker.ts")];
}

/** The last `lines` lines of a process's stderr, for error messages. */
const tail = (text: string, lines = 15) => text.trimEnd().split("\n").slice(-lines).join("\n");

export async function runInWorker(spec: AnyCase, device: string, timeoutSeconds: number): Promise<Measured> {
  const child = spawn(process.execPath, [...workerCommand(), device, JSON.stringify(spec)], { stdio: ["ignore", "pipe", "pipe"] });
  const deviceMemory = device.startsWith("cuda") ? sampleDeviceMemory(child.pid!) : null;
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutSeconds * 1000);
  const { code, signal } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal }));
  }).finally(() => {
    clearTimeout(timer);
    deviceMemory?.stop();
  });
  const line = stdout.split("\n").find((l) => l.startsWith(WORKER_RESULT_PREFIX));
  if (code !== 0 || !line) {
    const why = signal === "SIGKILL" ? `killed after the ${timeoutSeconds} s limit` : signal ? `killed by ${signal}` : `exit code ${code}`;
    throw new BenchWorkerError(`${spec.id}: worker failed (${why})${stderr.trim() ? `:\n${tail(stderr)}` : ""}`);
  }
  const output = JSON.parse(line.slice(WORKER_RESULT_PREFIX.length)) as WorkerOutput & { peakRssMiB: number };
  return { ...output, peakDeviceMiB: deviceMemory?.peakMiB() ?? null };
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
