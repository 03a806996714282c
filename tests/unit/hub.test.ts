// Hub resolution against a local HTTP server that answers the hub API calls (tests/support/fake-hub.ts).
import { lstatSync, mkdirSync, readFileSync, readlinkSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { hubCacheDir, looksLikeHubId, resolveModelSource } from "../../src/models/hub.js";
import { FakeHub, gitOid, isolatedHubEnvironment, isLfs, sha256, type FakeRepo } from "../support/fake-hub.js";

const scratch = isolatedHubEnvironment("comlrl-hub-");

const TINY_FILES = {
  "config.json": '{"model_type":"qwen2"}',
  "generation_config.json": '{"eos_token_id":[2,3]}',
  "tokenizer.json": '{"model":{"type":"BPE"}}',
  "tokenizer_config.json": '{"eos_token":"</s>"}',
  "model.safetensors": Buffer.from(Array.from({ length: 3000 }, (_, i) => i % 251)),
};

const SHARDED_FILES = {
  "config.json": '{"model_type":"llama"}',
  "tokenizer.json": '{"model":{"type":"BPE"}}',
  "tokenizer_config.json": "{}",
  "model.safetensors.index.json": JSON.stringify({
    metadata: { total_size: 10 },
    weight_map: {
      "a.weight": "model-00001-of-00002.safetensors",
      "b.weight": "model-00002-of-00002.safetensors",
      "c.weight": "model-00001-of-00002.safetensors",
    },
  }),
  "model-00001-of-00002.safetensors": "first shard",
  "model-00002-of-00002.safetensors": "second shard",
};

describe("hubCacheDir", () => {
  it("follows huggingface_hub's precedence of HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and ~/.cache", () => {
    process.env.HF_HUB_CACHE = "/data/hub-cache";
    process.env.HF_HOME = "/data/hf-home";
    expect(hubCacheDir()).toBe("/data/hub-cache");
    delete process.env.HF_HUB_CACHE;
    expect(hubCacheDir()).toBe(path.join("/data/hf-home", "hub"));
    delete process.env.HF_HOME;
    process.env.XDG_CACHE_HOME = "/data/xdg";
    expect(hubCacheDir()).toBe(path.join("/data/xdg", "huggingface", "hub"));
    delete process.env.XDG_CACHE_HOME;
    expect(hubCacheDir()).toBe(path.join(homedir(), ".cache", "huggingface", "hub"));
  });

  it("honours the legacy HUGGINGFACE_HUB_CACHE and expands ~", () => {
    delete process.env.HF_HUB_CACHE;
    process.env.HUGGINGFACE_HUB_CACHE = "~/legacy-cache";
    expect(hubCacheDir()).toBe(path.join(homedir(), "legacy-cache"));
  });
});

describe("looksLikeHubId", () => {
  it("accepts name and org/name ids", () => {
    for (const id of ["gpt2", "Qwen/Qwen3-0.6B", "org_1/model.v2-final", "a/b"]) expect(looksLikeHubId(id), id).toBe(true);
  });

  it("rejects paths and malformed ids", () => {
    for (const s of ["./model", "/abs/model", "~/model", "a/b/c", "-org/x", "org/x-", "org--x/y", "a..b/c", "org/x.git", "has space", ""]) {
      expect(looksLikeHubId(s), s).toBe(false);
    }
  });
});

describe("resolveModelSource without the network", () => {
  it("returns an existing local directory as it is", async () => {
    const dir = path.join(scratch(), "my-model");
    mkdirSync(dir);
    expect(await resolveModelSource(dir)).toBe(dir);
    expect(await resolveModelSource(path.relative(process.cwd(), dir))).toBe(dir);
  });

  it("rejects a file, a missing path and an invalid id with messages that say which", async () => {
    const file = path.join(scratch(), "weights.bin");
    writeFileSync(file, "x");
    await expect(resolveModelSource(file)).rejects.toThrow(/is a file/);
    await expect(resolveModelSource(path.join(scratch(), "nope", "deeper"))).rejects.toThrow(/neither an existing directory nor a valid Hugging Face hub id/);
    await expect(resolveModelSource("not a model!")).rejects.toThrow(/"not a model!" is neither/);
  });

  it("maps refs/{revision} to snapshots/{sha}, and a sha revision straight to its snapshot", async () => {
    process.env.HF_HUB_OFFLINE = "1";
    const repoDir = path.join(scratch(), "cache", "models--acme--cached");
    const sha = "0123456789abcdef0123456789abcdef01234567";
    const other = "fedcba9876543210fedcba9876543210fedcba98";
    for (const commit of [sha, other]) {
      const snap = path.join(repoDir, "snapshots", commit);
      mkdirSync(snap, { recursive: true });
      for (const name of ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]) {
        writeFileSync(path.join(snap, name), "{}");
      }
    }
    mkdirSync(path.join(repoDir, "refs"), { recursive: true });
    writeFileSync(path.join(repoDir, "refs", "main"), sha);
    writeFileSync(path.join(repoDir, "refs", "v1.0"), `${other}\n`);
    expect(await resolveModelSource("acme/cached")).toBe(path.join(repoDir, "snapshots", sha));
    expect(await resolveModelSource("acme/cached", { revision: "v1.0" })).toBe(path.join(repoDir, "snapshots", other));
    expect(await resolveModelSource("acme/cached", { revision: other })).toBe(path.join(repoDir, "snapshots", other));
    // Only the files asked for need to be there.
    rmSync(path.join(repoDir, "snapshots", sha, "model.safetensors"));
    const tokenizerOnly = { files: ["tokenizer.json", "tokenizer_config.json"] };
    expect(await resolveModelSource("acme/cached", tokenizerOnly)).toBe(path.join(repoDir, "snapshots", sha));
  });

  it("in offline mode, names the id, the revision and the missing file", async () => {
    process.env.HF_HUB_OFFLINE = "1";
    const snap = path.join(scratch(), "cache", "models--acme--partial", "snapshots", "a".repeat(40));
    mkdirSync(snap, { recursive: true });
    for (const name of ["config.json", "tokenizer_config.json", "model.safetensors"]) writeFileSync(path.join(snap, name), "{}");
    await expect(resolveModelSource("acme/partial", { revision: "a".repeat(40) })).rejects.toThrow(
      new RegExp(`HF_HUB_OFFLINE.*acme/partial \\(revision a{40}\\).*tokenizer\\.json missing`),
    );
    await expect(resolveModelSource("acme/absent")).rejects.toThrow(/HF_HUB_OFFLINE.*acme\/absent \(revision main\).*no refs\/main.*config\.json/);
  });
});

describe("resolveModelSource downloading from a hub", () => {
  const hub = new FakeHub();
  let tiny: FakeRepo;
  let sharded: FakeRepo;

  beforeAll(async () => {
    await hub.start();
    tiny = hub.addRepo("acme/tiny", TINY_FILES);
    sharded = hub.addRepo("acme/sharded", SHARDED_FILES);
  });
  afterAll(() => hub.stop());

  // Download progress goes to stderr; keep it for the assertions and out of the test output.
  let stderr: string[];
  const realWrite = process.stderr.write.bind(process.stderr);
  beforeEach(() => {
    process.env.HF_ENDPOINT = hub.url;
    hub.requests.length = 0;
    stderr = [];
    process.stderr.write = ((chunk: string | Uint8Array) => stderr.push(String(chunk)) > 0) as typeof process.stderr.write;
  });
  afterEach(() => {
    process.stderr.write = realWrite;
  });

  it("writes the HF cache layout (refs, blobs, snapshot symlinks) and then resolves without requests", async () => {
    const dir = await resolveModelSource("acme/tiny");
    const repoDir = path.join(scratch(), "cache", "models--acme--tiny");
    expect(dir).toBe(path.join(repoDir, "snapshots", tiny.sha));
    expect(readFileSync(path.join(repoDir, "refs", "main"), "utf8")).toBe(tiny.sha);

    const expectedBlobs: string[] = [];
    for (const [name, content] of tiny.files) {
      const etag = isLfs(name) ? sha256(content) : gitOid(content);
      expectedBlobs.push(etag);
      const link = path.join(dir, name);
      expect(lstatSync(link).isSymbolicLink(), name).toBe(true);
      expect(readlinkSync(link)).toBe(path.join("..", "..", "blobs", etag));
      expect(readFileSync(link).equals(content), name).toBe(true);
    }
    expect(readdirSync(path.join(repoDir, "blobs")).sort()).toEqual(expectedBlobs.sort());

    expect(stderr.join("")).toContain(`downloading acme/tiny@${tiny.sha.slice(0, 7)} model.safetensors (3.0 KB)`);
    // The LFS weights went through the redirect to the CDN.
    expect(hub.requests.some((r) => r.url.startsWith("/cdn/"))).toBe(true);
    expect(hub.requests.some((r) => r.url.startsWith("/api/models/acme/tiny/revision/main"))).toBe(true);

    hub.requests.length = 0;
    expect(await resolveModelSource("acme/tiny")).toBe(dir);
    expect(hub.requests).toEqual([]);
  });

  it("fetches each file once when the same model is resolved concurrently", async () => {
    const dirs = await Promise.all([resolveModelSource("acme/tiny"), resolveModelSource("acme/tiny"), resolveModelSource("acme/tiny")]);
    expect(new Set(dirs).size).toBe(1);
    for (const name of tiny.files.keys()) expect(readFileSync(path.join(dirs[0]!, name)).equals(tiny.files.get(name)!), name).toBe(true);
    // One Range probe and one full GET per file, whatever the number of callers.
    const configGets = hub.requests.filter((r) => r.url.endsWith("/config.json"));
    expect(configGets).toHaveLength(2);
  });

  it("sends HF_TOKEN as a bearer token on every hub request", async () => {
    process.env.HF_TOKEN = "hf_test_token";
    await resolveModelSource("acme/tiny");
    expect(hub.requests.length).toBeGreaterThan(0);
    for (const r of hub.requests) expect(r.authorization, r.url).toBe("Bearer hf_test_token");
  });

  it("downloads only what is missing from a partial snapshot", async () => {
    await resolveModelSource("acme/tiny");
    const dir = path.join(scratch(), "cache", "models--acme--tiny", "snapshots", tiny.sha);
    rmSync(path.join(dir, "tokenizer.json"));
    hub.requests.length = 0;
    await resolveModelSource("acme/tiny");
    expect(readFileSync(path.join(dir, "tokenizer.json"), "utf8")).toBe(TINY_FILES["tokenizer.json"]);
    const resolves = hub.requests.filter((r) => r.url.includes("/resolve/")).map((r) => r.url);
    // The blob was still there, so the file is only linked again: no download at all.
    expect(resolves).toEqual([]);
  });

  it("in offline mode, fails on a missing file without any request", async () => {
    await resolveModelSource("acme/tiny");
    const dir = path.join(scratch(), "cache", "models--acme--tiny", "snapshots", tiny.sha);
    rmSync(path.join(dir, "tokenizer_config.json"));
    hub.requests.length = 0;
    process.env.HF_HUB_OFFLINE = "1";
    await expect(resolveModelSource("acme/tiny")).rejects.toThrow(/acme\/tiny \(revision main\).*tokenizer_config\.json/);
    expect(hub.requests).toEqual([]);
  });

  it("downloads every shard listed in a sharded index; generation_config.json is optional", async () => {
    const dir = await resolveModelSource("acme/sharded");
    expect(dir).toBe(path.join(scratch(), "cache", "models--acme--sharded", "snapshots", sharded.sha));
    for (const name of sharded.files.keys()) {
      expect(readFileSync(path.join(dir, name)).equals(sharded.files.get(name)!), name).toBe(true);
    }
    expect(() => lstatSync(path.join(dir, "generation_config.json"))).toThrow();
  });

  it("fetches a revision given as a commit sha into snapshots/{sha} without writing a ref", async () => {
    const dir = await resolveModelSource("acme/tiny", { revision: tiny.sha, files: ["config.json"] });
    const repoDir = path.join(scratch(), "cache", "models--acme--tiny");
    expect(dir).toBe(path.join(repoDir, "snapshots", tiny.sha));
    expect(readdirSync(dir)).toEqual(["config.json"]);
    expect(() => lstatSync(path.join(repoDir, "refs"))).toThrow();
    expect(hub.requests.some((r) => r.url.includes("/revision/"))).toBe(false);
  });

  it("reports files and repos the hub does not have", async () => {
    await expect(resolveModelSource("acme/tiny", { files: ["missing.json"] })).rejects.toThrow(
      /acme\/tiny \(revision main\) has no missing\.json on the hub/,
    );
    await expect(resolveModelSource("acme/ghost")).rejects.toThrow(/Cannot look up acme\/ghost \(revision main\).*no such model/);
  });

  it("rejects a download whose content does not match the hub's hash, leaving no blob behind", async () => {
    hub.corrupt.add("acme/tiny/tokenizer.json");
    try {
      await expect(resolveModelSource("acme/tiny")).rejects.toThrow(/Failed to download tokenizer\.json of acme\/tiny.*content hash/);
    } finally {
      hub.corrupt.clear();
    }
    const blobs = readdirSync(path.join(scratch(), "cache", "models--acme--tiny", "blobs"));
    expect(blobs).not.toContain(gitOid(Buffer.from(TINY_FILES["tokenizer.json"])));
    expect(blobs.filter((b) => b.endsWith(".incomplete"))).toEqual([]);
  });

  it("refuses shard names that would leave the snapshot", async () => {
    hub.addRepo("acme/evil", {
      ...SHARDED_FILES,
      "model.safetensors.index.json": JSON.stringify({ weight_map: { w: "../../../escape.safetensors" } }),
    });
    await expect(resolveModelSource("acme/evil")).rejects.toThrow(/not a plain relative file path/);
  });

  it("finds a snapshot written by huggingface_hub (relative symlinks into blobs)", async () => {
    // A cache written by huggingface_hub: same layout, so nothing is fetched.
    const repoDir = path.join(scratch(), "cache", "models--acme--tiny");
    mkdirSync(path.join(repoDir, "blobs"), { recursive: true });
    mkdirSync(path.join(repoDir, "snapshots", tiny.sha), { recursive: true });
    mkdirSync(path.join(repoDir, "refs"), { recursive: true });
    writeFileSync(path.join(repoDir, "refs", "main"), tiny.sha);
    for (const [name, content] of tiny.files) {
      writeFileSync(path.join(repoDir, "blobs", gitOid(content)), content);
      symlinkSync(path.join("..", "..", "blobs", gitOid(content)), path.join(repoDir, "snapshots", tiny.sha, name));
    }
    expect(await resolveModelSource("acme/tiny")).toBe(path.join(repoDir, "snapshots", tiny.sha));
    expect(hub.requests).toEqual([]);
  });
});
