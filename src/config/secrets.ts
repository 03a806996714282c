// Secrets in configs: what counts as one and how it is masked before a config is written anywhere (checkpoints'
// trainer_state.json, the run config of metrics.jsonl and W&B) or a message shows it. A field is a secret by its name
// (comparatorApiKey, an Authorization / x-api-key / Ocp-Apim-Subscription-Key / …-token header, a key or api_key in
// an extra body), so a secret nested in header maps or request bodies is masked as well as the config's own key
// field; URLs lose their user info, query values and path segments that look like keys. Then every secret value so
// found is masked wherever else it appears — in a URL's path, another field, an error message.
const MASK = "***";

// Names that hold a secret, matched at the end of the field name: comparatorApiKey, x-api-key, authorization,
// hf_token, client_secret, password. Token *kinds* (eos_token, pad_token) are tokenizer settings, not secrets.
const SECRET_NAME = /(?:api[-_]?key|(?<!(?:eos|bos|pad|unk|sep|cls|mask)[-_]?)token|secret|password|passwd|authorization|cookie|credentials?)$/i;
// "key" as the last word of a name: key, X-Auth-Key, access_key, subscriptionKey (not monkey or turnkey).
const KEY_WORD = /(?:^|[-_.\s])key$/i;
const CAMEL_KEY = /[a-z0-9]Key$/;
const URL_NAME = /url$/i;
// A URL's query values are all masked in the URL; elsewhere those under a secret name are, and any this long (a
// key under a name such as code= or sig=), while short ones (v=2, model=gpt-4o) are not secrets worth garbling for.
const MIN_QUERY_SECRET_LENGTH = 8;
// The shortest value masked wherever it appears (real keys are far longer): a shorter one would garble every text it
// occurs in — a resumed run reads its checkpoint's state back — so it is masked only where it is the whole value.
const MIN_SCRUBBED_LENGTH = 8;

/** Whether a field (or header) of this name holds a secret. */
export const isSecretName = (name: string): boolean => SECRET_NAME.test(name) || KEY_WORD.test(name) || CAMEL_KEY.test(name);

// A URL path segment that is a credential: a known key format (OpenAI/Anthropic sk-, Hugging Face hf_, GitHub,
// GitLab, Slack, Google AIza, Telegram bot tokens) or 32+ characters of key alphabet mixing letters and digits.
const KEY_SEGMENT = /^(?:(?:sk|pk|rk)-[\w-]{8,}|(?:hf|ghp|gho|ghs|github_pat|glpat)_[\w-]{8,}|xox[abprs]-[\w-]{8,}|AIza[\w-]{20,}|bot\d+:[\w-]{20,})$|^(?=[\w-]*\d)(?=[\w-]*[a-z])[\w-]{32,}$/i;

/** url with user info, every query value and every path segment that is a key (or follows a key-named one) masked. */
export function redactUrl(url: string): string {
  const parts = /^([a-z][a-z0-9+.-]*:\/\/)?([^/?#]*)([^?#]*)(.*)$/is.exec(url)!;
  const [, scheme = "", authority = "", pathPart = "", rest = ""] = parts;
  const host = authority.includes("@") ? `${MASK}@${authority.slice(authority.lastIndexOf("@") + 1)}` : authority;
  const segments = pathPart.split("/");
  const maskedPath = segments.map((segment, i) => (segment !== "" && (KEY_SEGMENT.test(segment) || (i > 0 && isSecretName(segments[i - 1]!))) ? MASK : segment)).join("/");
  return `${scheme}${host}${maskedPath}${rest.replace(/([?&][^=&#]*=)[^&#]*/g, `$1${MASK}`)}`;
}

/**
 * Every secret value value holds, at any depth: strings under secret names, user info, query values and key-like
 * path segments of URLs, and `extra` (e.g. a key read from the environment). Longest first, so a secret that contains
 * another is masked whole.
 */
export function secretValues(value: unknown, extra: ReadonlyArray<string | null | undefined> = []): string[] {
  const found = new Set<string>();
  const add = (secret: string | null | undefined) => {
    if (secret) found.add(secret);
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
    for (const [name, query] of parsed.searchParams) if (isSecretName(name) || query.length >= MIN_QUERY_SECRET_LENGTH) add(query);
    const segments = parsed.pathname.split("/");
    segments.forEach((segment, i) => {
      if (segment !== "" && (KEY_SEGMENT.test(segment) || (i > 0 && isSecretName(segments[i - 1]!)))) addEncoded(segment);
    });
  };
  const seen = new Set<object>();
  const walk = (v: unknown, name: string) => {
    if (typeof v === "string") {
      if (isSecretName(name)) add(v);
      else if (URL_NAME.test(name)) fromUrl(v);
    } else if (v !== null && typeof v === "object" && !ArrayBuffer.isView(v) && !seen.has(v)) {
      seen.add(v);
      if (Array.isArray(v)) v.forEach((entry) => walk(entry, name));
      else for (const [key, entry] of Object.entries(v)) walk(entry, key);
    }
  };
  walk(value, "");
  extra.forEach(add);
  return [...found].sort((a, b) => b.length - a.length);
}

/** text with every secret of `secrets` masked (those shorter than MIN_SCRUBBED_LENGTH only when they are all of it). */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  if (secrets.includes(text)) return MASK;
  return secrets.reduce((t, secret) => (secret.length >= MIN_SCRUBBED_LENGTH ? t.replaceAll(secret, MASK) : t), text);
}

/**
 * A copy of value with every secret field masked (at any depth), every URL field redacted, and every secret value
 * found so (and in `extra`) masked in every other string and key.
 */
export function redactSecrets<T>(value: T, extra: ReadonlyArray<string | null | undefined> = []): T {
  const secrets = secretValues(value, extra);
  const walk = (v: unknown, name: string): unknown => {
    if (typeof v === "string") return scrubSecrets(URL_NAME.test(name) ? redactUrl(v) : v, secrets);
    if (Array.isArray(v)) return v.map((entry) => walk(entry, name));
    if (v !== null && typeof v === "object" && !ArrayBuffer.isView(v)) {
      return Object.fromEntries(
        Object.entries(v).map(([key, entry]) => [
          scrubSecrets(key, secrets),
          typeof entry === "string" && isSecretName(key) ? MASK : walk(entry, key),
        ]),
      );
    }
    return v;
  };
  return walk(value, "") as T;
}
