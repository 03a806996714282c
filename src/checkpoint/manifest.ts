// A checkpoint's manifest: every file with its size and SHA-256, so a partial or corrupted checkpoint is refused with
// the name of the file at fault instead of resuming from garbage.
import { createHash } from "node:crypto";
import { createReadStream, existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import { readdir } from "node:fs/promises";
import path from "node:path";
import { writeFileAtomic } from "../util/atomic.js";
import { irregularFileKind, requireRegularFile } from "../util/regular-file.js";

export const MANIFEST = "manifest.json";

export interface Manifest {
  format: 1;
  createdAt: string;
  files: Record<string, { size: number; sha256: string }>;
}

/** A checkpoint that is missing, incomplete, corrupted or from another trainer; the message names the file or directory. */
export class CheckpointError extends Error {
  /** Always "CheckpointError". */
  override name = "CheckpointError";
}

async function sha256(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

async function listFiles(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(path.join(dir, prefix), { withFileTypes: true })) {
    const relative = path.join(prefix, entry.name);
    if (entry.isDirectory()) out.push(...(await listFiles(dir, relative)));
    else if (relative !== MANIFEST) out.push(relative);
  }
  return out.sort();
}

/** Hashes every file under dir into dir/manifest.json. */
export async function writeManifest(dir: string): Promise<Manifest> {
  const manifest: Manifest = { format: 1, createdAt: new Date().toISOString(), files: {} };
  for (const file of await listFiles(dir)) {
    const full = path.join(dir, file);
    manifest.files[file] = { size: statSync(full).size, sha256: await sha256(full) };
  }
  await writeFileAtomic(path.join(dir, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}

/** Whether a manifest entry (as read from the file) has its size and checksum. */
function isEntry(value: unknown): value is Manifest["files"][string] {
  const entry = value as Partial<Manifest["files"][string]> | null;
  return typeof entry === "object" && entry !== null && typeof entry.size === "number" && typeof entry.sha256 === "string";
}

/** A JSON file of a checkpoint (its manifest, its trainer state), refused by name when it is not a regular file or not JSON. */
export function readCheckpointJson(file: string): unknown {
  requireRegularFile(file, (reason) => new CheckpointError(`checkpoint file ${reason}`));
  try {
    return JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new CheckpointError(`${file}: malformed JSON (${(error as Error).message})`);
  }
}

/** Checks every listed file's presence, size and checksum; throws naming the first file at fault. */
export async function verifyManifest(dir: string): Promise<Manifest> {
  const manifestFile = path.join(dir, MANIFEST);
  if (!existsSync(manifestFile)) throw new CheckpointError(`${dir} is not a complete checkpoint: ${MANIFEST} is missing`);
  const manifest = readCheckpointJson(manifestFile) as Manifest;
  const files: unknown = (manifest as Manifest | null)?.files ?? {};
  if (typeof manifest !== "object" || manifest === null || typeof files !== "object" || files === null || Array.isArray(files)) {
    throw new CheckpointError(`${manifestFile}: not a checkpoint manifest (an object whose "files" maps each file to { size, sha256 })`);
  }
  const root = realpathSync(dir);
  // Resume reads what the components find in the directory, so a file planted beside the listed ones (an extra
  // shard, a state file) would be loaded unvouched for.
  const listed = new Set(Object.keys(files));
  for (const file of await listFiles(dir)) {
    if (!listed.has(file)) throw new CheckpointError(`checkpoint ${dir} holds ${file}, which its ${MANIFEST} does not list (added after it was written)`);
  }
  for (const [file, expected] of Object.entries(files as Record<string, unknown>)) {
    if (!isEntry(expected)) throw new CheckpointError(`${manifestFile}: entry ${JSON.stringify(file)} must be { size, sha256 }, got ${JSON.stringify(expected)}`);
    const full = path.join(dir, file);
    // Entries are relative paths inside the checkpoint; one that climbs out, is absolute, or reaches outside
    // through a symlink would have resume read (and vouch for) a file that is not part of it.
    const inside = (target: string) => {
      const relative = path.relative(root, target);
      return !path.isAbsolute(file) && relative !== "" && relative !== ".." && !relative.startsWith(`..${path.sep}`);
    };
    if (!inside(path.resolve(root, file)) || (existsSync(full) && !inside(realpathSync(full)))) {
      throw new CheckpointError(`${manifestFile}: entry ${JSON.stringify(file)} is not a file inside the checkpoint`);
    }
    if (!existsSync(full)) throw new CheckpointError(`checkpoint file ${full} is missing`);
    const irregular = irregularFileKind(full);
    if (irregular) throw new CheckpointError(`checkpoint file ${full} is not a regular file (${irregular})`);
    const size = statSync(full).size;
    if (size !== expected.size) throw new CheckpointError(`checkpoint file ${full} has ${size} bytes, the manifest says ${expected.size} (truncated or changed)`);
    if ((await sha256(full)) !== expected.sha256) throw new CheckpointError(`checkpoint file ${full} does not match its checksum (corrupted)`);
  }
  return manifest;
}
