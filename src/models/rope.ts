// Rotary position embeddings from a config.json: both layouts (transformers 4.x's top-level rope_theta / rope_scaling,
// 5.x's rope_parameters, flat or one dict per layer kind) and the inverse frequencies of each rope_type as
// transformers' modeling_rope_utils computes them. The native decoder only multiplies positions by these tables.
//
// dynamic and longrope are the exception: transformers recomputes their frequencies in each forward call from that
// call's largest position (dynamic also keeps the largest it has seen), so past the pretraining length the numbers
// depend on how a sequence is split into calls — one call in training, prompt then completions when we score with a
// shared prompt cache, one token at a time in generation. Below that length both are fixed tables, computed here
// exactly; from it on the decoder refuses the position (positionLimit) rather than compute something else.

export interface RopeTable {
  invFreq: number[];
  /** transformers' attention_scaling: cos and sin are multiplied by it (yarn, longrope). */
  attentionScaling: number;
  /** The first position at which transformers would change this table (dynamic, longrope); 0: never. */
  positionLimit: number;
}

interface RopeContext {
  /** Throws the caller's error naming the field. */
  fail: (field: string, problem: string) => never;
  headDim: number;
  maxPositionEmbeddings: number;
  defaultTheta: number;
  /** Each layer's kind (full_attention / sliding_attention), for rope_parameters nested by kind. */
  kinds: string[];
}

type Params = Record<string, unknown>;

// The keys each rope_type reads; any other key in its dict is refused rather than ignored.
const TYPE_KEYS: Record<string, string[]> = {
  default: [],
  linear: ["factor"],
  llama3: ["factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"],
  yarn: ["factor", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "original_max_position_embeddings", "truncate"],
  dynamic: ["factor"],
  longrope: ["factor", "attention_factor", "short_factor", "long_factor", "original_max_position_embeddings"],
};
const BASE_KEYS = ["rope_type", "type", "rope_theta", "partial_rotary_factor"];

function exponents(dim: number): number[] {
  return Array.from({ length: dim / 2 }, (_, i) => (2 * i) / dim);
}

/** The rotary tables and which one each layer uses. */
export function ropeTables(
  raw: Params,
  context: RopeContext,
): { invFreq: number[][]; attentionScaling: number[]; layerTable: number[]; positionLimit: number; positionLimitReason: string } {
  const { fail } = context;
  const scaling = raw.rope_scaling ?? null;
  const parameters = raw.rope_parameters ?? null;
  if (scaling !== null && parameters !== null && JSON.stringify(scaling) !== JSON.stringify(parameters)) {
    fail("rope_scaling", "and rope_parameters are both set and differ; transformers would use rope_scaling, which is ambiguous");
  }
  const given = (scaling ?? parameters ?? {}) as Params;
  if (typeof given !== "object" || Array.isArray(given)) fail(scaling !== null ? "rope_scaling" : "rope_parameters", "must be an object");
  const nestedKinds: string[] = Object.keys(given).filter((k) => k === "full_attention" || k === "sliding_attention");

  // One parameter dict per layer kind: nested (5.x per kind), Gemma 3's 4.x local base, or one for all layers.
  const dicts = new Map<string, Params>();
  if (nestedKinds.length > 0) {
    for (const key of Object.keys(given)) {
      if (!nestedKinds.includes(key)) fail(`rope_parameters.${key}`, "is not a layer kind (full_attention, sliding_attention)");
    }
    for (const kind of nestedKinds) {
      const dict = given[kind];
      if (typeof dict !== "object" || dict === null || Array.isArray(dict)) fail(`rope_parameters.${kind}`, `must be an object of rope parameters, got ${JSON.stringify(dict)}`);
      dicts.set(kind, dict as Params);
    }
  } else {
    dicts.set("*", given);
    if (raw.rope_local_base_freq !== undefined) dicts.set("sliding_attention", { rope_type: "default", rope_theta: raw.rope_local_base_freq });
  }

  const tables: RopeTable[] = [];
  const index = new Map<string, number>();
  let positionLimit = 0;
  let positionLimitReason = "";
  for (const [kind, dict] of dicts) {
    const where = nestedKinds.length > 0 ? `rope_parameters.${kind}` : scaling !== null ? "rope_scaling" : "rope_parameters";
    index.set(kind, tables.length);
    const made = table(dict, where);
    tables.push(made);
    if (made.positionLimit > 0 && (positionLimit === 0 || made.positionLimit < positionLimit)) {
      positionLimit = made.positionLimit;
      positionLimitReason = `${where}.rope_type "${dict.rope_type ?? dict.type}" from here on recomputes its frequencies from each call's length in transformers, which we do not reproduce`;
    }
  }
  const layerTable = context.kinds.map((kind) => {
    const found = index.get(kind) ?? index.get("*");
    return found === undefined ? fail("rope_parameters", `has no entry for layer kind "${kind}"`) : found;
  });
  const half = tables[0].invFreq.length;
  if (tables.some((t) => t.invFreq.length !== half)) fail("rope_parameters", "layer kinds must rotate the same number of dimensions");
  return {
    invFreq: tables.map((t) => t.invFreq),
    attentionScaling: tables.map((t) => t.attentionScaling),
    layerTable,
    positionLimit,
    positionLimitReason,
  };

  function table(dict: Params, where: string): RopeTable {
    const type = (dict.rope_type ?? dict.type ?? "default") as string;
    const keys = TYPE_KEYS[type];
    if (!keys) fail(`${where}.rope_type`, `"${type}" is not supported (supported: ${Object.keys(TYPE_KEYS).join(", ")})`);
    for (const key of Object.keys(dict)) {
      if (!BASE_KEYS.includes(key) && !keys.includes(key)) fail(`${where}.${key}`, `is not read by rope_type "${type}"`);
    }
    const positive = (key: string, value: unknown): number => {
      if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) return fail(`${where}.${key}`, `must be a positive number, got ${JSON.stringify(value)}`);
      return value;
    };
    const theta = positive("rope_theta", dict.rope_theta ?? raw.rope_theta ?? context.defaultTheta);
    const factorOf = (key: string) => positive(key, dict[key]);
    const partial = positive("partial_rotary_factor", dict.partial_rotary_factor ?? raw.partial_rotary_factor ?? 1);
    const dim = Math.floor(context.headDim * partial);
    if (dim % 2 !== 0 || dim > context.headDim) fail(`${where}.partial_rotary_factor`, `gives ${dim} rotary dimensions, which must be even and at most head_dim`);
    // Phi-3 keeps the pretraining length at the top level, and transformers gives that priority.
    const originalMax = () => positive("original_max_position_embeddings", raw.original_max_position_embeddings ?? dict.original_max_position_embeddings ?? context.maxPositionEmbeddings);
    const base = exponents(dim).map((e) => 1 / theta ** e);

    switch (type) {
      case "linear": {
        const factor = factorOf("factor");
        return { invFreq: base.map((f) => f / factor), attentionScaling: 1, positionLimit: 0 };
      }
      case "dynamic": {
        // NTK: θ·(factor·length/max − (factor − 1))^(dim/(dim − 2)) with length clamped up to max_position_embeddings:
        // plain θ until a call reaches that length.
        factorOf("factor");
        return { invFreq: base, attentionScaling: 1, positionLimit: context.maxPositionEmbeddings };
      }
      case "longrope": {
        // Short factors until a call passes the pretraining length, then long ones; cos/sin scaled throughout.
        const original = originalMax();
        const factors = (key: string): number[] => {
          const list = dict[key];
          if (!Array.isArray(list) || list.length !== dim / 2) fail(`${where}.${key}`, `must list ${dim / 2} numbers (rotary dimensions / 2)`);
          return (list as unknown[]).map((value) => positive(key, value));
        };
        const short = factors("short_factor");
        factors("long_factor");
        const factor = dict.factor === undefined || dict.factor === null ? context.maxPositionEmbeddings / original : factorOf("factor");
        const given = dict.attention_factor;
        const attention = given === undefined || given === null ? (factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(original))) : positive("attention_factor", given);
        return { invFreq: base.map((f, i) => f / short[i]), attentionScaling: attention, positionLimit: original };
      }
      case "llama3": {
        const factor = factorOf("factor");
        const low = factorOf("low_freq_factor");
        const high = factorOf("high_freq_factor");
        const context = originalMax();
        const lowWavelen = context / low;
        const highWavelen = context / high;
        const invFreq = base.map((f) => {
          const wavelen = (2 * Math.PI) / f;
          if (wavelen < highWavelen) return f;
          if (wavelen > lowWavelen) return f / factor;
          const smooth = (context / wavelen - low) / (high - low);
          return (1 - smooth) * (f / factor) + smooth * f;
        });
        return { invFreq, attentionScaling: 1, positionLimit: 0 };
      }
      case "yarn": {
        const original = originalMax();
        const factor = dict.factor === undefined || dict.factor === null ? context.maxPositionEmbeddings / original : factorOf("factor");
        const mscaleOf = (scale: number, m = 1) => (scale <= 1 ? 1 : 0.1 * m * Math.log(scale) + 1);
        let attention = dict.attention_factor as number | undefined | null;
        if (attention === undefined || attention === null) {
          const m = dict.mscale as number | undefined, mAll = dict.mscale_all_dim as number | undefined;
          attention = m && mAll ? mscaleOf(factor, m) / mscaleOf(factor, mAll) : mscaleOf(factor);
        }
        const betaFast = (dict.beta_fast as number | undefined) || 32;
        const betaSlow = (dict.beta_slow as number | undefined) || 1;
        const correction = (rotations: number) => (dim * Math.log(original / (rotations * 2 * Math.PI))) / (2 * Math.log(theta));
        const truncate = dict.truncate ?? true;
        let low = correction(betaFast), high = correction(betaSlow);
        if (truncate) {
          low = Math.floor(low);
          high = Math.ceil(high);
        }
        low = Math.max(low, 0);
        high = Math.min(high, dim - 1);
        if (low === high) high += 0.001;
        const invFreq = base.map((f, i) => {
          const extrapolation = 1 - Math.min(1, Math.max(0, (i - low) / (high - low)));
          return (f / factor) * (1 - extrapolation) + f * extrapolation;
        });
        return { invFreq, attentionScaling: positive("attention_factor", attention), positionLimit: 0 };
      }
      default:
        return { invFreq: base, attentionScaling: 1, positionLimit: 0 };
    }
  }
}
