// Secrets masked by value: every header value and extra-body field given for a remote service is a secret unless it
// is a known public field, whatever its name; so is anything nested under a secret name; URLs keep only their scheme,
// host and API path words. Written configs (trainer_state.json and the W&B run config go through redactSecrets),
// config errors, and the api comparator's errors hold none of them.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { madpoIterConfig } from "../../src/config/index.js";
import { redactSecrets, redactUrlsIn } from "../../src/config/secrets.js";
import { wandbRunConfig } from "../../src/logging/wandb.js";
import { apiComparator } from "../../src/trainers/preference/iterative/api-comparator.js";

const planted = {
  xAuth: "xauth-planted-1111",
  authentication: "authn-planted-2222",
  apiPass: "apipass-planted-3333",
  auth: "auth-body-planted-4444",
  jwt: "jwt-planted-5555",
  secrets: "secrets-planted-6666",
  passphrase: "passphrase-planted-7777",
  apiKey2: "apikey2-planted-8888",
  credentialsPass: "credpass-planted-9999",
  pathSegment: "tenantpass",
  fragment: "fragment-planted-0000",
  userinfo: "userinfo-planted-1212",
};
const everyPlanted = Object.values(planted);

const config = {
  comparatorPolicy: "api",
  comparatorApiUrl: `https://me:${planted.userinfo}@gw.example/acme/${planted.pathSegment}/v1/chat/completions#${planted.fragment}`,
  comparatorApiHeaders: {
    "X-Auth": planted.xAuth,
    Authentication: planted.authentication,
    "X-Api-Pass": planted.apiPass,
    "content-type": "application/json",
    "anthropic-version": "2023-06-01",
  },
  comparatorApiExtraBody: {
    auth: planted.auth,
    jwt: planted.jwt,
    secrets: planted.secrets,
    passphrase: planted.passphrase,
    api_key_2: planted.apiKey2,
    max_tokens: 64,
    temperature: 0.5,
    response_format: { type: "json_object" },
  },
  credentials: { pass: planted.credentialsPass, retries: 3 },
};

describe("secrets masked by value", () => {
  it("masks every header and extra-body value but known public ones, anything under a secret name, and URLs but their API words", () => {
    expect(redactSecrets(config)).toEqual({
      comparatorPolicy: "api",
      comparatorApiUrl: "https://***@gw.example/***/***/v1/chat/completions#***",
      comparatorApiHeaders: { "X-Auth": "***", Authentication: "***", "X-Api-Pass": "***", "content-type": "application/json", "anthropic-version": "2023-06-01" },
      comparatorApiExtraBody: { auth: "***", jwt: "***", secrets: "***", passphrase: "***", api_key_2: "***", max_tokens: 64, temperature: 0.5, response_format: { type: "json_object" } },
      credentials: { pass: "***", retries: "***" },
    });
  });

  it("the W&B run config, with the config file's snake_case sections, holds none of them", () => {
    const snake = {
      comparator_api_url: config.comparatorApiUrl,
      comparator_api_headers: config.comparatorApiHeaders,
      comparator_api_extra_body: config.comparatorApiExtraBody,
      credentials: config.credentials,
    };
    const written = JSON.stringify(wandbRunConfig({ num_agents: 2 }, { iterative: snake }));
    for (const secret of everyPlanted) expect(written).not.toContain(secret);
    expect(written).toContain('"anthropic-version":"2023-06-01"');
  });

  it("a config error never echoes a value given for a secret field, whatever its type", () => {
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ comparatorApiKey: 918273645 }, "comparatorApiKey", "918273645"],
      [{ comparatorApiKey: { value: planted.apiKey2 } }, "comparatorApiKey", planted.apiKey2],
      [{ comparatorApiHeaders: `X-Auth: ${planted.xAuth}` }, "comparatorApiHeaders", planted.xAuth],
      [{ comparatorApiHeaders: { "X-Auth": 918273645 } }, "comparatorApiHeaders", "918273645"],
      [{ comparatorApiHeaders: [planted.xAuth] }, "comparatorApiHeaders", planted.xAuth],
      [{ comparatorApiExtraBody: planted.jwt }, "comparatorApiExtraBody", planted.jwt],
      [{ comparatorApiUrl: `ftp://gw.example/${planted.pathSegment}#${planted.fragment}` }, "comparatorApiUrl", planted.pathSegment],
    ];
    for (const [fields, field, secret] of cases) {
      let message = "";
      try {
        madpoIterConfig({ comparatorPolicy: "api", comparatorApiUrl: "https://h/v1", ...fields });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message, JSON.stringify(fields)).toContain(field);
      expect(message).not.toContain(secret);
      expect(message).not.toContain(planted.fragment);
    }
  });

  it("URLs in free text lose user info, path and query values, but keep the punctuation after them", () => {
    expect(redactUrlsIn(`cannot fetch http://u:${planted.userinfo}@h:8080/${planted.pathSegment}/v1?k=q: refused (see https://h/v1).`)).toBe(
      "cannot fetch http://***@h:8080/***/v1?k=***: refused (see https://h/v1).",
    );
  });
});

describe("the api comparator's errors", () => {
  it("mask an echoed X-Auth header and a same-origin redirect's user:password", async () => {
    let root = "";
    const server = createServer((req, res) => {
      if (req.url === "/redirect-userinfo") {
        res.writeHead(307, { location: root.replace("//", `//me:${planted.userinfo}@`) + "/v1/chat" });
        res.end();
        return;
      }
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: `bad credentials ${String(req.headers["x-auth"])}` }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      for (const route of ["/v1/echo", "/redirect-userinfo"]) {
        const c = madpoIterConfig({ comparatorPolicy: "api", comparatorApiUrl: `${root}${route}`, comparatorApiMaxRetries: 0, comparatorApiHeaders: { "X-Auth": planted.xAuth } });
        const sampler = await apiComparator(c, () => {}, {}).begin(0);
        const message = await sampler.sample(0, "q", 1, {}).then(
          () => "",
          (e: Error) => e.message,
        );
        expect(message, route).toMatch(/comparator API http:\/\/127\.0\.0\.1:\d+\/(v1\/\*\*\*|\*\*\*)/);
        for (const secret of everyPlanted) expect(message, route).not.toContain(secret);
      }
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
