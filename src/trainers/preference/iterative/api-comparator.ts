// The api comparator (COMLRL-SPEC §6.7): candidates from a remote LLM over HTTP, in one of four request formats —
// generic (our own JSON contract, completions read from a dotted response field with fallbacks), openai (chat
// completions, n candidates per request up to comparatorApiMaxNPerRequest; 1 for DeepSeek), anthropic (messages, one
// request per candidate, x-api-key and anthropic-version headers) and openai_responses (one request per candidate).
// HTTP 402 is "insufficient balance"; other HTTP errors, non-JSON and empty answers are errors naming the URL
// (redacted: config/secrets.ts) and status. Failed requests (network, timeout, 429, 5xx) are retried with
// exponential backoff, or after the server's Retry-After; at most comparatorApiConcurrency requests are in flight.
// Redirects are followed only within the URL's origin, and answers are size-capped. The answers are text: the trained agents tokenize them.
import type { IterativeFields } from "../../../config/index.js";
import { redactUrl, redactUrlsIn, scrubSecrets, secretValues } from "../../../config/secrets.js";
import type { Item } from "../../../rollout/types.js";
import type { AgentSampler, ComparatorSource } from "./comparators.js";
import { limiter } from "../../../util/limiter.js";

/** An API comparator request that failed after its retries; the message names the status and the URL, key masked. */
export class ComparatorApiError extends Error {
  /** Always "ComparatorApiError". */
  override name = "ComparatorApiError";
}

/** What the api comparator reads of the config (the iterative fields plus the sampling settings). */
export type ApiComparatorConfig = IterativeFields & { maxNewTokens: number; temperature: number; topP: number; topK: number | null };

const BACKOFF_MS = 250;
const MAX_REDIRECTS = 5;
/** The most bytes an answer may have: completions are text, far below this; a larger body is refused, not retried. */
export const COMPARATOR_MAX_RESPONSE_BYTES = 16 * 2 ** 20;

/** The value at a dotted path ("data.outputs.0"), or undefined. */
function dotted(value: unknown, fieldPath: string): unknown {
  return fieldPath.split(".").reduce<unknown>((v, key) => (v !== null && typeof v === "object" ? (v as Record<string, unknown>)[key] : undefined), value);
}

/** A completion item: a string, or an object with text / content / completion / response / message.content. */
function itemText(entry: unknown): string | null {
  if (typeof entry === "string") return entry;
  if (entry === null || typeof entry !== "object") return null;
  const e = entry as Record<string, unknown>;
  for (const key of ["text", "content", "completion", "response"]) if (typeof e[key] === "string") return e[key] as string;
  const message = e.message as Record<string, unknown> | undefined;
  return typeof message?.content === "string" ? message.content : null;
}

const jsonSafe = (item: Item): unknown => {
  try {
    return JSON.parse(JSON.stringify(item));
  } catch {
    return Object.fromEntries(Object.entries(item).map(([k, v]) => [k, String(v)]));
  }
};

const dropNulls = (body: Record<string, unknown>) => Object.fromEntries(Object.entries(body).filter(([, v]) => v !== null && v !== undefined));

export function apiComparator(c: ApiComparatorConfig, note: (message: string) => void, env: NodeJS.ProcessEnv = process.env): ComparatorSource {
  const url = c.comparatorApiUrl!;
  const format = c.comparatorApiFormat;
  const run = limiter(() => c.comparatorApiConcurrency);

  const headers = (): Record<string, string> => {
    const h: Record<string, string> = { "content-type": "application/json", ...(c.comparatorApiHeaders ?? {}) };
    let key = c.comparatorApiKey;
    if (c.comparatorApiKeyEnv !== null) {
      key = env[c.comparatorApiKeyEnv] ?? null;
      if (!key) throw new ComparatorApiError(`comparatorApiKeyEnv: the environment variable ${c.comparatorApiKeyEnv} is not set`);
    }
    if (format === "anthropic") {
      h["anthropic-version"] ??= "2023-06-01";
      if (key) h["x-api-key"] = key;
    } else if (key) {
      h[c.comparatorApiKeyHeader] = c.comparatorApiKeyPrefix ? `${c.comparatorApiKeyPrefix} ${key}` : key;
    }
    return h;
  };

  // What a message may show of the request: the URL redacted (redactUrl), no key, header value or extra-body value
  // anywhere (servers echo keys back in their error bodies), and no URL redacted less (fetch quotes a redirect's
  // URL, user info included, when it refuses one).
  const shown = redactUrl(url);
  const scrub = (text: string): string => scrubSecrets(redactUrlsIn(text), secretValues(c, [c.comparatorApiKeyEnv !== null ? env[c.comparatorApiKeyEnv] : null]));
  const error = (what: string) => new ComparatorApiError(scrub(`comparator API ${shown}: ${what}`));

  /**
   * One POST, following redirects by hand: only 307/308 within the URL's origin, which keep the method and body.
   * fetch's own following would carry x-api-key, custom key headers and (307/308) the prompt and item to any host.
   */
  const send = async (payload: string, signal: AbortSignal): Promise<Response> => {
    let target = new URL(url);
    for (let hop = 0; ; hop++) {
      const response = await fetch(target, { method: "POST", headers: headers(), body: payload, signal, redirect: "manual" });
      const location = response.headers.get("location");
      if (response.status < 300 || response.status >= 400 || location === null) return response;
      await response.body?.cancel();
      const next = new URL(location, target);
      if (next.origin !== target.origin) throw error(`HTTP ${response.status} redirected to another origin (${next.origin}); nothing is sent there: set comparatorApiUrl to the endpoint itself`);
      if (response.status !== 307 && response.status !== 308) throw error(`HTTP ${response.status} redirects to ${redactUrl(next.href)} as a GET: set comparatorApiUrl to the endpoint itself`);
      if (hop >= MAX_REDIRECTS) throw error(`more than ${MAX_REDIRECTS} redirects`);
      target = next;
    }
  };

  /** The body as text, refused (not retried) past COMPARATOR_MAX_RESPONSE_BYTES, before or while it arrives. */
  const readBody = async (response: Response): Promise<string> => {
    const declared = Number(response.headers.get("content-length") ?? 0);
    if (declared > COMPARATOR_MAX_RESPONSE_BYTES) {
      await response.body?.cancel();
      throw error(`HTTP ${response.status} declares a body of ${declared} bytes, over the ${COMPARATOR_MAX_RESPONSE_BYTES} bytes an answer may have`);
    }
    if (response.body === null) return "";
    const chunks: Uint8Array[] = [];
    let total = 0;
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > COMPARATOR_MAX_RESPONSE_BYTES) {
        await reader.cancel();
        throw error(`HTTP ${response.status}: the answer is over the ${COMPARATOR_MAX_RESPONSE_BYTES} bytes an answer may have; not read further`);
      }
      chunks.push(value);
    }
    return Buffer.concat(chunks).toString("utf8");
  };

  /** Seconds a Retry-After header asks for (delta-seconds or an HTTP date), or null without one. */
  const retryAfter = (response: Response): number | null => {
    const value = response.headers.get("retry-after")?.trim();
    if (!value) return null;
    const seconds = /^\d+$/.test(value) ? Number(value) : (Date.parse(value) - Date.now()) / 1000;
    return Number.isFinite(seconds) ? Math.max(0, seconds) : null;
  };

  /** One POST with retries; the parsed JSON answer. */
  const post = (body: Record<string, unknown>): Promise<unknown> =>
    run(async () => {
      const payload = JSON.stringify({ ...body, ...(c.comparatorApiExtraBody ?? {}) });
      for (let attempt = 0; ; attempt++) {
        let retryable: string;
        let waitMs = BACKOFF_MS * 2 ** attempt;
        try {
          const response = await send(payload, AbortSignal.timeout(c.comparatorApiTimeout * 1000));
          const text = await readBody(response);
          if (response.status === 402) throw error(`HTTP 402, insufficient balance: ${text.slice(0, 200)}`);
          if (response.ok) {
            try {
              return JSON.parse(text);
            } catch {
              throw error(`HTTP ${response.status} answered non-JSON: ${JSON.stringify(text.slice(0, 200))}`);
            }
          }
          const message = `HTTP ${response.status} ${response.statusText}: ${text.slice(0, 200)}`;
          if (response.status !== 429 && response.status < 500) throw error(message);
          const asked = retryAfter(response);
          if (asked !== null && asked > c.comparatorApiTimeout) {
            throw error(`${message}; the server asks to retry after ${asked} s, longer than comparatorApiTimeout (${c.comparatorApiTimeout} s)`);
          }
          if (asked !== null) waitMs = asked * 1000;
          retryable = message;
        } catch (caught) {
          if (caught instanceof ComparatorApiError) throw caught;
          const timedOut = (caught as Error).name === "TimeoutError";
          retryable = timedOut ? `no answer within comparatorApiTimeout (${c.comparatorApiTimeout} s)` : (caught as Error).message;
        }
        if (attempt >= c.comparatorApiMaxRetries) throw error(`${retryable} (after ${attempt + 1} attempts)`);
        note(scrub(`comparator API ${shown}: ${retryable}; retrying`));
        await new Promise((resolve) => setTimeout(resolve, waitMs));
      }
    });

  const fail = (what: string): never => {
    throw new ComparatorApiError(scrub(`comparator API ${shown} (${format}): ${what}`));
  };

  const generic = async (agent: number, prompt: string, k: number, item: Item): Promise<string[]> => {
    const json = await post(
      dropNulls({ prompt, agent_idx: agent, num_return_sequences: k, max_new_tokens: c.maxNewTokens, temperature: c.temperature, top_p: c.topP, top_k: c.topK, batch_item: jsonSafe(item), model: c.comparatorApiModel }),
    );
    const fields = [c.comparatorApiResponseField, "completions", "responses", "outputs", "choices"];
    const list = fields.map((f) => dotted(json, f)).find(Array.isArray) as unknown[] | undefined;
    if (!list) fail(`the answer has no list at ${fields.map((f) => JSON.stringify(f)).join(", ")}`);
    return list!.map((entry, i) => itemText(entry) ?? fail(`completion ${i} is neither a string nor an object with text/content/completion/response/message.content`));
  };

  const openai = async (prompt: string, k: number): Promise<string[]> => {
    const deepseek = /deepseek/i.test(url) || /deepseek/i.test(c.comparatorApiModel ?? "");
    const perRequest = deepseek ? 1 : (c.comparatorApiMaxNPerRequest ?? k);
    const sizes = Array.from({ length: Math.ceil(k / perRequest) }, (_, r) => Math.min(perRequest, k - r * perRequest));
    const answers = await Promise.all(
      sizes.map(async (n) => {
        const json = await post(dropNulls({ model: c.comparatorApiModel, messages: [{ role: "user", content: prompt }], n, max_tokens: c.maxNewTokens, temperature: c.temperature, top_p: c.topP }));
        const choices = dotted(json, "choices");
        if (!Array.isArray(choices)) fail("the answer has no choices list");
        return (choices as unknown[]).map((choice, i) => {
          const ch = choice as { message?: { content?: unknown }; text?: unknown };
          const text = typeof ch?.message?.content === "string" ? ch.message.content : typeof ch?.text === "string" ? ch.text : null;
          return text ?? fail(`choice ${i} has neither message.content nor text`);
        });
      }),
    );
    return answers.flat();
  };

  const perCandidate = async (prompt: string, k: number): Promise<string[]> =>
    Promise.all(
      Array.from({ length: k }, async () => {
        if (format === "anthropic") {
          const json = await post(dropNulls({ model: c.comparatorApiModel, max_tokens: c.maxNewTokens, messages: [{ role: "user", content: prompt }], temperature: c.temperature }));
          const blocks = dotted(json, "content");
          if (!Array.isArray(blocks)) fail("the answer has no content blocks");
          return (blocks as Array<{ type?: unknown; text?: unknown }>).filter((b) => b?.type === "text" && typeof b.text === "string").map((b) => b.text as string).join("");
        }
        const json = await post(dropNulls({ model: c.comparatorApiModel, input: prompt, max_output_tokens: c.maxNewTokens }));
        const output = dotted(json, "output");
        if (!Array.isArray(output)) fail("the answer has no output list");
        return (output as Array<{ content?: unknown }>)
          .flatMap((o) => (Array.isArray(o?.content) ? (o.content as Array<{ type?: unknown; text?: unknown }>) : []))
          .filter((b) => (b?.type === "output_text" || b?.type === "text") && typeof b.text === "string")
          .map((b) => b.text as string)
          .join("");
      }),
    );

  const sampler: AgentSampler = {
    sample: async (agent, prompt, k, item) => {
      const texts = format === "generic" ? await generic(agent, prompt, k, item) : format === "openai" ? await openai(prompt, k) : await perCandidate(prompt, k);
      if (texts.length === 0 || texts.every((t) => t.length === 0)) fail("the answer holds no completion text");
      if (texts.length < k) fail(`${texts.length} completions for ${k} requested`);
      return { texts: texts.slice(0, k), ids: null };
    },
  };
  return { begin: async () => sampler, end: () => {}, state: () => null, restore: () => {}, dispose: () => {} };
}
