// Directory creation (mkdir -p) for output, log and checkpoint directories. Node's own `mkdir(…, { recursive: true })`
// retries a component whenever mkdir answers ENOENT, so on a file system that answers ENOENT although the parent
// exists (/proc, some FUSE mounts) it spins at 100% CPU forever; and when mkdir fails for another reason it stats the
// missing directory and reports that ENOENT instead of the real error (EROFS on a read-only mount). Here the missing
// components are found once, created one by one from the top, and the first failure is reported as it happened.
import { mkdirSync, statSync, type Stats } from "node:fs";
import { mkdir, stat } from "node:fs/promises";
import path from "node:path";

/** A directory that could not be created; `code` is the failing call's errno code. */
export class MakeDirsError extends Error {
  /** Always "MakeDirsError". */
  override name = "MakeDirsError";
  constructor(
    readonly dir: string,
    readonly code: string,
    reason: string,
    cause?: unknown,
  ) {
    super(`cannot create directory ${dir}: ${reason}`, { cause });
  }
}

const codeOf = (error: unknown): string => (error as NodeJS.ErrnoException).code ?? "EUNKNOWN";

/** What a failed mkdir of `dir` (whose parent exists) means, as an error naming it. */
function mkdirFailure(dir: string, error: unknown): MakeDirsError {
  const code = codeOf(error);
  // The parent was just seen to be a directory, so ENOENT means its file system refuses new directories.
  const reason = code === "ENOENT" ? `ENOENT: the file system at ${path.dirname(dir)} does not allow creating directories there` : (error as Error).message;
  return new MakeDirsError(dir, code, reason, error);
}

/** The components of dir that do not exist yet, outermost first; throws when one in the way is not a directory. */
function missingFrom(dir: string, statOf: (p: string) => Stats | null): string[] {
  const missing: string[] = [];
  for (let current = dir; ; current = path.dirname(current)) {
    const found = statOf(current);
    if (found !== null) {
      if (!found.isDirectory()) throw new MakeDirsError(dir, "ENOTDIR", `ENOTDIR: ${current} exists and is not a directory`);
      return missing.reverse();
    }
    missing.push(current);
    if (path.dirname(current) === current) return missing.reverse();
  }
}

/** stat, null when the path does not exist; other failures (EACCES, ELOOP) name the directory being made. */
function statOrNull(dir: string, probe: (p: string) => Stats): (p: string) => Stats | null {
  return (p) => {
    try {
      return probe(p);
    } catch (error) {
      if (codeOf(error) === "ENOENT") return null;
      throw new MakeDirsError(dir, codeOf(error), (error as Error).message, error);
    }
  };
}

/** mkdir -p, synchronously. */
export function makeDirsSync(dir: string): void {
  const target = path.resolve(dir);
  for (const component of missingFrom(target, statOrNull(target, (p) => statSync(p)))) {
    try {
      mkdirSync(component);
    } catch (error) {
      // Another process made it first: fine, if it is a directory.
      if (codeOf(error) === "EEXIST" && statSync(component).isDirectory()) continue;
      throw mkdirFailure(component, error);
    }
  }
}

/** mkdir -p. */
export async function makeDirs(dir: string): Promise<void> {
  const target = path.resolve(dir);
  // The walk up is a few stats of existing directories; done synchronously so the check and the creation agree.
  for (const component of missingFrom(target, statOrNull(target, (p) => statSync(p)))) {
    try {
      await mkdir(component);
    } catch (error) {
      if (codeOf(error) === "EEXIST" && (await stat(component)).isDirectory()) continue;
      throw mkdirFailure(component, error);
    }
  }
}
