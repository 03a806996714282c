// Secrets in configs: what counts as one and how it is masked before a config is written anywhere (checkpoints'
// trainer_state.json, the run config of metrics.jsonl and W&B) or a message shows it. Secrets are found by value
// where the user hands values to a remote service, and by name elsewhere:
// - every header value and every extra-body field given for a remote service (comparatorApiHeaders,
//   comparatorApiExtraBody, any `…headers` / `…extra_body` map) is a secret unless its name is on a short list of
//   fields known to hold none (content-type, anthropic-version; model, temperature, max_tokens, …);
// - a field under a secret name (comparatorApiKey, api_key, client_secret, password, credentials, …) is a secret,
//   and so is everything nested under it, whatever its type;
// - a URL keeps its scheme, host and the path words APIs are made of (v1, chat, completions, …): its user info,
//   every other path segment, every query value and its fragment are secrets.
// Every secret value so found is then masked wherever else it appears: in another field, an error message.
const MASK = "***";

// Names that hold a secret, matched at the end of the field name: comparatorApiKey, x-api-key, authorization,
// hf_token, client_secret, password. Token *kinds* (eos_token, pad_token) are tokenizer settings, not secrets.
const SECRET_NAME = /(?:api[-_]?key|(?<!(?:eos|bos|pad|unk|sep|cls|mask)[-_]?)token|secret|password|passwd|authorization|cookie|credentials?)$/i;
// "key" as the last word of a name: key, X-Auth-Key, access_key, subscriptionKey (not monkey or turnkey).
const KEY_WORD = /(?:^|[-_.\s])key$/i;
const CAMEL_KEY = /[a-z0-9]Key$/;
const URL_NAME = /url$/i;
// Maps of values handed to a remote service as they are: request headers, fields merged into a request body.
const HEADER_MAP = /headers$/i;
const BODY_MAP = /extra[-_]?body$/i;
// Header and body fields that hold no secret: the protocol's and the generation settings. Lower case.
const PUBLIC_HEADERS = new Set(["accept", "accept-encoding", "accept-language", "anthropic-beta", "anthropic-version", "cache-control", "content-type", "openai-beta", "user-agent"]);
const PUBLIC_BODY_FIELDS = new Set([
  "frequency_penalty", "logprobs", "max_completion_tokens", "max_new_tokens", "max_output_tokens", "max_tokens", "min_p", "model", "n",
  "num_return_sequences", "presence_penalty", "reasoning", "reasoning_effort", "repetition_penalty", "response_format", "seed", "stop",
  "stop_sequences", "stream", "temperature", "thinking", "tool_choice", "tools", "top_k", "top_logprobs", "top_p",
]);
// The path words of APIs' endpoints, and versions (v1, v1beta, v2.1): the only path segments a URL keeps.
const PUBLIC_PATH_WORDS = new Set(["api", "chat", "complete", "completions", "deployments", "embeddings", "engines", "generate", "inference", "messages", "models", "openai", "responses", "anthropic"]);
const VERSION_SEGMENT = /^v\d+(?:\.\d+)?(?:alpha|beta)?\d*$/i;
// The shortest value masked elsewhere than where it was given: "2" or "on" in a header would mask every such string.
const MIN_SECRET_LENGTH = 3;
// The shortest value masked wherever it appears (real keys are far longer): a shorter one would garble every text it
// occurs in — a resumed run reads its checkpoint's state back — so it is masked only where it is the whole value.
const MIN_SCRUBBED_LENGTH = 8;

/** Whether a field (or header) of this name holds a secret. */
export const isSecretName = (name: string): boolean => SECRET_NAME.test(name) || KEY_WORD.test(name) || CAMEL_KEY.test(name);

/** Whether the value under `name`, in a map called `parent`, is a secret whatever it holds. */
function secretField(name: string, parent: string): boolean {
  if (isSecretName(name)) return true;
  if (HEADER_MAP.test(parent)) return !PUBLIC_HEADERS.has(name.toLowerCase());
  if (BODY_MAP.test(parent)) return !PUBLIC_BODY_FIELDS.has(name.toLowerCase());
  return false;
}

/** A scalar masked when it is a secret: strings and numbers (a numeric key is a key); booleans and null say nothing. */
const maskable = (value: unknown): value is string | number | bigint => typeof value === "string" || typeof value === "number" || typeof value === "bigint";

/** Whether a scalar under `name` is a secret: below a secret, or given where a header or body map belongs. */
const secretScalar = (name: string, secret: boolean): boolean => secret || HEADER_MAP.test(name) || BODY_MAP.test(name);

const publicSegment = (segment: string): boolean => segment === "" || PUBLIC_PATH_WORDS.has(segment.toLowerCase()) || VERSION_SEGMENT.test(segment);

/** url with its user info, every path segment but API words and versions, every query value and its fragment masked. */
export function redactUrl(url: string): string {
  const parts = /^([a-z][a-z0-9+.-]*:\/\/)?([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/is.exec(url)!;
  const [, scheme = "", authority = "", pathPart = "", query = "", fragment = ""] = parts;
  const host = authority.includes("@") ? `${MASK}@${authority.slice(authority.lastIndexOf("@") + 1)}` : authority;
  const maskedPath = pathPart
    .split("/")
    .map((segment) => (publicSegment(segment) ? segment : MASK))
    .join("/");
  return `${scheme}${host}${maskedPath}${query.replace(/([?&][^=&#]*=)[^&#]*/g, `$1${MASK}`)}${fragment === "" ? "" : `#${MASK}`}`;
}

// A URL inside free text (a runtime's error message quoting the URL it refused), without the punctuation after it.
const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]*[^\s"'<>`.,:;)\]]/gi;

/** text with every URL in it redacted (redactUrl). */
export const redactUrlsIn = (text: string): string => text.replace(URL_IN_TEXT, (url) => redactUrl(url));

/**
 * Every secret value `value` holds, at any depth (see the rules above), and `extra` (e.g. a key read from the
 * environment). Numbers as their text. Longest first, so a secret that contains another is masked whole.
 */
export function secretValues(value: unknown, extra: ReadonlyArray<string | null | undefined> = []): string[] {
  const found = new Set<string>();
  const add = (secret: string | null | undefined) => {
    if (secret && secret.length >= MIN_SECRET_LENGTH) found.add(secret);
  };
  // As written in the URL and decoded, since either may be echoed.
  const addEncoded = (secret: string) => {
    add(secret);
    try {
      add(decodeURIComponent(secret));
    } catch {
      // Not valid percent-encoding: only the text as written can appear.
    }
  };
  const fromUrl = (url: string) => {
    if (!URL.canParse(url)) return;
    const parsed = new URL(url);
    addEncoded(parsed.username);
    addEncoded(parsed.password);
    for (const [, query] of parsed.searchParams) add(query);
    for (const segment of parsed.pathname.split("/")) if (!publicSegment(segment)) addEncoded(segment);
    addEncoded(parsed.hash.slice(1));
  };
  const seen = new Set<object>();
  const walk = (v: unknown, name: string, secret: boolean) => {
    if (maskable(v)) {
      if (secretScalar(name, secret)) add(String(v));
      else if (typeof v === "string" && URL_NAME.test(name)) fromUrl(v);
    } else if (v !== null && typeof v === "object" && !ArrayBuffer.isView(v) && !seen.has(v)) {
      seen.add(v);
      if (Array.isArray(v)) v.forEach((entry) => walk(entry, name, secret));
      else for (const [key, entry] of Object.entries(v)) walk(entry, key, secret || secretField(key, name));
    }
  };
  walk(value, "", false);
  extra.forEach(add);
  return [...found].sort((a, b) => b.length - a.length);
}

/** text with every secret of `secrets` masked (those shorter than MIN_SCRUBBED_LENGTH only when they are all of it). */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  if (secrets.includes(text)) return MASK;
  return secrets.reduce((t, secret) => (secret.length >= MIN_SCRUBBED_LENGTH ? t.replaceAll(secret, MASK) : t), text);
}

/**
 * A copy of value with every secret (see the rules above) masked at any depth, every URL field redacted, and every
 * secret value found so (and in `extra`) masked in every other string and key.
 */
export function redactSecrets<T>(value: T, extra: ReadonlyArray<string | null | undefined> = []): T {
  const secrets = secretValues(value, extra);
  const walk = (v: unknown, name: string, secret: boolean): unknown => {
    if (maskable(v) && secretScalar(name, secret)) return MASK;
    if (typeof v === "string") return scrubSecrets(URL_NAME.test(name) ? redactUrl(v) : v, secrets);
    if (Array.isArray(v)) return v.map((entry) => walk(entry, name, secret));
    if (v !== null && typeof v === "object" && !ArrayBuffer.isView(v)) {
      return Object.fromEntries(Object.entries(v).map(([key, entry]) => [scrubSecrets(key, secrets), walk(entry, key, secret || secretField(key, name))]));
    }
    return v;
  };
  return walk(value, "", false) as T;
}
