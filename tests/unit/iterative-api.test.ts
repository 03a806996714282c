// The api comparator against a local HTTP server on 127.0.0.1 that speaks each format: request bodies and headers,
// answers read per format, openai batching by n, HTTP 402, other HTTP errors, non-JSON, timeouts and retries.
// The server answers a bounded number of requests and is closed after the tests. A second server on another port is
// "another origin" for the redirect tests: it must never see a key, a prompt or an item.
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { madpoIterConfig } from "../../src/config/index.js";
import { apiComparator, COMPARATOR_MAX_RESPONSE_BYTES } from "../../src/trainers/preference/iterative/api-comparator.js";

interface Seen {
  path: string;
  headers: IncomingMessage["headers"];
  body: Record<string, unknown>;
}

const seen: Seen[] = [];
let server: Server;
let root = "";
let requests = 0;
const MAX_REQUESTS = 200;
let flaky = 0;
let patient = 0;
let floods = 0;
let floodBytes = 0;
let other: Server;
let otherRoot = "";
const otherSeen: Seen[] = [];
const KEY = "sk-planted-5f0c";

beforeAll(async () => {
  server = createServer((req, res) => {
    if (++requests > MAX_REQUESTS) return void res.destroy();
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", () => {
      const body = JSON.parse(raw || "{}");
      seen.push({ path: req.url!, headers: req.headers, body });
      const send = (status: number, payload: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(typeof payload === "string" ? payload : JSON.stringify(payload));
      };
      switch (req.url!.split("?")[0]) {
        case "/generic":
          return send(200, { data: { outs: Array.from({ length: body.num_return_sequences }, (_, i) => (i % 2 ? { text: `g${i}` } : `g${i}`)) } });
        case "/generic-fallback":
          return send(200, { responses: [{ message: { content: "m0" } }, { completion: "m1" }] });
        case "/openai":
          return send(200, { choices: Array.from({ length: body.n }, (_, i) => ({ message: { content: `o${i}` } })) });
        case "/anthropic":
          return send(200, { content: [{ type: "text", text: "a" }, { type: "tool_use" }, { type: "text", text: "b" }] });
        case "/responses":
          return send(200, { output: [{ content: [{ type: "output_text", text: "r" }, { type: "refusal", text: "no" }] }] });
        case "/broke":
          return send(402, { error: "pay up" });
        case "/missing":
          return send(404, { error: "nope" });
        case "/html":
          return send(200, "<html>hi</html>");
        case "/flaky":
          return ++flaky % 2 === 1 ? send(503, { error: "busy" }) : send(200, { completions: ["ok"] });
        case "/redirect-cross":
          res.writeHead(307, { location: `${otherRoot}/generic` });
          return void res.end();
        case "/redirect-cross-302":
          res.writeHead(302, { location: `${otherRoot}/generic` });
          return void res.end();
        case "/redirect-same":
          res.writeHead(308, { location: "/generic" });
          return void res.end();
        case "/patient":
          if (++patient % 2 === 1) {
            res.writeHead(429, { "retry-after": "1", "content-type": "application/json" });
            return void res.end("{}");
          }
          return send(200, { completions: ["waited"] });
        case "/very-patient":
          res.writeHead(503, { "retry-after": "3600" });
          return void res.end();
        case "/declared-huge":
          // A 1 GiB body announced; a few bytes sent, the rest never comes.
          res.writeHead(200, { "content-type": "application/json", "content-length": String(2 ** 30) });
          return void res.write('{"completions": [');
        case "/flood": {
          floods++;
          res.writeHead(200, { "content-type": "application/json" });
          const chunk = Buffer.alloc(1 << 20, 0x20);
          const pump = () => {
            while (!res.destroyed && floodBytes < 2 ** 30) {
              floodBytes += chunk.length;
              if (!res.write(chunk)) return void res.once("drain", pump);
            }
          };
          res.on("close", () => res.destroy());
          return pump();
        }
        case "/slow":
          return void setTimeout(() => send(200, { completions: ["late"] }), 1500);
        default:
          return send(500, {});
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  other = createServer((req, res) => {
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", () => {
      otherSeen.push({ path: req.url!, headers: req.headers, body: JSON.parse(raw || "{}") });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ completions: ["elsewhere"] }));
    });
  });
  await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
  otherRoot = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const s of [server, other]) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

const sampler = async (route: string, extra: Record<string, unknown> = {}, env: NodeJS.ProcessEnv = {}) => {
  const config = madpoIterConfig({ comparatorPolicy: "api", comparatorApiUrl: `${root}${route}`, maxNewTokens: 7, temperature: 0.5, topP: 0.9, topK: 3, ...extra });
  return apiComparator(config, () => {}, env).begin(0);
};

describe("api comparator", () => {
  it("generic: the request body, extra body, key header; completions from the dotted field, strings or objects", async () => {
    const s = await sampler("/generic", { comparatorApiResponseField: "data.outs", comparatorApiKey: "sk-1", comparatorApiExtraBody: { seed: 9 }, comparatorApiModel: "m", comparatorApiHeaders: { "x-team": "t" } });
    expect(await s.sample(1, "hi", 3, { prompt: "hi", n: 1 })).toEqual({ texts: ["g0", "g1", "g2"], ids: null });
    const last = seen.at(-1)!;
    expect(last.body).toEqual({ prompt: "hi", agent_idx: 1, num_return_sequences: 3, max_new_tokens: 7, temperature: 0.5, top_p: 0.9, top_k: 3, batch_item: { prompt: "hi", n: 1 }, model: "m", seed: 9 });
    expect(last.headers.authorization).toBe("Bearer sk-1");
    expect(last.headers["x-team"]).toBe("t");
    const fallback = await sampler("/generic-fallback");
    expect((await fallback.sample(0, "hi", 2, {})).texts).toEqual(["m0", "m1"]);
  });

  it("openai: chat completions batched by n up to comparatorApiMaxNPerRequest; DeepSeek one at a time", async () => {
    const before = seen.length;
    const s = await sampler("/openai", { comparatorApiFormat: "chat", comparatorApiModel: "gpt", comparatorApiMaxNPerRequest: 2, comparatorApiKeyEnv: "MY_KEY" }, { MY_KEY: "env-key" });
    expect((await s.sample(0, "q", 5, {})).texts).toEqual(["o0", "o1", "o0", "o1", "o0"]);
    const bodies = seen.slice(before).map((r) => r.body);
    expect(bodies.map((b) => b.n).sort()).toEqual([1, 2, 2]);
    expect(bodies[0]).toMatchObject({ model: "gpt", messages: [{ role: "user", content: "q" }], max_tokens: 7, temperature: 0.5, top_p: 0.9 });
    expect(seen.at(-1)!.headers.authorization).toBe("Bearer env-key");
    const deepseek = await sampler("/openai", { comparatorApiFormat: "openai", comparatorApiModel: "deepseek-chat" });
    const start = seen.length;
    await deepseek.sample(0, "q", 3, {});
    expect(seen.slice(start).map((r) => r.body.n)).toEqual([1, 1, 1]);
  });

  it("anthropic: one request per candidate with x-api-key and anthropic-version; text blocks joined", async () => {
    const before = seen.length;
    const s = await sampler("/anthropic", { comparatorApiFormat: "messages", comparatorApiModel: "claude", comparatorApiKey: "ak" });
    expect((await s.sample(0, "q", 2, {})).texts).toEqual(["ab", "ab"]);
    const requests = seen.slice(before);
    expect(requests).toHaveLength(2);
    expect(requests[0].headers["x-api-key"]).toBe("ak");
    expect(requests[0].headers["anthropic-version"]).toBe("2023-06-01");
    expect(requests[0].headers.authorization).toBeUndefined();
    expect(requests[0].body).toEqual({ model: "claude", max_tokens: 7, messages: [{ role: "user", content: "q" }], temperature: 0.5 });
  });

  it("openai_responses: one request per candidate; output_text blocks", async () => {
    const s = await sampler("/responses", { comparatorApiFormat: "codex", comparatorApiModel: "gpt" });
    expect((await s.sample(0, "q", 1, {})).texts).toEqual(["r"]);
    expect(seen.at(-1)!.body).toEqual({ model: "gpt", input: "q", max_output_tokens: 7 });
  });

  it("errors: 402 insufficient balance, other statuses and non-JSON name the URL (its path masked) and status, a missing key variable", async () => {
    await expect((await sampler("/broke")).sample(0, "q", 1, {})).rejects.toThrow(/\/\*\*\*: HTTP 402, insufficient balance/);
    await expect((await sampler("/missing")).sample(0, "q", 1, {})).rejects.toThrow(`${root}/***: HTTP 404`);
    await expect((await sampler("/html")).sample(0, "q", 1, {})).rejects.toThrow(/\/\*\*\*: HTTP 200 answered non-JSON/);
    await expect((await sampler("/generic", { comparatorApiKeyEnv: "ABSENT" })).sample(0, "q", 1, {})).rejects.toThrow(/ABSENT is not set/);
  });

  it("retries a 503 with backoff; a timeout is retried, then reported", async () => {
    expect((await (await sampler("/flaky", { comparatorApiMaxRetries: 1 })).sample(0, "q", 1, {})).texts).toEqual(["ok"]);
    const slow = await sampler("/slow", { comparatorApiTimeout: 0.2, comparatorApiMaxRetries: 1 });
    await expect(slow.sample(0, "q", 1, {})).rejects.toThrow(/no answer within comparatorApiTimeout \(0.2 s\) \(after 2 attempts\)/);
  });

  it("a redirect to another origin is refused: no key (Authorization, x-api-key, custom header), prompt or item leaves", async () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      ["/redirect-cross", { comparatorApiKey: KEY }],
      ["/redirect-cross", { comparatorApiFormat: "anthropic", comparatorApiKey: KEY }],
      ["/redirect-cross", { comparatorApiKey: KEY, comparatorApiKeyHeader: "x-goog-api-key", comparatorApiKeyPrefix: "" }],
      ["/redirect-cross", { comparatorApiHeaders: { "x-custom-token": KEY } }],
      ["/redirect-cross-302", { comparatorApiKey: KEY, comparatorApiFormat: "anthropic" }],
    ];
    for (const [route, extra] of cases) {
      const s = await sampler(route, { comparatorApiMaxRetries: 0, ...extra });
      await expect(s.sample(0, "secret prompt", 1, { prompt: "secret item" })).rejects.toThrow(/redirected to another origin \(http:\/\/127\.0\.0\.1:\d+\); nothing is sent there/);
    }
    expect(otherSeen).toEqual([]);
  });

  it("a redirect within the origin is followed with the same method, body and headers", async () => {
    const s = await sampler("/redirect-same", { comparatorApiKey: KEY, comparatorApiResponseField: "data.outs" });
    expect((await s.sample(0, "q", 2, {})).texts).toEqual(["g0", "g1"]);
    const last = seen.at(-1)!;
    expect(last.path).toBe("/generic");
    expect(last.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(last.body.prompt).toBe("q");
  });

  it("a key in the URL (query or user info) is not in errors or retry notes", async () => {
    const notes: string[] = [];
    for (const url of [`${root}/missing?key=${KEY}&v=1`, `${root.replace("//", `//me:${KEY}@`)}/missing`, `${root}/flaky?api_key=${KEY}`]) {
      const config = madpoIterConfig({ comparatorPolicy: "api", comparatorApiUrl: url, comparatorApiMaxRetries: 1 });
      const error = await apiComparator(config, (m) => notes.push(m), {})
        .begin(0)
        .then((s) => s.sample(0, "q", 1, {}))
        .then(
          () => null,
          (e: Error) => e.message,
        );
      if (error !== null) expect(error).not.toContain(KEY);
    }
    expect(notes.length).toBeGreaterThan(0);
    for (const note of notes) expect(note).not.toContain(KEY);
    await expect((await sampler(`/missing?key=${KEY}`)).sample(0, "q", 1, {})).rejects.toThrow(/\/\*\*\*\?key=\*\*\*: HTTP 404/);
  });

  it("Retry-After is waited for; one beyond comparatorApiTimeout is an error at once", async () => {
    const start = Date.now();
    expect((await (await sampler("/patient", { comparatorApiMaxRetries: 1 })).sample(0, "q", 1, {})).texts).toEqual(["waited"]);
    expect(Date.now() - start).toBeGreaterThanOrEqual(950);
    const before = Date.now();
    await expect((await sampler("/very-patient", { comparatorApiTimeout: 5, comparatorApiMaxRetries: 3 })).sample(0, "q", 1, {})).rejects.toThrow(
      /HTTP 503.*asks to retry after 3600 s, longer than comparatorApiTimeout \(5 s\)/,
    );
    expect(Date.now() - before).toBeLessThan(2000);
  });

  it("an answer body over the size limit is refused without being read to its end or fetched again", async () => {
    const limit = `${COMPARATOR_MAX_RESPONSE_BYTES} bytes`;
    const start = Date.now();
    await expect((await sampler("/declared-huge", { comparatorApiMaxRetries: 2 })).sample(0, "q", 1, {})).rejects.toThrow(new RegExp(`declares a body of 1073741824 bytes, over the ${limit} an answer may have`));
    await expect((await sampler("/flood", { comparatorApiMaxRetries: 2 })).sample(0, "q", 1, {})).rejects.toThrow(new RegExp(`answer is over the ${limit}`));
    expect(Date.now() - start).toBeLessThan(5000);
    expect(floods).toBe(1);
    expect(floodBytes).toBeLessThan(COMPARATOR_MAX_RESPONSE_BYTES + 2 ** 25);
  });
});
