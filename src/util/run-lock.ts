// One run per output directory: a lock file with the holder's pid, host and start time, made with O_EXCL. A lock
// whose process has ended on this host is stale and taken over; one held by a live process, or made on another
// host (whose processes cannot be checked from here), is refused with the holder named.
import { closeSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import path from "node:path";
import { makeDirsSync } from "./make-dirs.js";

export const RUN_LOCK = ".comlrl-run.lock";

interface LockOwner {
  pid: number;
  host: string;
  startedAt: string;
}

export class RunLockError extends Error {
  override name = "RunLockError";
}

/** Whether a process with this id runs on this host (one owned by another user counts: kill(pid, 0) says EPERM). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function readOwner(file: string): LockOwner | null {
  try {
    const owner = JSON.parse(readFileSync(file, "utf8")) as Partial<LockOwner>;
    return Number.isInteger(owner.pid) && typeof owner.host === "string" ? { pid: owner.pid!, host: owner.host, startedAt: String(owner.startedAt) } : null;
  } catch {
    return null;
  }
}

/** Takes dir's lock for this process (`role` names the directory in errors, e.g. "outputDir"); returns its release. */
export function acquireRunLock(dir: string, role: string): () => void {
  makeDirsSync(dir);
  const file = path.join(dir, RUN_LOCK);
  const owner: LockOwner = { pid: process.pid, host: hostname(), startedAt: new Date().toISOString() };
  for (let attempt = 0; ; attempt++) {
    let fd: number;
    try {
      fd = openSync(file, "wx");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST" || attempt > 0) throw new RunLockError(`cannot lock ${role} ${dir}: ${(error as Error).message}`);
      const holder = readOwner(file);
      if (holder && (holder.host !== owner.host || processAlive(holder.pid))) {
        throw new RunLockError(
          `${role} ${dir} is in use by another run (pid ${holder.pid} on ${holder.host}, since ${holder.startedAt}; lock file ${file}): ` +
            `give each run its own ${role}, or remove the lock file if that run has ended`,
        );
      }
      // The holder has ended (or the file is unreadable, as a crash mid-write leaves it): the lock is stale.
      rmSync(file, { force: true });
      continue;
    }
    try {
      writeSync(fd, JSON.stringify(owner));
    } finally {
      closeSync(fd);
    }
    return () => {
      if (readOwner(file)?.pid === owner.pid) rmSync(file, { force: true });
    };
  }
}

/** Locks a run's outputDir and, when it is elsewhere, its checkpointDir; returns the release of both. */
export function lockRunDirectories(outputDir: string, checkpointDir: string | undefined): () => void {
  const releaseOutput = acquireRunLock(outputDir, "outputDir");
  if (checkpointDir === undefined || path.resolve(checkpointDir) === path.resolve(outputDir)) return releaseOutput;
  let releaseCheckpoints: () => void;
  try {
    releaseCheckpoints = acquireRunLock(checkpointDir, "checkpointDir");
  } catch (error) {
    releaseOutput();
    throw error;
  }
  return () => {
    releaseCheckpoints();
    releaseOutput();
  };
}
