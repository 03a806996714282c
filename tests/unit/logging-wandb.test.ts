// W&B: the pure config helpers, and real runs of @wandb/sdk against a local server that answers the calls the SDK
// makes the way api.wandb.ai does (nothing leaves the machine):
//   POST /graphql                                   Viewer (default entity) and UpsertBucket (create/reopen a run)
//   POST /files/{entity}/{project}/{run}/file_stream history rows, then {complete: true} when the run finishes
import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { MetricsLogger } from "../../src/logging/metrics-logger.js";
import {
  checkWandbConfig,
  loadWandbSdk,
  mergeWandbResume,
  WandbLogger,
  wandbInitOptions,
  wandbRunConfig,
  wandbSkipReason,
  type WandbConfig,
  type WandbRunIdentity,
} from "../../src/logging/wandb.js";
import { makeBase, makeTrainer } from "../support/checkpoint-run.js";
import { illTyped } from "../support/ill-typed.js";

describe("mergeWandbResume", () => {
  const saved: WandbRunIdentity = { id: "run123", project: "saved-project", entity: "team", name: "first-try" };

  it("adds the saved run with resume allow, filling unset project, entity and name", () => {
    expect(mergeWandbResume({ tags: ["x"] }, saved)).toEqual({
      tags: ["x"],
      project: "saved-project",
      entity: "team",
      name: "first-try",
      id: "run123",
      resume: "allow",
    });
  });

  it("keeps the fields the user set", () => {
    expect(mergeWandbResume({ project: "mine", runName: "renamed" }, saved)).toEqual({
      project: "mine",
      runName: "renamed",
      entity: "team",
      id: "run123",
      resume: "allow",
    });
  });

  it("returns a config with an explicit id or resume unchanged", () => {
    const withId: WandbConfig = { id: "other" };
    const withResume: WandbConfig = { resume: "never" };
    const withResumeFalse: WandbConfig = { resume: false };
    expect(mergeWandbResume(withId, saved)).toBe(withId);
    expect(mergeWandbResume(withResume, saved)).toBe(withResume);
    expect(mergeWandbResume(withResumeFalse, saved)).toBe(withResumeFalse);
  });

  it("returns the config unchanged when the checkpoint has no run", () => {
    const config: WandbConfig = { project: "p" };
    expect(mergeWandbResume(config, null)).toBe(config);
  });

  it("leaves the name unset when the saved run had none", () => {
    expect(mergeWandbResume({}, { ...saved, name: null })).not.toHaveProperty("name");
  });
});

describe("wandbInitOptions", () => {
  it("applies the spec defaults", () => {
    const options = wandbInitOptions({}, { algorithm: "MAGRPO", runConfig: { num_agents: 2 } });
    expect(options).toEqual({
      project: "comlrl",
      name: "test-magrpo",
      config: { num_agents: 2 },
      settings: { silent: false },
    });
  });

  it("passes the configured fields, preferring name over runName", () => {
    const options = wandbInitOptions(
      { project: "p", entity: "e", name: "n", runName: "ignored", dir: "/tmp/w", tags: ["a"], id: "abc", resume: "allow" },
      { algorithm: "IAC", quiet: true },
    );
    expect(options).toMatchObject({ project: "p", entity: "e", name: "n", dir: "/tmp/w", tags: ["a"], id: "abc", resume: "allow" });
    expect(options.settings).toEqual({ silent: true });
    expect(wandbInitOptions({ runName: "alias" }, { algorithm: "IAC" }).name).toBe("alias");
  });

  it("rejects wrongly typed fields, naming them", () => {
    expect(() => wandbInitOptions(illTyped<WandbConfig>({ project: 3 }), { algorithm: "x" })).toThrow(/wandbConfig\.project must be a string/);
    expect(() => checkWandbConfig(illTyped<WandbConfig>({ tags: "a" }))).toThrow(/wandbConfig\.tags must be a list of strings/);
    expect(() => checkWandbConfig(illTyped<WandbConfig>({ configSections: [] }))).toThrow(/wandbConfig\.configSections must be an object/);
    expect(() => checkWandbConfig(illTyped<WandbConfig>({ resume: "sometimes" }))).toThrow(/wandbConfig\.resume must be one of/);
    expect(() => checkWandbConfig(illTyped<WandbConfig>(null))).toThrow(/wandbConfig must be an object/);
  });
});

describe("wandbRunConfig", () => {
  it("merges the sections and derives the dataset fields, as CoMLRL's wandb_init_kwargs", () => {
    const sections = {
      dataset: { name: "humaneval", type: "code" },
      output: { verbose: false, base_dir: "/runs" },
      external: { mode: "level_feedback", original_prompt: true },
    };
    expect(wandbRunConfig({ model_name: "Qwen/Qwen3-0.6B", num_agents: 2 }, sections)).toEqual({
      model_name: "Qwen/Qwen3-0.6B",
      num_agents: 2,
      ...sections,
      dataset_name: "humaneval",
      dataset_type: "code",
    });
  });

  it("leaves the dataset fields out when the dataset section does not name them", () => {
    expect(wandbRunConfig({ num_agents: 2 }, { dataset: { name: "", type: null }, output: { verbose: true } })).toEqual({
      num_agents: 2,
      dataset: { name: "", type: null },
      output: { verbose: true },
    });
  });
});

describe("wandbSkipReason", () => {
  it("turns W&B off for WANDB_MODE disabled or offline only", () => {
    expect(wandbSkipReason({})).toBeNull();
    expect(wandbSkipReason({ WANDB_MODE: "online" })).toBeNull();
    expect(wandbSkipReason({ WANDB_MODE: "disabled" })).toMatch(/WANDB_MODE=disabled/);
    expect(wandbSkipReason({ WANDB_MODE: " Offline " })).toMatch(/@wandb\/sdk has no offline mode/);
  });
});

describe("loadWandbSdk", () => {
  it("loads the installed SDK", async () => {
    const sdk = await loadWandbSdk();
    expect(typeof sdk.init).toBe("function");
  });

  it("names the package to install when it is missing", async () => {
    const missing = "comlrl-no-such-package";
    await expect(loadWandbSdk(() => import(missing))).rejects.toThrow(/needs the npm package @wandb\/sdk.*npm install @wandb\/sdk/s);
  });

  it("passes other import failures through", async () => {
    await expect(loadWandbSdk(() => Promise.reject(new Error("boom")))).rejects.toThrow(/^boom$/);
  });
});

// ---- against a local W&B server ----

interface Upsert {
  name: string;
  project: string;
  entity: string;
  displayName?: string;
  config: string;
}

interface FileStreamPost {
  path: string;
  body: { files?: Record<string, { content: string[]; offset: number }>; complete?: boolean; exitcode?: number };
}

const ENV_KEYS = ["WANDB_BASE_URL", "WANDB_API_KEY", "WANDB_MODE"] as const;
let server: Server;
let baseUrl: string;
let upserts: Upsert[];
let streams: FileStreamPost[];
let savedEnv: Record<string, string | undefined>;
let scratch: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
    req.on("end", () => {
      res.setHeader("content-type", "application/json");
      const json = JSON.parse(body || "{}");
      if (req.url === "/graphql" && json.operationName === "Viewer") {
        res.end(JSON.stringify({ data: { viewer: { id: "u1", entity: "fake-entity", flags: "", teams: { edges: [] } } } }));
      } else if (req.url === "/graphql" && json.operationName === "UpsertBucket") {
        const vars = json.variables as Upsert;
        upserts.push(vars);
        const bucket = {
          id: "b1",
          name: vars.name,
          displayName: vars.displayName ?? "generated-name",
          project: { id: "p1", name: vars.project, entity: { id: "e1", name: vars.entity } },
        };
        res.end(JSON.stringify({ data: { upsertBucket: { bucket, inserted: true } } }));
      } else if (req.url?.endsWith("/file_stream")) {
        streams.push({ path: req.url, body: json });
        res.end("{}");
      } else {
        res.statusCode = 404;
        res.end("{}");
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  savedEnv = Object.fromEntries(ENV_KEYS.map((k) => [k, process.env[k]]));
  process.env.WANDB_BASE_URL = baseUrl;
  process.env.WANDB_API_KEY = "k".repeat(40);
  delete process.env.WANDB_MODE;
  upserts = [];
  streams = [];
  scratch = mkdtempSync(path.join(tmpdir(), "comlrl-wandb-"));
});

afterEach(() => {
  for (const k of ENV_KEYS) {
    if (savedEnv[k] === undefined) delete process.env[k];
    else process.env[k] = savedEnv[k];
  }
  rmSync(scratch, { recursive: true, force: true });
  vi.restoreAllMocks();
});

/** Files this process holds open under dir (Linux /proc; elsewhere nothing to check). */
function openFilesUnder(dir: string): string[] {
  if (!existsSync("/proc/self/fd")) return [];
  return readdirSync("/proc/self/fd")
    .map((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return "";
      }
    })
    .filter((target) => target.startsWith(dir));
}

/** History rows the server received, in order, without the SDK's bookkeeping fields. */
function historyRows(): Record<string, unknown>[] {
  return streams
    .flatMap((post) => post.body.files?.["wandb-history.jsonl"]?.content ?? [])
    .map((line) => {
      const { _runtime, _timestamp, ...row } = JSON.parse(line) as Record<string, unknown>;
      return row;
    });
}

describe("WandbLogger", () => {
  it("creates a run, logs history rows and tables on the env_step axis, and finishes it", async () => {
    const dir = path.join(scratch, "wandb-dir");
    const logger = await WandbLogger.init(
      { project: "comlrl-test", dir, tags: ["unit"], configSections: { dataset: { name: "tldr", type: "writing" } } },
      { algorithm: "MAGRPO", runConfig: { num_agents: 2 }, quiet: true },
    );
    expect(existsSync(dir)).toBe(true);
    const identity = logger.runIdentity();
    expect(identity).toEqual({ id: expect.stringMatching(/^[a-z0-9]{8}$/), project: "comlrl-test", entity: "fake-entity", name: "test-magrpo" });
    expect(upserts).toHaveLength(1);
    expect(upserts[0]).toMatchObject({ name: identity.id, project: "comlrl-test", displayName: "test-magrpo" });
    expect(JSON.parse(upserts[0]!.config)).toEqual({
      num_agents: 2,
      dataset: { name: "tldr", type: "writing" },
      dataset_name: "tldr",
      dataset_type: "writing",
    });

    logger.log({ "turn_1/reward_mean": 0.5 }, 4);
    logger.logTable("samples", ["turn", "completion"], [[1, "hi"]], 9);
    expect(() => logger.logTable("samples", ["turn", "completion"], [[1]], 9)).toThrow(/row 0 has 1 cells for 2 columns/);
    await logger.finish();
    await logger.finish();

    expect(streams.every((post) => post.path === `/files/fake-entity/comlrl-test/${identity.id}/file_stream`)).toBe(true);
    expect(historyRows()).toEqual([
      { "turn_1/reward_mean": 0.5, _step: 4 },
      { samples: { _type: "table", columns: ["turn", "completion"], data: [[1, "hi"]] }, _step: 9 },
    ]);
    expect(streams.at(-1)!.body).toEqual({ complete: true, exitcode: 0 });
    expect(() => logger.log({ x: 1 }, 10)).toThrow(/is finished/);
  });

  it("reopens the run a checkpoint saved", async () => {
    const saved: WandbRunIdentity = { id: "resume01", project: "proj", entity: "fake-entity", name: "first" };
    const logger = await WandbLogger.init(mergeWandbResume({}, saved), { algorithm: "IAC", quiet: true });
    expect(logger.runIdentity()).toEqual(saved);
    expect(upserts[0]).toMatchObject({ name: "resume01", project: "proj", entity: "fake-entity", displayName: "first" });
    await logger.finish();
  });

  it("rejects when the server cannot be reached", async () => {
    process.env.WANDB_BASE_URL = "http://127.0.0.1:9";
    vi.spyOn(console, "error").mockImplementation(() => {});
    await expect(WandbLogger.init({}, { algorithm: "MAGRPO", quiet: true })).rejects.toThrow(/default entity/);
  });
});

describe("MetricsLogger with W&B", () => {
  it("sends rate-limited train rows, eval rows and sample tables, and records the run identity", async () => {
    const logger = await MetricsLogger.create({
      outputDir: scratch,
      loggingSteps: 10,
      algorithm: "MAGRPO",
      wandb: { project: "p" },
      runConfig: { num_agents: 2 },
      quiet: true,
    });
    for (const step of [1, 5, 11, 15, 21]) logger.logTrain({ "turn_1/reward_mean": step / 100 }, step);
    logger.logEval({ "turn_1/reward_mean": 0.9 }, 22);
    logger.logSamples([{ turn: 1, agent: 0, prompt: "p", completion: "c", reward: 1 }], 23);
    const identity = logger.wandbRunIdentity();
    await logger.close();

    expect(identity).toMatchObject({ project: "p", entity: "fake-entity", name: "test-magrpo" });
    expect(historyRows()).toEqual([
      { "turn_1/reward_mean": 0.01, _step: 1 },
      { "turn_1/reward_mean": 0.11, _step: 11 },
      { "turn_1/reward_mean": 0.21, _step: 21 },
      { "eval/turn_1/reward_mean": 0.9, _step: 22 },
      {
        samples: { _type: "table", columns: ["turn", "agent", "prompt", "completion", "reward"], data: [[1, 0, "p", "c", 1]] },
        _step: 23,
      },
    ]);
    expect(streams.at(-1)!.body).toEqual({ complete: true, exitcode: 0 });
  });

  it("does not contact W&B under WANDB_MODE=offline, and says so", async () => {
    process.env.WANDB_MODE = "offline";
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const logger = await MetricsLogger.create({ outputDir: scratch, loggingSteps: 1, algorithm: "MAGRPO", wandb: {} });
    logger.logTrain({ a: 1 }, 1);
    expect(logger.wandbRunIdentity()).toBeNull();
    await logger.close();
    expect(upserts).toEqual([]);
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/WANDB_MODE=offline/));
  });

  it("closes its files when the W&B run cannot be started", async () => {
    process.env.WANDB_BASE_URL = "http://127.0.0.1:9";
    vi.spyOn(console, "error").mockImplementation(() => {});
    await expect(
      MetricsLogger.create({ outputDir: scratch, loggingSteps: 1, algorithm: "MAGRPO", wandb: {}, tensorboard: true, quiet: true }),
    ).rejects.toThrow(/default entity/);
    expect(openFilesUnder(scratch)).toEqual([]);
  });
});

describe("a trainer resumed from a checkpoint", () => {
  it("continues the checkpoint's W&B run, as CoMLRL does, unless wandbConfig sets its own id or resume mode", async () => {
    const base = path.join(scratch, "base");
    const tokenizer = await makeBase(base);
    const checkpoints = path.join(scratch, "checkpoints");
    const first = await makeTrainer(base, tokenizer, path.join(scratch, "first"), 1, { wandbConfig: { project: "resumed" } });
    await first.train({ checkpointDir: checkpoints });
    await first.close();
    const firstRun = upserts[0]!.name;

    const resumeWith = async (wandbConfig: WandbConfig) => {
      const trainer = await makeTrainer(base, tokenizer, path.join(scratch, `resumed-${upserts.length}`), 2, { wandbConfig });
      await trainer.train({ resumeFromCheckpoint: path.join(checkpoints, "checkpoint-1") });
      await trainer.close();
      return upserts.at(-1)!;
    };
    expect(await resumeWith({})).toMatchObject({ name: firstRun, project: "resumed", entity: "fake-entity" });
    const fresh = await resumeWith({ project: "resumed", resume: "never" });
    expect(fresh.name).not.toBe(firstRun);
  }, 120_000);
});
