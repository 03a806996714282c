// What counts as a secret in a config, and how it is masked: key fields and key headers at any depth, URLs' user
// info and query values; tokenizer settings that merely end in "token", numbers and ids are left alone.
import { describe, expect, it } from "vitest";
import { redactSecrets, redactUrl } from "../../src/config/secrets.js";

describe("redactSecrets", () => {
  it("masks key fields, key headers and api_key-like names at any depth; keeps everything else", () => {
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
    // Only the secrets change; the key's variable name, header name, model, token kinds and numbers stay.
    expect(redactSecrets(config)).toEqual({
      ...config,
      comparatorApiKey: "***",
      comparatorApiHeaders: { Authorization: "***", "x-api-key": "***", "x-team-token": "***", "x-team": "blue" },
      comparatorApiExtraBody: { api_key: "***", nested: [{ client_secret: "***" }], seed: 3 },
      comparatorApiUrl: "https://***@api.example/v1?key=***&v=***",
    });
    expect(config.comparatorApiKey).toBe("sk-1");
  });

  it("redactUrl keeps scheme, host and path", () => {
    expect(redactUrl("http://127.0.0.1:8080/v1/complete")).toBe("http://127.0.0.1:8080/v1/complete");
    expect(redactUrl("http://h/p?token=abc#frag")).toBe("http://h/p?token=***#frag");
  });
});
