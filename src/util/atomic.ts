// Atomic writes: a file or directory appears complete under its final name or not at all.
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, open, readdir, rename, rm, writeFile, type FileHandle } from "node:fs/promises";
import path from "node:path";
import { makeDirs } from "./make-dirs.js";

function temporarySibling(target: string, tag: string): string {
  return path.join(path.dirname(target), `.${path.basename(target)}.${tag}-${process.pid}-${randomBytes(4).toString("hex")}`);
}

/** A write that failed (disk full, permissions); the message starts with the file, which Node's own errors omit. */
export class FileWriteError extends Error {
  /** Always "FileWriteError". */
  override name = "FileWriteError";
  constructor(
    readonly file: string,
    cause: unknown,
  ) {
    super(`cannot write ${file}: ${(cause as Error).message ?? String(cause)}`, { cause });
  }
}

async function naming<T>(file: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw error instanceof FileWriteError ? error : new FileWriteError(file, error);
  }
}

/** Writes data to a temporary sibling, fsyncs it, then renames it over file. */
export async function writeFileAtomic(file: string, data: string | Uint8Array): Promise<void> {
  await writeFileAtomicWith(file, (handle) => handle.writeFile(data));
}

/**
 * Lets fill write a temporary sibling through its handle (a file too large to hold in memory at once), fsyncs it,
 * then renames it over file; on any failure the sibling is removed and the error names file.
 */
export async function writeFileAtomicWith(file: string, fill: (handle: FileHandle) => Promise<void>): Promise<void> {
  const temporary = temporarySibling(file, "tmp");
  await naming(file, async () => {
    const handle = await open(temporary, "w");
    try {
      await fill(handle);
      await handle.sync();
    } catch (error) {
      await handle.close();
      await rm(temporary, { force: true });
      throw error;
    }
    await handle.close();
    try {
      await rename(temporary, file);
    } catch (error) {
      await rm(temporary, { force: true });
      throw error;
    }
  });
}

/**
 * Writes a file inside a directory that is being built by writeDirAtomic (which fsyncs and renames the whole
 * directory): a failure names the file and leaves no partial file behind.
 */
export async function writeFileChecked(file: string, data: string | Uint8Array): Promise<void> {
  await naming(file, async () => {
    try {
      await writeFile(file, data);
    } catch (error) {
      await rm(file, { force: true });
      throw error;
    }
  });
}

/** fsync a directory so renames inside it survive a crash. */
export async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** fsync every file and directory under dir (contents written by other code, e.g. native writers). */
async function syncTree(dir: string): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      await syncTree(full);
    } else {
      const handle = await open(full, "r");
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
    }
  }
  await syncDir(dir);
}

/**
 * Builds a directory through fill(tempDir), then moves it to dir in one rename. An existing dir is replaced only after
 * the new one is complete; if fill throws, dir is untouched and the temporary directory is removed.
 */
export async function writeDirAtomic(dir: string, fill: (tempDir: string) => Promise<void>): Promise<void> {
  const temporary = temporarySibling(dir, "tmp");
  await naming(dir, async () => {
    await makeDirs(path.dirname(path.resolve(dir)));
    await mkdir(temporary);
  });
  try {
    await fill(temporary);
    await naming(dir, () => syncTree(temporary));
  } catch (error) {
    await rm(temporary, { recursive: true, force: true });
    throw error;
  }
  if (existsSync(dir)) {
    const old = temporarySibling(dir, "old");
    await rename(dir, old);
    await rename(temporary, dir);
    await rm(old, { recursive: true, force: true });
  } else {
    await rename(temporary, dir);
  }
  await syncDir(path.dirname(path.resolve(dir)));
}
