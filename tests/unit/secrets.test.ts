// What counts as a secret in a config, and how it is masked: key fields at any depth, every header and extra-body
// value but a few known public ones, URLs' user info, path segments, query values and fragments; tokenizer settings
// that merely end in "token", numbers and ids are left alone.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { madpoIterConfig, type MADPOIterConfigInput } from "../../src/config/index.js";
import { redactSecrets, redactUrl, secretValues } from "../../src/config/secrets.js";
import { apiComparator } from "../../src/trainers/preference/iterative/api-comparator.js";

describe("redactSecrets", () => {
  it("masks key fields and api_key-like names at any depth, every header and extra-body value but public ones; keeps everything else", () => {
    const config = {
      comparatorApiKey: "sk-1",
      comparatorApiKeyEnv: "MY_KEY",
      comparatorApiKeyHeader: "Authorization",
      comparatorApiHeaders: { Authorization: "Bearer sk-1", "x-api-key": "k", "x-team-token": "t", "x-team": "blue" },
      comparatorApiExtraBody: { api_key: "k2", nested: [{ client_secret: "s" }], seed: 3 },
      comparatorApiUrl: "https://me:pw@api.example/v1?key=k3&v=2",
      eos_token: "</s>",
      maxNewTokens: 8,
      lastToken: 5,
      comparatorApiModel: "gpt",
    };
    // Only the secrets change; the key's variable name, header name, model, token kinds and other numbers stay.
    expect(redactSecrets(config)).toEqual({
      ...config,
      comparatorApiKey: "***",
      // A number under a secret name is masked too: a numeric key is a key.
      lastToken: "***",
      comparatorApiHeaders: { Authorization: "***", "x-api-key": "***", "x-team-token": "***", "x-team": "***" },
      comparatorApiExtraBody: { api_key: "***", nested: [{ client_secret: "***" }], seed: 3 },
      comparatorApiUrl: "https://***@api.example/v1?key=***&v=***",
    });
    expect(config.comparatorApiKey).toBe("sk-1");
  });

  it("redactUrl keeps scheme, host and the path's API words", () => {
    expect(redactUrl("http://127.0.0.1:8080/v1/complete")).toBe("http://127.0.0.1:8080/v1/complete");
    expect(redactUrl("http://h/p?token=abc#frag")).toBe("http://h/***?token=***#***");
  });
});

// Secrets under names the name rule used to miss, and secret values found so, masked wherever else they appear: in
// written configs (trainer_state.json and the W&B run config both go through redactSecrets), config errors and the
// api comparator's errors.
describe("secrets by value", () => {
  const SUBSCRIPTION = "ocp-planted-subscription-1a2b";
  const AUTH = "auth-planted-key-3c4d";
  const ACCESS = "access-planted-key-5e6f";
  const BODY_KEY = "body-planted-key-7a8b";
  const PATH_KEY = "path-planted-key-9c0d";
  const config = {
    comparatorApiKey: PATH_KEY,
    comparatorApiHeaders: { "Ocp-Apim-Subscription-Key": SUBSCRIPTION, "X-Auth-Key": AUTH, "X-Access-Key": ACCESS, "x-team": "blue" },
    comparatorApiExtraBody: { key: BODY_KEY, monkey: "business", seed: 3 },
    comparatorApiUrl: `https://api.example/v1/${PATH_KEY}/complete`,
    comparatorApiKeyHeader: "Ocp-Apim-Subscription-Key",
    note: `the key ${AUTH} and ${BODY_KEY} in free text`,
  };
  const planted = [SUBSCRIPTION, AUTH, ACCESS, BODY_KEY, PATH_KEY];

  it("masks Ocp-Apim-Subscription-Key, X-Auth-Key, X-Access-Key, an extra-body key and a key in the URL path", () => {
    expect(redactSecrets(config)).toEqual({
      comparatorApiKey: "***",
      comparatorApiHeaders: { "Ocp-Apim-Subscription-Key": "***", "X-Auth-Key": "***", "X-Access-Key": "***", "x-team": "***" },
      comparatorApiExtraBody: { key: "***", monkey: "***", seed: 3 },
      comparatorApiUrl: "https://api.example/v1/***/complete",
      comparatorApiKeyHeader: "Ocp-Apim-Subscription-Key",
      note: "the key *** and *** in free text",
    });
    // Anywhere in a checkpoint's state, e.g. a callback's state that copied the key.
    const state = { config, callbacks: { audit: { lastHeader: `Ocp-Apim-Subscription-Key: ${SUBSCRIPTION}` } } };
    const written = JSON.stringify(redactSecrets(state));
    for (const secret of planted) expect(written).not.toContain(secret);
    expect(written).toContain("Ocp-Apim-Subscription-Key: ***");
  });

  it("a secret under 8 characters is masked where it is the whole value only, so resumed state stays intact", () => {
    const state = { config: { comparatorApiKey: "abc", comparatorApiHeaders: { "X-Auth-Key": "abc" } }, callbacks: { log: { dir: "abc-runs", last: "abc" } } };
    expect(redactSecrets(state)).toEqual({ config: { comparatorApiKey: "***", comparatorApiHeaders: { "X-Auth-Key": "***" } }, callbacks: { log: { dir: "abc-runs", last: "***" } } });
  });

  it("masks every URL path segment but API words and versions, whatever its form", () => {
    expect(redactUrl("https://h/v1/key/abc123/complete")).toBe("https://h/v1/***/***/complete");
    expect(redactUrl("https://h/v1/sk-proj-abcdefgh1234/chat")).toBe("https://h/v1/***/chat");
    expect(redactUrl("https://api.telegram.org/bot123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage")).toBe("https://api.telegram.org/***/***");
    expect(redactUrl("https://h/tenant/hunter2/v1beta/models/gemini:generateContent")).toBe("https://h/***/***/v1beta/models/***");
    expect(redactUrl("https://h/api/v2/chat/completions")).toBe("https://h/api/v2/chat/completions");
    // Values of one or two characters are masked where they are, not wherever else they appear.
    expect(secretValues({ comparatorApiUrl: "https://h/v1/key/abc123/x?api_key=q&v=2#frag" })).toEqual(["abc123", "frag", "key"]);
  });

  it("config errors that echo a value mask its secrets", () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      // A header map with one bad value is echoed whole.
      [{ comparatorApiHeaders: { "X-Auth-Key": AUTH, retries: 3 } }, "comparatorApiHeaders"],
      // A URL of the wrong scheme, its key in the path.
      [{ comparatorApiKey: PATH_KEY, comparatorApiUrl: `ftp://api.example/v1/${PATH_KEY}` }, "comparatorApiUrl"],
      // A cross-field rule's message next to a secret.
      [{ comparatorApiKey: BODY_KEY, comparatorApiKeyEnv: "MY_KEY", comparatorApiUrl: "https://h/v1" }, "comparatorApiKeyEnv"],
    ];
    for (const [fields, field] of cases) {
      let message = "";
      try {
        madpoIterConfig({ comparatorPolicy: "api", comparatorApiUrl: "https://h/v1", ...fields });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toContain(field);
      for (const secret of planted) expect(message).not.toContain(secret);
    }
  });

  it("the api comparator's errors mask an echoed extra-body key and key headers", async () => {
    // A server that answers 400 quoting the credentials it received, as some gateways do.
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        const quoted = [JSON.parse(body).key, req.headers["x-auth-key"], req.headers["ocp-apim-subscription-key"]].filter(Boolean);
        res.writeHead(400, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: `invalid credentials ${quoted.join(", ")}` }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const echoed: MADPOIterConfigInput[] = [{ comparatorApiExtraBody: { key: BODY_KEY } }, { comparatorApiHeaders: { "X-Auth-Key": AUTH } }, { comparatorApiHeaders: { "Ocp-Apim-Subscription-Key": SUBSCRIPTION } }];
      for (const fields of echoed) {
        const c = madpoIterConfig({ comparatorPolicy: "api", comparatorApiUrl: `${root}/echo`, comparatorApiMaxRetries: 0, ...fields });
        const sampler = await apiComparator(c, () => {}, {}).begin(0);
        const message = await sampler.sample(0, "q", 1, {}).then(
          () => "",
          (e: Error) => e.message,
        );
        expect(message).toMatch(/HTTP 400/);
        expect(message).toContain("***");
        for (const secret of planted) expect(message).not.toContain(secret);
      }
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
