// What the figures were measured on: libtorch, BLAS, threads, CPU or GPU, and how busy the machine was.
import { execFileSync } from "node:child_process";
import os from "node:os";
import { packageRoot } from "../native/loader.js";
import { runtimeInfo } from "../runtime.js";
import type { Environment } from "./types.js";

function quietly(command: string, args: string[], cwd?: string): string | null {
  try {
    return execFileSync(command, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim() || null;
  } catch {
    return null;
  }
}

/** The environment at the start of a run; loadAfter is filled in at its end. */
export function describeEnvironment(device: string): Environment {
  const info = runtimeInfo();
  return {
    host: os.hostname(),
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    cpu: os.cpus()[0]?.model.trim() ?? "unknown",
    cores: os.availableParallelism(),
    memoryGiB: os.totalmem() / 2 ** 30,
    gpu: info.cudaAvailable ? quietly("nvidia-smi", ["--query-gpu=name,memory.total", "--format=csv,noheader"]) ?? `${info.cudaDeviceCount} CUDA device(s)` : null,
    device,
    torchVersion: info.torchVersion,
    blas: info.blas,
    threads: info.numThreads,
    node: process.version,
    commit: quietly("git", ["describe", "--always", "--dirty"], packageRoot),
    loadBefore: os.loadavg()[0],
    loadAfter: os.loadavg()[0],
  };
}
