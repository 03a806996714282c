// Secrets in configs: what counts as one and how it is masked before a config is written anywhere (checkpoints'
// trainer_state.json, the run config of metrics.jsonl and W&B) or a URL is printed. A field is a secret by its name
// (comparatorApiKey, an Authorization / x-api-key / …-token header, an api_key in an extra body), so a secret nested
// in header maps or request bodies is masked as well as the config's own key field; URLs lose their user info and
// query values, where keys are also carried.
const MASK = "***";

// Names that hold a secret, matched at the end of the field name: comparatorApiKey, x-api-key, authorization,
// hf_token, client_secret, password. Token *kinds* (eos_token, pad_token) are tokenizer settings, not secrets.
const SECRET_NAME = /(?:api[-_]?key|(?<!(?:eos|bos|pad|unk|sep|cls|mask)[-_]?)token|secret|password|passwd|authorization|cookie|credentials?)$/i;
const URL_NAME = /url$/i;

/** Whether a field (or header) of this name holds a secret. */
export const isSecretName = (name: string): boolean => SECRET_NAME.test(name);

/** url with user info and every query value masked: http://***@host/path?key=*** */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#@]*@/i, `$1${MASK}@`).replace(/([?&][^=&#]*=)[^&#]*/g, `$1${MASK}`);
}

/** A copy of value with every secret field masked (at any depth) and every URL field redacted. */
export function redactSecrets<T>(value: T): T {
  const walk = (v: unknown, name: string): unknown => {
    if (typeof v === "string") return URL_NAME.test(name) ? redactUrl(v) : v;
    if (Array.isArray(v)) return v.map((entry) => walk(entry, name));
    if (v !== null && typeof v === "object" && !ArrayBuffer.isView(v)) {
      return Object.fromEntries(Object.entries(v).map(([key, entry]) => [key, typeof entry === "string" && isSecretName(key) ? MASK : walk(entry, key)]));
    }
    return v;
  };
  return walk(value, "") as T;
}
