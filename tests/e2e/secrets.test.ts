// Planted secrets: a real MADPOIter run whose comparator is a loopback API server, given a literal key (also in the
// URL's path), secret custom headers (…-token, Ocp-Apim-Subscription-Key, X-Auth-Key, X-Access-Key), a key in the
// extra body and a key in the URL's query, with checkpoints, TensorBoard and W&B (the real SDK against a loopback
// W&B server, whose received run config and streams are saved beside the run) on. The comparator server first
// answers 503 echoing the key, so a retry note is printed. Afterwards no file under the run's directories, nothing
// the W&B server received and nothing printed holds any of the planted values, while the comparator server did
// receive each of them (so they were really in use).
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../../src/tasks/cover-vowels.js";
import { MADPOIterTrainer } from "../../src/trainers/preference/iterative/madpo-iter.js";
import { makeBase } from "../support/checkpoint-run.js";

const KEY = "sk-planted-literal-7d1e";
const HEADER_SECRET = "hdr-planted-secret-93aa";
const URL_KEY = "url-planted-key-41bc";
// Headers and a body field whose names end in "key", found by name; the literal key again in the URL's path, found
// by value.
const SUBSCRIPTION = "ocp-planted-subscription-52cd";
const AUTH_KEY = "auth-planted-key-63de";
const ACCESS_KEY = "access-planted-key-74ef";
const BODY_KEY = "body-planted-key-85f0";
const PLANTED = [KEY, HEADER_SECRET, URL_KEY, SUBSCRIPTION, AUTH_KEY, ACCESS_KEY, BODY_KEY];

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-secrets-"));
const received: IncomingMessage["headers"][] = [];
const receivedUrls: string[] = [];
const wandbReceived: unknown[] = [];
let comparator: Server;
let wandb: Server;
let tokenizer: ComlrlTokenizer;
const ENV_KEYS = ["WANDB_BASE_URL", "WANDB_API_KEY", "WANDB_MODE", "COMLRL_TEST_API"] as const;
const savedEnv = Object.fromEntries(ENV_KEYS.map((k) => [k, process.env[k]]));

const listen = async (server: Server) => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

beforeAll(async () => {
  tokenizer = await makeBase(path.join(scratch, "base"));
  let requests = 0;
  comparator = createServer((req, res) => {
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", () => {
      received.push(req.headers);
      receivedUrls.push(req.url!);
      res.writeHead(++requests === 1 ? 503 : 200, { "content-type": "application/json" });
      const k = (JSON.parse(raw) as { num_return_sequences: number }).num_return_sequences;
      res.end(JSON.stringify(requests === 1 ? { error: `busy; your key ${KEY} and ${AUTH_KEY} are fine` } : { completions: Array.from({ length: k }, (_, i) => ["ae", "io u", "xyz"][i % 3]) }));
    });
  });
  // The calls @wandb/sdk makes (see tests/unit/logging-wandb.test.ts), every body kept.
  wandb = createServer((req, res) => {
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", () => {
      const json = JSON.parse(raw || "{}");
      wandbReceived.push(json);
      res.setHeader("content-type", "application/json");
      if (json.operationName === "Viewer") return void res.end(JSON.stringify({ data: { viewer: { id: "u1", entity: "e", flags: "", teams: { edges: [] } } } }));
      if (json.operationName === "UpsertBucket") {
        const bucket = { id: "b1", name: json.variables.name, displayName: "run", project: { id: "p1", name: json.variables.project, entity: { id: "e1", name: "e" } } };
        return void res.end(JSON.stringify({ data: { upsertBucket: { bucket, inserted: true } } }));
      }
      res.end("{}");
    });
  });
  const [api, wandbUrl] = [await listen(comparator), await listen(wandb)];
  process.env.WANDB_BASE_URL = wandbUrl;
  process.env.WANDB_API_KEY = "k".repeat(40);
  delete process.env.WANDB_MODE;
  process.env.COMLRL_TEST_API = api;
}, 60_000);

afterAll(async () => {
  for (const k of ENV_KEYS) {
    if (savedEnv[k] === undefined) delete process.env[k];
    else process.env[k] = savedEnv[k];
  }
  for (const server of [comparator, wandb]) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** Every file under dir, recursively. */
const filesUnder = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(path.join(dir, e.name)) : [path.join(dir, e.name)]));

describe("planted secrets", () => {
  it("no file a run writes, nothing sent to W&B and nothing printed holds the comparator's key", async () => {
    const printed: string[] = [];
    for (const stream of ["log", "warn", "error", "info"] as const) vi.spyOn(console, stream).mockImplementation((...args) => void printed.push(args.map(String).join(" ")));
    const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => (printed.push(String(chunk)), true));
    const writeErr = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => (printed.push(String(chunk)), true));
    const outputDir = path.join(scratch, "run");
    try {
      const trainer = await MADPOIterTrainer.create({
        agents: [path.join(scratch, "base"), path.join(scratch, "base")],
        rewardFunc: coverVowelsRewardFunc,
        formatters: coverVowelsFormatters((m) => tokenizer.applyChatTemplate(m, { addGenerationPrompt: true })),
        trainDataset: coverVowelsDataset(2),
        outputDir,
        tensorboard: true,
        quiet: false,
        wandbConfig: { project: "secrets", dir: path.join(outputDir, "wandb") },
        config: {
          numIterations: 2,
          numTrainEpochs: 1,
          preferenceNumCandidates: 2,
          preferencePairsPerSample: 1,
          maxNewTokens: 3,
          temperature: 1,
          topP: 1,
          topK: null,
          trainBatchSize: 2,
          loggingSteps: 1,
          evalInterval: 0,
          seed: 5,
          comparatorPolicy: "api",
          comparatorApiUrl: `${process.env.COMLRL_TEST_API}/v1/${KEY}/complete?key=${URL_KEY}`,
          comparatorApiKey: KEY,
          comparatorApiHeaders: { "x-team-token": HEADER_SECRET, "x-team": "blue", "Ocp-Apim-Subscription-Key": SUBSCRIPTION, "X-Auth-Key": AUTH_KEY, "X-Access-Key": ACCESS_KEY },
          comparatorApiExtraBody: { key: BODY_KEY },
          comparatorApiMaxRetries: 1,
        },
      });
      await trainer.train({ checkpointDir: path.join(outputDir, "checkpoints"), checkpointInterval: 1 });
      await trainer.close();
    } finally {
      write.mockRestore();
      writeErr.mockRestore();
      vi.restoreAllMocks();
    }
    // The secrets were in use: the comparator server got each of them.
    expect(received.length).toBeGreaterThan(1);
    expect(received.at(-1)!.authorization).toBe(`Bearer ${KEY}`);
    expect(received.at(-1)!["x-team-token"]).toBe(HEADER_SECRET);
    expect(receivedUrls.at(-1)).toContain(URL_KEY);
    expect(receivedUrls.at(-1)).toContain(`/v1/${KEY}/complete`);
    expect(received.at(-1)!["x-auth-key"]).toBe(AUTH_KEY);
    expect(printed.join("\n")).toMatch(/retrying/);
    expect(wandbReceived.length).toBeGreaterThan(0);

    writeFileSync(path.join(scratch, "wandb-received.json"), JSON.stringify(wandbReceived));
    writeFileSync(path.join(scratch, "printed.txt"), printed.join("\n"));
    const files = filesUnder(scratch).filter((f) => !f.startsWith(path.join(scratch, "base")));
    expect(files.some((f) => f.endsWith("trainer_state.json"))).toBe(true);
    expect(files.some((f) => f.includes(`${path.sep}wandb${path.sep}`))).toBe(true);
    const leaks = files.flatMap((file) => {
      const bytes = readFileSync(file);
      return PLANTED.filter((secret) => bytes.includes(secret)).map((secret) => `${path.relative(scratch, file)} (${statSync(file).size} bytes) holds ${secret}`);
    });
    expect(leaks).toEqual([]);
  });
});
