// A local HTTP server that answers the calls @huggingface/hub makes, the way the hub does ({type}s is "models" or
// "datasets"; file URLs of models have no type prefix, those of datasets start with /datasets):
//   GET  /api/{type}s/{id}/revision/{rev}        repo info; the commit sha when asked with expand=sha
//   POST /api/{type}s/{id}/paths-info/{rev}      {paths} → one entry per existing file (oid, size, lfs for LFS files)
//   GET  /api/{type}s/{id}/tree/{rev}?recursive  every file and directory, paged (Link: rel="next") by pageSize
//   GET  [/datasets]/{id}/resolve/{rev}/{file}   plain files served directly (ETag = git blob sha1, X-Repo-Commit);
//                                                LFS files redirected to a CDN URL (X-Linked-Etag = sha256)
//   GET  /cdn/{sha256}                           LFS content
// Every GET honours `Range: bytes=a-b` with 206 + Content-Range, as downloadFile first probes with bytes=0-0.
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterEach, beforeEach } from "vitest";
import { scratchPerTest } from "./scratch.js";

export const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");
export const gitOid = (data: Buffer) => createHash("sha1").update(`blob ${data.length}\0`).update(data).digest("hex");
/** Files the hub keeps in LFS (by extension, as .gitattributes does on the hub). */
export const isLfs = (file: string) => file.endsWith(".safetensors") || file.endsWith(".parquet");

export type RepoType = "model" | "dataset";

export interface FakeRepo {
  sha: string;
  files: Map<string, Buffer>;
}

export interface Logged {
  method: string;
  url: string;
  authorization: string | undefined;
}

export class FakeHub {
  readonly repos = new Map<string, FakeRepo>();
  readonly requests: Logged[] = [];
  /** "{repo}/{file}" entries served with one byte changed, as a broken proxy or disk would. */
  readonly corrupt = new Set<string>();
  /** Entries per page of a tree listing (the hub pages at 1000; small here so paging is exercised). */
  pageSize = 1000;
  private server: Server = createServer((req, res) => {
    this.requests.push({ method: req.method!, url: req.url!, authorization: req.headers.authorization });
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => this.handle(req, res, body));
  });
  url = "";

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  addRepo(id: string, files: Record<string, string | Buffer>, type: RepoType = "model"): FakeRepo {
    const repo = {
      sha: createHash("sha1").update(`${type}:${id}`).digest("hex"),
      files: new Map(Object.entries(files).map(([name, content]) => [name, Buffer.from(content)])),
    };
    this.repos.set(`${type}:${id}`, repo);
    return repo;
  }

  private handle(req: IncomingMessage, res: ServerResponse, body: string): void {
    const url = new URL(req.url!, this.url);
    const parts = url.pathname.split("/").slice(1).map(decodeURIComponent);
    if (parts[0] === "api" && (parts[1] === "models" || parts[1] === "datasets")) {
      const type = parts[1] === "models" ? "model" : "dataset";
      const repo = this.repos.get(`${type}:${parts[2]}/${parts[3]}`);
      const rev = parts[5];
      if (!repo || (rev !== "main" && rev !== repo.sha)) return this.json(res, 404, { error: "Repository not found" });
      if (parts[4] === "revision" && req.method === "GET") {
        const info: Record<string, unknown> = { _id: "0", id: `${parts[2]}/${parts[3]}`, private: false, likes: 0, downloads: 0 };
        if (url.searchParams.getAll("expand").includes("sha")) info.sha = repo.sha;
        return this.json(res, 200, info);
      }
      if (parts[4] === "paths-info" && req.method === "POST") {
        const paths = (JSON.parse(body) as { paths: string[] }).paths;
        return this.json(res, 200, paths.filter((p) => repo.files.has(p)).map((p) => this.entry(p, repo.files.get(p)!)));
      }
      if (parts[4] === "tree" && req.method === "GET" && url.searchParams.get("recursive") === "true") {
        return this.tree(res, url, repo);
      }
    }
    if (parts[0] === "cdn" && req.method === "GET") {
      for (const repo of this.repos.values()) {
        for (const content of repo.files.values()) {
          if (sha256(content) === parts[1]) return this.serve(req, res, content, { ETag: `"${parts[1]}"` });
        }
      }
    }
    const type: RepoType = parts[0] === "datasets" ? "dataset" : "model";
    const rest = type === "dataset" ? parts.slice(1) : parts;
    if (rest[2] === "resolve" && req.method === "GET") {
      const id = `${rest[0]}/${rest[1]}`;
      const repo = this.repos.get(`${type}:${id}`);
      const file = rest.slice(4).join("/");
      const content = repo?.files.get(file);
      if (!repo || (rest[3] !== "main" && rest[3] !== repo.sha) || content === undefined) {
        res.writeHead(404, { "X-Error-Code": "EntryNotFound", "Content-Type": "text/plain" });
        return void res.end("Entry not found");
      }
      if (isLfs(file)) {
        res.writeHead(302, {
          Location: `/cdn/${sha256(content)}`,
          "X-Repo-Commit": repo.sha,
          "X-Linked-Etag": `"${sha256(content)}"`,
          "X-Linked-Size": String(content.length),
        });
        return void res.end();
      }
      const served = this.corrupt.has(`${id}/${file}`) ? Buffer.from(content).fill(0x20, 0, 1) : content;
      return this.serve(req, res, served, { ETag: `"${gitOid(content)}"`, "X-Repo-Commit": repo.sha });
    }
    this.json(res, 404, { error: `unexpected request ${req.method} ${req.url}` });
  }

  private entry(file: string, content: Buffer): Record<string, unknown> {
    const entry: Record<string, unknown> = { type: "file", path: file, size: content.length, oid: gitOid(content) };
    if (isLfs(file)) entry.lfs = { oid: sha256(content), size: content.length, pointerSize: 134 };
    return entry;
  }

  /** The recursive tree listing: directories and files in path order, `pageSize` per page. */
  private tree(res: ServerResponse, url: URL, repo: FakeRepo): void {
    const dirs = new Set<string>();
    for (const file of repo.files.keys()) {
      const segments = file.split("/");
      for (let i = 1; i < segments.length; i++) dirs.add(segments.slice(0, i).join("/"));
    }
    const entries = [
      ...[...dirs].map((dir) => ({ type: "directory", path: dir, size: 0, oid: gitOid(Buffer.from(dir)) })),
      ...[...repo.files].map(([file, content]) => this.entry(file, content)),
    ].sort((a, b) => String(a.path).localeCompare(String(b.path)));
    const start = Number(url.searchParams.get("cursor") ?? 0);
    const page = entries.slice(start, start + this.pageSize);
    const headers: Record<string, string> = { "Content-Type": "application/json" };
    if (start + this.pageSize < entries.length) {
      const next = new URL(url);
      next.searchParams.set("cursor", String(start + this.pageSize));
      headers.Link = `<${next.href}>; rel="next"`;
    }
    res.writeHead(200, headers);
    res.end(JSON.stringify(page));
  }

  private serve(req: IncomingMessage, res: ServerResponse, content: Buffer, headers: Record<string, string>): void {
    const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? "");
    if (range) {
      const start = Number(range[1]);
      const end = Math.min(Number(range[2]), content.length - 1);
      res.writeHead(206, { ...headers, "Content-Range": `bytes ${start}-${end}/${content.length}`, "Accept-Ranges": "bytes" });
      return void res.end(content.subarray(start, end + 1));
    }
    res.writeHead(200, { ...headers, "Content-Length": String(content.length), "Accept-Ranges": "bytes" });
    res.end(content);
  }

  private json(res: ServerResponse, status: number, value: unknown): void {
    res.writeHead(status, { "Content-Type": "application/json" });
    res.end(JSON.stringify(value));
  }
}

/** The environment variables that point the hub client at a cache, an endpoint or a token. */
const HUB_ENV_KEYS = ["HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HF_ENDPOINT", "HF_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE"] as const;

/**
 * Gives every test of the file a hub environment of its own: the hub's variables cleared, a fresh scratch folder
 * holding the cache, and a token path that does not exist (a real `huggingface-cli login` on this machine stays out of
 * the requests); all restored and removed after the test. Returns the running test's scratch folder.
 */
export function isolatedHubEnvironment(prefix: string): () => string {
  const scratch = scratchPerTest(prefix);
  let saved: Record<string, string | undefined> = {};
  beforeEach(() => {
    saved = Object.fromEntries(HUB_ENV_KEYS.map((k) => [k, process.env[k]]));
    for (const k of HUB_ENV_KEYS) delete process.env[k];
    process.env.HF_HUB_CACHE = path.join(scratch(), "cache");
    process.env.HF_TOKEN_PATH = path.join(scratch(), "no-token");
  });
  afterEach(() => {
    for (const k of HUB_ENV_KEYS) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  });
  return scratch;
}
