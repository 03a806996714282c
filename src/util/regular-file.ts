// Opening a FIFO for reading blocks until something writes to it, and a device may never end: files read whole
// (configs, manifests and what they list) are checked to be regular files first, so such a path is refused by name.
import { statSync, type Stats } from "node:fs";

function kindOf(stats: Stats): string {
  if (stats.isFIFO()) return "a FIFO";
  if (stats.isDirectory()) return "a directory";
  if (stats.isCharacterDevice()) return "a character device";
  if (stats.isBlockDevice()) return "a block device";
  if (stats.isSocket()) return "a socket";
  return "a special file";
}

/** What `file` is when it exists (symlinks followed) and is not a regular file, e.g. "a FIFO"; null otherwise. */
export function irregularFileKind(file: string): string | null {
  let stats: Stats;
  try {
    stats = statSync(file);
  } catch {
    // A missing or unreadable file is reported by the read that follows, in its caller's words.
    return null;
  }
  return stats.isFile() ? null : kindOf(stats);
}

/** Throws fail(reason) when file exists and is not a regular file, before anything opens it. */
export function requireRegularFile(file: string, fail: (reason: string) => Error): void {
  const irregular = irregularFileKind(file);
  if (irregular) throw fail(`${file} is not a regular file (${irregular})`);
}
