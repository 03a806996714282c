// The api comparator (COMLRL-SPEC §6.7): candidates from a remote LLM over HTTP, in one of four request formats —
// generic (our own JSON contract, completions read from a dotted response field with fallbacks), openai (chat
// completions, n candidates per request up to comparatorApiMaxNPerRequest; 1 for DeepSeek), anthropic (messages, one
// request per candidate, x-api-key and anthropic-version headers) and openai_responses (one request per candidate).
// HTTP 402 is "insufficient balance"; other HTTP errors, non-JSON and empty answers are errors naming the URL and
// status. Failed requests (network, timeout, 429, 5xx) are retried with exponential backoff; at most
// comparatorApiConcurrency requests are in flight. The answers are text: the trained agents tokenize them.
import type { IterativeFields } from "../../../config/index.js";
import type { Item } from "../../../rollout/types.js";
import type { AgentSampler, ComparatorSource } from "./comparators.js";

export class ComparatorApiError extends Error {
  override name = "ComparatorApiError";
}

/** What the api comparator reads of the config (the iterative fields plus the sampling settings). */
export type ApiComparatorConfig = IterativeFields & { maxNewTokens: number; temperature: number; topP: number; topK: number | null };

const BACKOFF_MS = 250;

/** A counting semaphore: at most `limit` holders at once, served in arrival order. */
function limiter(limit: number) {
  let active = 0;
  const waiting: Array<() => void> = [];
  return async <T>(work: () => Promise<T>): Promise<T> => {
    if (active >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
    active++;
    try {
      return await work();
    } finally {
      active--;
      waiting.shift()?.();
    }
  };
}

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
  const run = limiter(c.comparatorApiConcurrency);

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

  /** One POST with retries; the parsed JSON answer. */
  const post = (body: Record<string, unknown>): Promise<unknown> =>
    run(async () => {
      for (let attempt = 0; ; attempt++) {
        let retryable: string;
        try {
          const response = await fetch(url, { method: "POST", headers: headers(), body: JSON.stringify({ ...body, ...(c.comparatorApiExtraBody ?? {}) }), signal: AbortSignal.timeout(c.comparatorApiTimeout * 1000) });
          const text = await response.text();
          if (response.status === 402) throw new ComparatorApiError(`comparator API ${url}: HTTP 402, insufficient balance: ${text.slice(0, 200)}`);
          if (response.ok) {
            try {
              return JSON.parse(text);
            } catch {
              throw new ComparatorApiError(`comparator API ${url}: HTTP ${response.status} answered non-JSON: ${JSON.stringify(text.slice(0, 200))}`);
            }
          }
          const message = `comparator API ${url}: HTTP ${response.status} ${response.statusText}: ${text.slice(0, 200)}`;
          if (response.status !== 429 && response.status < 500) throw new ComparatorApiError(message);
          retryable = message;
        } catch (error) {
          if (error instanceof ComparatorApiError) throw error;
          const timedOut = (error as Error).name === "TimeoutError";
          retryable = timedOut ? `comparator API ${url}: no answer within comparatorApiTimeout (${c.comparatorApiTimeout} s)` : `comparator API ${url}: ${(error as Error).message}`;
        }
        if (attempt >= c.comparatorApiMaxRetries) throw new ComparatorApiError(`${retryable} (after ${attempt + 1} attempts)`);
        note(`${retryable}; retrying`);
        await new Promise((resolve) => setTimeout(resolve, BACKOFF_MS * 2 ** attempt));
      }
    });

  const fail = (what: string): never => {
    throw new ComparatorApiError(`comparator API ${url} (${format}): ${what}`);
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
