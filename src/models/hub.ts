// Model sources: a local directory, or a Hugging Face hub id resolved to a snapshot directory in the shared HF cache.
//
// The cache layout is the one Python's huggingface_hub writes and reads, so models downloaded by either side are
// found by the other:
//   {cache}/models--{org}--{name}/refs/{revision}          the commit sha the branch or tag pointed at
//   {cache}/models--{org}--{name}/blobs/{etag}             file contents (sha256 for LFS files, git blob sha otherwise)
//   {cache}/models--{org}--{name}/snapshots/{sha}/{file}   relative symlinks into blobs/
// Dataset repos live beside them as datasets--{org}--{name}, in the same layout.
// Downloads go through @huggingface/hub's API calls (paths-info, resolve, xet); the cache layout is written here,
// because the library's downloadFileToCacheDir writes no refs/ entry, names the snapshot after each file's own last
// commit rather than the revision's commit, and reports on stdout.
import { createHash } from "node:crypto";
import { createWriteStream } from "node:fs";
import { copyFile, readdir, readFile, rename, rm, stat, symlink } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as NodeReadableStream } from "node:stream/web";
import { datasetInfo, downloadFile, HubApiError, listFiles, modelInfo, pathsInfo, type PathInfo } from "@huggingface/hub";
import { writeFileAtomic } from "../util/atomic.js";
import { isGgufPath } from "./gguf/read.js";
import { makeDirs } from "../util/make-dirs.js";

/** What resolveModelSource downloads of a hub model. */
export interface ResolveModelSourceOptions {
  /** Branch, tag or 40-hex commit sha of a hub model (default "main"); ignored for local directories. */
  revision?: string;
  /**
   * Exactly the files needed, instead of the whole model (config.json, tokenizer.json, tokenizer_config.json, the
   * safetensors weights and, when the repo has one, generation_config.json). A `*.safetensors.index.json` in the list
   * brings its shards along.
   */
  files?: readonly string[];
}

const DEFAULT_ENDPOINT = "https://huggingface.co";
const REQUIRED_MODEL_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json"];
const OPTIONAL_MODEL_FILES = ["generation_config.json"];
const SINGLE_WEIGHTS = "model.safetensors";
const SHARDED_WEIGHTS = "model.safetensors.index.json";
const COMMIT_SHA = /^[0-9a-f]{40}$/;
// huggingface_hub's repo-id rule: "name" or "namespace/name", word characters, "-" and ".", starting and ending with
// a word character, at most 96 characters per part.
const REPO_ID_PART = /^\w(?:[\w.-]{0,94}\w)?$/;

function expandHome(p: string): string {
  return p === "~" || p.startsWith("~/") ? path.join(homedir(), p.slice(1)) : p;
}

function envFlag(name: string): boolean {
  return ["1", "ON", "YES", "TRUE"].includes((process.env[name] ?? "").toUpperCase());
}

/**
 * The hub cache root, by huggingface_hub's rules: `HF_HUB_CACHE`, else the legacy `HUGGINGFACE_HUB_CACHE`, else
 * `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.
 */
export function hubCacheDir(): string {
  const explicit = process.env.HF_HUB_CACHE || process.env.HUGGINGFACE_HUB_CACHE;
  if (explicit) return expandHome(explicit);
  return path.join(hfHome(), "hub");
}

function hfHome(): string {
  if (process.env.HF_HOME) return expandHome(process.env.HF_HOME);
  return path.join(expandHome(process.env.XDG_CACHE_HOME || "~/.cache"), "huggingface");
}

/** Whether `s` is shaped like a hub model id ("name" or "org/name"); a local directory of that name still wins. */
export function looksLikeHubId(s: string): boolean {
  const parts = s.split("/");
  return (
    parts.length <= 2 &&
    parts.every((part) => REPO_ID_PART.test(part)) &&
    !s.includes("--") &&
    !s.includes("..") &&
    !s.endsWith(".git")
  );
}

/** Relative file paths inside a snapshot; a path that could leave it (absolute, "..") is refused. */
function checkRepoPath(file: string, where: string): string {
  const normal = path.posix.normalize(file);
  if (file.length === 0 || path.posix.isAbsolute(normal) || normal.split("/").includes("..") || normal !== file) {
    throw new Error(`${where}: ${JSON.stringify(file)} is not a plain relative file path`);
  }
  return file;
}

async function exists(p: string): Promise<boolean> {
  try {
    await stat(p); // follows symlinks: a snapshot link to a deleted blob counts as missing
    return true;
  } catch {
    return false;
  }
}

/** The shard file names a safetensors index lists in its weight_map. */
async function shardsOf(indexFile: string): Promise<string[]> {
  let index: unknown;
  try {
    index = JSON.parse(await readFile(indexFile, "utf8"));
  } catch (err) {
    throw new Error(`Malformed safetensors index ${indexFile}: ${(err as Error).message}`);
  }
  const weightMap = (index as { weight_map?: unknown } | null)?.weight_map;
  if (typeof weightMap !== "object" || weightMap === null || Array.isArray(weightMap)) {
    throw new Error(`Malformed safetensors index ${indexFile}: no "weight_map" object`);
  }
  const shards = new Set<string>();
  for (const [tensor, shard] of Object.entries(weightMap)) {
    if (typeof shard !== "string") throw new Error(`Malformed safetensors index ${indexFile}: weight_map["${tensor}"] is not a file name`);
    shards.add(checkRepoPath(shard, indexFile));
  }
  return [...shards];
}

function formatBytes(n: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  let value = n;
  while (value >= 1000 && i < units.length - 1) {
    value /= 1000;
    i++;
  }
  return `${i === 0 ? value : value.toFixed(1)} ${units[i]}`;
}

/** The kinds of hub repository comlrl reads. */
export type HubRepoType = "model" | "dataset";

/** One hub repo at one revision, and where the cache keeps it. */
class HubSnapshot {
  readonly repoDir: string;
  readonly label: string;
  private sha: string | null = null;

  constructor(
    readonly id: string,
    readonly revision: string,
    readonly type: HubRepoType = "model",
  ) {
    this.repoDir = path.join(hubCacheDir(), `${type}s--${id.replaceAll("/", "--")}`);
    this.label = `${type === "model" ? "" : `${type} `}${id} (revision ${revision})`;
  }

  /** The commit the revision points at, from the cache only: the revision itself if it is a sha, else refs/. */
  async cachedCommit(): Promise<string | null> {
    if (COMMIT_SHA.test(this.revision)) return (this.sha = this.revision);
    try {
      const ref = (await readFile(path.join(this.repoDir, "refs", this.revision), "utf8")).trim();
      if (COMMIT_SHA.test(ref)) this.sha = ref;
    } catch {
      // No ref yet: this revision was never downloaded.
    }
    return this.sha;
  }

  get commit(): string {
    if (this.sha === null) throw new Error(`internal: the commit of ${this.label} is not known yet`);
    return this.sha;
  }

  get dir(): string {
    return path.join(this.repoDir, "snapshots", this.commit);
  }

  /**
   * Files of `wanted` that the snapshot lacks. The default model set asks for the single-file weights when they are
   * there, else for the sharded index; an index that is there adds its missing shards.
   */
  async missing(wanted: readonly string[] | undefined): Promise<string[]> {
    const files = [...(wanted ?? REQUIRED_MODEL_FILES)];
    if (wanted === undefined) files.push((await exists(path.join(this.dir, SINGLE_WEIGHTS))) ? SINGLE_WEIGHTS : SHARDED_WEIGHTS);
    const out: string[] = [];
    for (const file of files) {
      const local = path.join(this.dir, file);
      if (!(await exists(local))) out.push(file);
      else if (file.endsWith(".safetensors.index.json")) {
        for (const shard of await shardsOf(local)) if (!(await exists(path.join(this.dir, shard)))) out.push(shard);
      }
    }
    return out;
  }
}

/** Blob downloads in progress in this process, by blob path. */
const blobDownloads = new Map<string, Promise<void>>();

/** Connection settings from the environment, the way huggingface_hub reads them. */
async function hubConnection(): Promise<{ hubUrl: string; accessToken: string | undefined }> {
  const hubUrl = (process.env.HF_ENDPOINT || DEFAULT_ENDPOINT).replace(/\/+$/, "");
  let accessToken = process.env.HF_TOKEN || undefined;
  if (accessToken === undefined) {
    // `huggingface-cli login` / `hf auth login` store the token here.
    const tokenFile = process.env.HF_TOKEN_PATH ? expandHome(process.env.HF_TOKEN_PATH) : path.join(hfHome(), "token");
    accessToken = (await readFile(tokenFile, "utf8").catch(() => "")).trim() || undefined;
  }
  return { hubUrl, accessToken };
}

function hubError(err: unknown, what: string, type: HubRepoType = "model"): Error {
  const status = err instanceof HubApiError ? err.statusCode : undefined;
  const hint =
    status === 401 || status === 403
      ? ` (a gated or private ${type} needs an access token in HF_TOKEN)`
      : status === 404
        ? ` (no such ${type} or revision on the hub)`
        : "";
  return new Error(`${what}: ${(err as Error).message}${hint}`, { cause: err });
}

/**
 * Resolves a model source to a local directory or .gguf file. An existing directory or .gguf file is returned as it is. Anything else must be a
 * hub id: a cached snapshot holding every needed file is returned without touching the network; otherwise the
 * missing files are downloaded into the HF cache (`HF_ENDPOINT`, `HF_TOKEN` honoured), unless `HF_HUB_OFFLINE=1`,
 * where a missing file is an error.
 */
export async function resolveModelSource(idOrDir: string, options: ResolveModelSourceOptions = {}): Promise<string> {
  const local = await localSource(idOrDir, "model");
  if (local !== null) return local;
  const revision = checkedRevision(idOrDir, options.revision);
  const wanted = options.files?.map((f) => checkRepoPath(f, `files for ${idOrDir}`));

  const snapshot = new HubSnapshot(idOrDir, revision);
  const offline = envFlag("HF_HUB_OFFLINE");
  let downloader: HubDownloader | null = null;
  if ((await snapshot.cachedCommit()) === null) {
    if (offline) {
      const needed = wanted ?? [...REQUIRED_MODEL_FILES, "the safetensors weights"];
      throw new Error(
        `HF_HUB_OFFLINE is set and ${snapshot.label} has no snapshot in the cache ${hubCacheDir()} ` +
          `(no refs/${revision}), so ${needed.join(", ")} cannot be loaded`,
      );
    }
    downloader = new HubDownloader(snapshot, await hubConnection());
    await downloader.pinRevision();
  }
  const missing = await snapshot.missing(wanted);
  if (missing.length === 0) return snapshot.dir;
  if (offline) {
    throw new Error(
      `HF_HUB_OFFLINE is set and ${snapshot.label} is not fully cached: ${missing.join(", ")} missing from ${snapshot.dir}`,
    );
  }
  downloader ??= new HubDownloader(snapshot, await hubConnection());
  await downloader.fetch(wanted, missing);
  return snapshot.dir;
}

/**
 * A local directory for an existing one, null for a valid hub id; anything else is an error. `type` names the source
 * in messages ("model" → "Model source").
 */
async function localSource(idOrDir: string, type: HubRepoType): Promise<string | null> {
  const asPath = expandHome(idOrDir);
  const found = await stat(asPath).catch(() => null);
  const what = `${type[0]!.toUpperCase()}${type.slice(1)} source ${JSON.stringify(idOrDir)}`;
  if (found?.isDirectory()) return path.resolve(asPath);
  if (found && type === "model" && isGgufPath(asPath)) return path.resolve(asPath);
  if (found) throw new Error(`${what} is a file; expected a ${type} directory${type === "model" ? ", a .gguf file" : ""} or a hub id`);
  if (!looksLikeHubId(idOrDir)) {
    throw new Error(
      `${what} is neither an existing directory nor a valid Hugging Face hub id ` + `("name" or "org/name": letters, digits, "-", "_", ".")`,
    );
  }
  return null;
}

function checkedRevision(id: string, revision = "main"): string {
  if (revision.length === 0 || revision.split("/").some((part) => part === "" || part === "." || part === "..")) {
    throw new Error(`Invalid revision ${JSON.stringify(revision)} for ${id}`);
  }
  return revision;
}

/** The files of one repo snapshot: what it has, and a way to make some of them local. */
export interface RepoFiles {
  /** The local directory the files are (or will be, once fetched) in. */
  readonly dir: string;
  /** Names the repo and revision (or the directory) in messages. */
  readonly label: string;
  /** Every file's path relative to dir, "/"-separated, sorted. */
  readonly files: readonly string[];
  /** Makes the given files (from `files`) present in dir, downloading them into the cache where needed. */
  fetch(files: readonly string[]): Promise<void>;
}

/** Every file under dir (following symlinks, as snapshots are links into blobs/), "/"-separated and sorted. */
async function filesUnder(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for (const name of (await readdir(path.join(dir, prefix))).sort()) {
    const relative = prefix === "" ? name : `${prefix}/${name}`;
    const info = await stat(path.join(dir, relative)).catch(() => null);
    if (info?.isDirectory()) out.push(...(await filesUnder(dir, relative)));
    else if (info?.isFile()) out.push(relative);
  }
  return out;
}

/**
 * A dataset source's files: an existing directory as it is, or a hub dataset repo at a revision. Online, the file
 * list comes from the hub (one listing call, plus one to pin the revision the first time) and fetch() downloads what
 * the cache lacks; with `HF_HUB_OFFLINE=1` the list is the cached snapshot's and nothing is requested.
 */
export async function resolveDatasetFiles(idOrDir: string, options: { revision?: string } = {}): Promise<RepoFiles> {
  const local = await localSource(idOrDir, "dataset");
  const present = async (dir: string, label: string): Promise<RepoFiles> => {
    const files = await filesUnder(dir);
    return {
      dir,
      label,
      files,
      async fetch(wanted) {
        const absent = wanted.filter((f) => !files.includes(f));
        if (absent.length > 0) throw new Error(`${label} has no ${absent.join(", ")}`);
      },
    };
  };
  if (local !== null) return present(local, local);

  const snapshot = new HubSnapshot(idOrDir, checkedRevision(idOrDir, options.revision), "dataset");
  if (envFlag("HF_HUB_OFFLINE")) {
    if ((await snapshot.cachedCommit()) === null || !(await exists(snapshot.dir))) {
      throw new Error(`HF_HUB_OFFLINE is set and ${snapshot.label} has no snapshot in the cache ${hubCacheDir()} (no refs/${snapshot.revision})`);
    }
    return present(snapshot.dir, snapshot.label);
  }
  const downloader = new HubDownloader(snapshot, await hubConnection());
  if ((await snapshot.cachedCommit()) === null) await downloader.pinRevision();
  const onHub = await downloader.listFiles();
  return {
    dir: snapshot.dir,
    label: snapshot.label,
    files: [...onHub.keys()].sort(),
    async fetch(wanted) {
      for (const file of wanted) {
        const info = onHub.get(file);
        if (info === undefined) throw new Error(`${snapshot.label} has no ${file} on the hub`);
        if (!(await exists(path.join(snapshot.dir, file)))) await downloader.download(file, info);
      }
    },
  };
}

/** Downloads files of one snapshot into the cache. */
class HubDownloader {
  constructor(
    private readonly snapshot: HubSnapshot,
    private readonly connection: { hubUrl: string; accessToken: string | undefined },
  ) {}

  private get params() {
    return { repo: { type: this.snapshot.type, name: this.snapshot.id }, ...this.connection };
  }

  /** Downloads `missing` (as computed by {@link HubSnapshot.missing}), choosing the weight layout the hub has. */
  async fetch(wanted: readonly string[] | undefined, missing: string[]): Promise<void> {
    const { snapshot } = this;
    const defaultSet = wanted === undefined;
    // The default set has optional files and a choice of weight layouts: one paths-info call says which exist.
    const candidates = defaultSet ? [...missing, ...OPTIONAL_MODEL_FILES, SINGLE_WEIGHTS, SHARDED_WEIGHTS] : missing;
    const onHub = await this.pathsInfo([...new Set(candidates)]);
    const toFetch = missing.filter((f) => !defaultSet || (f !== SINGLE_WEIGHTS && f !== SHARDED_WEIGHTS));
    if (defaultSet) {
      for (const file of OPTIONAL_MODEL_FILES) {
        if (onHub.has(file) && !(await exists(path.join(snapshot.dir, file)))) toFetch.push(file);
      }
      if (missing.includes(SINGLE_WEIGHTS) || missing.includes(SHARDED_WEIGHTS)) {
        const weights = onHub.has(SINGLE_WEIGHTS) ? SINGLE_WEIGHTS : SHARDED_WEIGHTS;
        if (!onHub.has(weights)) {
          throw new Error(`${snapshot.label} has no safetensors weights on the hub (neither ${SINGLE_WEIGHTS} nor ${SHARDED_WEIGHTS})`);
        }
        toFetch.push(weights);
      }
    }
    const absent = toFetch.filter((f) => !onHub.has(f));
    if (absent.length > 0) throw new Error(`${snapshot.label} has no ${absent.join(", ")} on the hub (${this.connection.hubUrl})`);
    for (const file of toFetch) await this.download(file, onHub.get(file)!);

    // The shards of a freshly downloaded index are only known now.
    const shards: string[] = [];
    for (const file of toFetch) {
      if (!file.endsWith(".safetensors.index.json")) continue;
      for (const shard of await shardsOf(path.join(snapshot.dir, file))) {
        if (!(await exists(path.join(snapshot.dir, shard)))) shards.push(shard);
      }
    }
    if (shards.length === 0) return;
    const shardInfo = await this.pathsInfo(shards);
    for (const shard of shards) {
      const info = shardInfo.get(shard);
      if (!info) throw new Error(`${snapshot.label}: its safetensors index lists ${shard}, which is not on the hub`);
      await this.download(shard, info);
    }
  }

  /** Looks up the commit the revision points at now and records it in refs/, as huggingface_hub does. */
  async pinRevision(): Promise<void> {
    const { snapshot } = this;
    let sha: unknown;
    try {
      const lookup = { name: snapshot.id, revision: snapshot.revision, additionalFields: ["sha" as const], ...this.connection };
      ({ sha } = snapshot.type === "dataset" ? await datasetInfo(lookup) : await modelInfo(lookup));
    } catch (err) {
      throw hubError(err, `Cannot look up ${snapshot.label} on ${this.connection.hubUrl}`, snapshot.type);
    }
    if (typeof sha !== "string" || !COMMIT_SHA.test(sha)) {
      throw new Error(`The hub (${this.connection.hubUrl}) gave no commit sha for ${snapshot.label}`);
    }
    const refFile = path.join(snapshot.repoDir, "refs", snapshot.revision);
    await makeDirs(path.dirname(refFile));
    await writeFileAtomic(refFile, sha);
    await snapshot.cachedCommit();
  }

  private async pathsInfo(files: string[]): Promise<Map<string, PathInfo>> {
    const { snapshot } = this;
    try {
      const infos = await pathsInfo({ ...this.params, paths: files, revision: snapshot.commit });
      return new Map(infos.filter((info) => info.type === "file").map((info) => [info.path, info]));
    } catch (err) {
      throw hubError(err, `Cannot list files of ${snapshot.label} on ${this.connection.hubUrl}`, snapshot.type);
    }
  }

  /** Every file of the snapshot on the hub, with what a download needs to know about it. */
  async listFiles(): Promise<Map<string, PathInfo>> {
    const { snapshot } = this;
    const files = new Map<string, PathInfo>();
    try {
      for await (const entry of listFiles({ ...this.params, revision: snapshot.commit, recursive: true })) {
        if (entry.type === "file") files.set(checkRepoPath(entry.path, snapshot.label), entry as PathInfo);
      }
    } catch (err) {
      throw hubError(err, `Cannot list files of ${snapshot.label} on ${this.connection.hubUrl}`, snapshot.type);
    }
    return files;
  }

  /** Puts one file's content into blobs/ (unless it is there already) and links it from the snapshot. */
  async download(file: string, info: PathInfo): Promise<void> {
    const { snapshot } = this;
    const etag = info.lfs?.oid ?? info.oid ?? info.xetHash;
    if (etag === undefined || !/^[0-9a-f]+$/.test(etag)) {
      throw new Error(`The hub gave no usable content hash for ${file} of ${snapshot.label}`);
    }
    const blobPath = path.join(snapshot.repoDir, "blobs", etag);
    const pointer = path.join(snapshot.dir, file);
    await makeDirs(path.dirname(blobPath));
    await makeDirs(path.dirname(pointer));
    if (!(await exists(blobPath))) {
      // Agents built from one model id resolve it concurrently: each blob is fetched once, the others wait for it.
      let pending = blobDownloads.get(blobPath);
      if (pending === undefined) {
        pending = this.fetchBlob(file, info, etag, blobPath).finally(() => blobDownloads.delete(blobPath));
        blobDownloads.set(blobPath, pending);
      }
      await pending;
    }
    await rm(pointer, { force: true });
    try {
      await symlink(path.relative(path.dirname(pointer), blobPath), pointer);
    } catch (err) {
      // Another resolution of the same snapshot linked it first.
      if ((err as NodeJS.ErrnoException).code === "EEXIST" && (await exists(pointer))) return;
      // Symlinks need privileges on Windows; huggingface_hub falls back to a copy there too.
      await copyFile(blobPath, pointer);
    }
  }

  /**
   * Streams a file to `blobPath` through a per-process `.incomplete` name, checking the byte count and the hash the
   * hub names it by (sha256 for LFS files, git's blob sha1 otherwise) before it takes the final name.
   */
  private async fetchBlob(file: string, info: PathInfo, etag: string, blobPath: string): Promise<void> {
    const { snapshot } = this;
    const size = info.lfs?.size ?? info.size;
    const progress = new Progress(`${snapshot.id}@${snapshot.commit.slice(0, 7)} ${file}`, size);
    const incomplete = `${blobPath}.${process.pid}.incomplete`;
    const hash = info.lfs ? createHash("sha256") : createHash("sha1").update(`blob ${size}\0`);
    let received = 0;
    try {
      const blob = await downloadFile({ ...this.params, path: file, revision: snapshot.commit });
      if (!blob) throw new Error("the hub says the file does not exist");
      const counter = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          hash.update(chunk);
          received += chunk.length;
          progress.update(received);
          done(null, chunk);
        },
      });
      await pipeline(Readable.fromWeb(blob.stream() as NodeReadableStream), counter, createWriteStream(incomplete));
      if (received !== size) throw new Error(`got ${received} bytes, expected ${size}`);
      const digest = hash.digest("hex");
      if ((info.lfs || info.oid) && digest !== etag) throw new Error(`content hash ${digest} does not match the hub's ${etag}`);
      await rename(incomplete, blobPath);
    } catch (err) {
      progress.end(false);
      await rm(incomplete, { force: true });
      throw hubError(err, `Failed to download ${file} of ${snapshot.label} from ${this.connection.hubUrl}`, snapshot.type);
    }
    progress.end(true);
  }
}

/** Download progress on stderr: a line per file, updated in place on a terminal. */
class Progress {
  private readonly start = Date.now();
  private lastDraw = 0;

  constructor(
    private readonly name: string,
    private readonly size: number,
  ) {
    process.stderr.write(`[comlrl] downloading ${name} (${formatBytes(size)})${process.stderr.isTTY ? "" : "\n"}`);
  }

  update(received: number): void {
    const now = Date.now();
    if (!process.stderr.isTTY || now - this.lastDraw < 250) return;
    this.lastDraw = now;
    const percent = this.size > 0 ? Math.floor((100 * received) / this.size) : 100;
    process.stderr.write(`\r[comlrl] downloading ${this.name} (${formatBytes(this.size)}) ${percent}%`);
  }

  end(ok: boolean): void {
    const seconds = ((Date.now() - this.start) / 1000).toFixed(1);
    const line = ok
      ? `[comlrl] downloaded ${this.name} (${formatBytes(this.size)} in ${seconds} s)`
      : `[comlrl] download of ${this.name} failed after ${seconds} s`;
    process.stderr.write(process.stderr.isTTY ? `\r\x1b[K${line}\n` : `${line}\n`);
  }
}
