// Which config.json keys may change what a model computes, judged by transformers' own code for the family: a key
// its causal-LM code reads (transformers-config-keys.ts, generated from transformers' source by
// scripts/reference/make_config_keys.py) is refused by name when comlrl does not implement it and the file sets it to
// anything but transformers' default; a key that code never reads loads, and one transformers' config class has
// never heard of for the family (another library's hint, metadata, a remote-code setting) is named in a warning.
import { ConfigError } from "../config/fields.js";
import { TRANSFORMERS_CONFIG_KEYS } from "./transformers-config-keys.js";

/**
 * Where comlrl judges a key otherwise than by the table, and why. `accepts` holds the only values loaded (compared as
 * JSON); an empty list refuses the key whatever it says.
 *
 * - quantization_config: transformers reads it while loading (outside the family's forward code), to load the weights
 *   through its quantizer and run quantized kernels; comlrl loads float weights only.
 * - Phi-3's attention_bias, mlp_bias and lm_head_bias (Phi-4-mini's files carry them, false): transformers' Phi-3
 *   has no such biases and ignores the keys, so a file that sets one true holds bias tensors transformers would drop
 *   with an "unused weights" notice. The file and transformers then disagree about the model; comlrl refuses rather
 *   than silently compute without the biases the checkpoint was trained with. (Llama's and SmolLM3's mlp_bias and
 *   attention_bias, which transformers does honour, comlrl implements.)
 *
 * pretraining_tp (SmolLM3-3B's file says 2) needs no decision: no transformers 5 code reads it, and transformers 4
 * used it only to split Llama's projections into that many slices and sum them, the same products added in another
 * order, so any value loads.
 */
const DECIDED: Record<string, { families?: string[]; accepts: unknown[]; why: string }> = {
  quantization_config: { accepts: [], why: "the weights are stored quantized, which transformers loads through its quantizer; comlrl loads float weights only" },
  attention_bias: { families: ["phi3"], accepts: [false], why: "transformers' Phi-3 has no attention biases and would drop the checkpoint's" },
  mlp_bias: { families: ["phi3"], accepts: [false], why: "transformers' Phi-3 has no MLP biases and would drop the checkpoint's" },
  lm_head_bias: { families: ["phi3"], accepts: [false], why: "transformers' Phi-3 has no LM-head bias and would drop the checkpoint's" },
};

/** Keys' values compared as JSON, objects by sorted keys (0 and 0.0, both JSON 0, are equal). */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.keys(value).sort().map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * Judges every key of a config.json for `modelType` by what transformers computes (module comment above).
 * `handled` are the keys the caller reads and validates itself. Throws a ConfigError naming `file` and the first key
 * that would change the computation; returns the keys transformers' config class does not know for the family, which
 * change nothing (for the caller to name in a warning: warnUnknownConfigKeys).
 */
export function judgeConfigKeys(raw: Record<string, unknown>, modelType: string, handled: ReadonlySet<string>, file: string): string[] {
  const family = TRANSFORMERS_CONFIG_KEYS.families[modelType];
  if (family === undefined) {
    throw new ConfigError(`${file}: model_type "${modelType}" has no entry in transformers-config-keys.ts (rerun scripts/reference/make_config_keys.py)`);
  }
  const unknown: string[] = [];
  for (const [key, value] of Object.entries(raw)) {
    const decided = DECIDED[key];
    if (decided && (decided.families === undefined || decided.families.includes(modelType))) {
      if (!decided.accepts.some((accepted) => canonical(accepted) === canonical(value))) {
        throw new ConfigError(`${file}: ${key} ${shown(value)} is not supported for model_type "${modelType}" (${decided.why})`);
      }
      continue;
    }
    if (handled.has(key)) continue;
    if (Object.hasOwn(family.reads, key)) {
      const byDefault = family.reads[key];
      if (canonical(value) !== canonical(byDefault)) {
        throw new ConfigError(
          `${file}: ${key} ${shown(value)} is not supported for model_type "${modelType}" (transformers ${TRANSFORMERS_CONFIG_KEYS.transformers}'s ` +
            `${modelType} code reads it, default ${JSON.stringify(byDefault)}, and it changes the computation; comlrl does not implement it)`,
        );
      }
    } else if (!Object.hasOwn(family.fields, key)) {
      unknown.push(key);
    }
  }
  return unknown;
}

/** A value as an error names it: its JSON, cut short past 60 characters (a quantization_config lists every module). */
function shown(value: unknown): string {
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

const warned = new Set<string>();

/** Names, once per file and set of keys, the keys of a config.json that neither comlrl nor transformers reads. */
export function warnUnknownConfigKeys(file: string, modelType: string, keys: string[]): void {
  const id = `${file}\0${keys.join("\0")}`;
  if (keys.length === 0 || warned.has(id)) return;
  warned.add(id);
  process.emitWarning(
    `${file}: ${keys.join(", ")} ignored: transformers' ${modelType} code never reads ${keys.length === 1 ? "it" : "them"} either ` +
      `(metadata, other libraries' settings, or remote code's, which the built-in ${modelType} implementation replaces)`,
  );
}
