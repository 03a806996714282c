// One run per output directory: a lock file with the holder's pid, host, start time and a random token. The file is
// written whole under a temporary name and linked into place, so it never exists half-written and only one link can
// win. A lock whose process has ended on this host is stale; one held by a live process, or made on another host
// (whose processes cannot be checked from here), is refused with the holder named.
//
// Taking over a stale lock is itself guarded by a lock named after the stale one's token: only one process can hold
// that guard, and while it does nobody else can remove the stale lock, so two processes that both saw it stale cannot
// both take it over. A taker that died holding the guard leaves a stale guard, taken over the same way.
import { randomBytes } from "node:crypto";
import { linkSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import path from "node:path";
import { makeDirsSync } from "./make-dirs.js";

export const RUN_LOCK = ".comlrl-run.lock";

interface LockOwner {
  pid: number;
  host: string;
  startedAt: string;
  token: string;
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

const errorCode = (error: unknown) => (error as NodeJS.ErrnoException).code;

/** The lock's holder and its identity; a file that does not parse (left by an older writer) is known by inode and time. */
function readLock(file: string): { owner: LockOwner | null; identity: string } | null {
  let text: string;
  let identity: string;
  try {
    const stats = statSync(file);
    identity = `${stats.ino}-${Math.floor(stats.mtimeMs)}`;
    text = readFileSync(file, "utf8");
  } catch (error) {
    if (errorCode(error) === "ENOENT") return null;
    throw error;
  }
  try {
    const owner = JSON.parse(text) as Partial<LockOwner>;
    if (Number.isInteger(owner.pid) && typeof owner.host === "string") {
      const token = typeof owner.token === "string" && /^[0-9a-f]+$/.test(owner.token) ? owner.token : identity;
      return { owner: { pid: owner.pid!, host: owner.host, startedAt: String(owner.startedAt), token }, identity: token };
    }
  } catch {
    // Unparsable: only a writer that did not link whole files could have left it, and it is stale.
  }
  return { owner: null, identity };
}

/** Creates file holding owner, whole, or returns false when it exists already. */
function createWhole(file: string, owner: LockOwner): boolean {
  const temporary = `${file}.${owner.token}.tmp`;
  writeFileSync(temporary, JSON.stringify(owner), { flag: "wx" });
  try {
    linkSync(temporary, file);
    return true;
  } catch (error) {
    if (errorCode(error) === "EEXIST") return false;
    throw error;
  } finally {
    unlinkSync(temporary);
  }
}

type Attempt = { held: true } | { held: false; holder: LockOwner; file: string } | { held: false; busy: true };

/**
 * One attempt at file: held, refused by a live (or remote) holder, or busy (another process is taking over the same
 * stale lock right now, or the lock changed under us): the caller tries again.
 */
function tryLock(file: string, owner: LockOwner, depth: number): Attempt {
  if (createWhole(file, owner)) return { held: true };
  const current = readLock(file);
  if (current === null) return { held: false, busy: true };
  const holder = current.owner;
  if (holder && (holder.host !== owner.host || processAlive(holder.pid))) return { held: false, holder, file };
  // Stale. Guard the takeover with a lock of its own, so that only one process removes this very lock.
  if (depth > 8) throw new RunLockError(`cannot take over the stale lock ${file}: too many stale takeover guards beside it`);
  const guard = `${file}.takeover-${current.identity}`;
  const guarded = tryLock(guard, { ...owner, token: randomBytes(8).toString("hex") }, depth + 1);
  if (!guarded.held) return { held: false, busy: true };
  try {
    // Under the guard the stale lock can only be removed by us: it is still there unless it has been replaced.
    if (readLock(file)?.identity !== current.identity) return { held: false, busy: true };
    unlinkSync(file);
    return createWhole(file, owner) ? { held: true } : { held: false, busy: true };
  } finally {
    rmSync(guard, { force: true });
  }
}

/** Takes dir's lock for this process (`role` names the directory in errors, e.g. "outputDir"); returns its release. */
export function acquireRunLock(dir: string, role: string): () => void {
  makeDirsSync(dir);
  const file = path.join(dir, RUN_LOCK);
  const owner: LockOwner = { pid: process.pid, host: hostname(), startedAt: new Date().toISOString(), token: randomBytes(8).toString("hex") };
  for (let attempt = 0; ; attempt++) {
    let result: Attempt;
    try {
      result = tryLock(file, owner, 0);
    } catch (error) {
      throw error instanceof RunLockError ? error : new RunLockError(`cannot lock ${role} ${dir} (lock file ${file}): ${(error as Error).message}`, { cause: error });
    }
    if (result.held) {
      return () => {
        if (readLock(file)?.identity === owner.token) rmSync(file, { force: true });
      };
    }
    if ("holder" in result) {
      const { holder } = result;
      throw new RunLockError(
        `${role} ${dir} is in use by another run (pid ${holder.pid} on ${holder.host}, since ${holder.startedAt}; lock file ${file}): ` +
          `give each run its own ${role}, or remove the lock file if that run has ended`,
      );
    }
    // Another process is mid-takeover: it finishes in microseconds, and then holds the lock or has left it free.
    if (attempt >= 200) throw new RunLockError(`cannot lock ${role} ${dir}: the lock file ${file} kept changing while being taken over`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
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

/**
 * Releases a run's lock when the run ends. After a failed run, a release that fails too (the directory made read-only,
 * the lock file replaced) is reported as a warning rather than thrown over the run's own error.
 */
export function releaseKeepingFirstError(release: (() => void) | undefined, runFailed: boolean): void {
  try {
    release?.();
  } catch (error) {
    if (!runFailed) throw error;
    process.emitWarning(`the run lock could not be released after the run failed: ${(error as Error).message}`);
  }
}
