// The field-spec machinery every trainer config is built with: a config is a table of field specs, and buildConfig
// turns a user's object (camelCase from TypeScript, snake_case from CoMLRL-style files) into a validated, frozen value.
// Errors always name the field, because that is what users search their config for (and what tests match on).
// A config is declared once, by its table: each field's doc comment sits on its spec, and the config's types derive
// from the table —
//   export const X_FIELDS = { ...GROUP_FIELDS, /** What it does. */ someField: int({ default: 1, min: 1 }) };
//   export interface XConfig extends ConfigOf<typeof X_FIELDS> {}
//   export type XConfigInput = ConfigInput<typeof X_FIELDS>;
// and its builder is buildConfig(X_FIELDS, input, { configName: "XConfig", finish }); TypeDoc and the generated config
// tables read the same doc comments.
import { redactSecrets, scrubSecrets, secretValues } from "./secrets.js";

/** A configuration problem; the message names the config and field (and the file, when it came from one). */
export class ConfigError extends Error {
  /** Always "ConfigError". */
  override name = "ConfigError";
  constructor(
    message: string,
    /** The camelCase field (or unknown key) at fault, when there is one. */
    readonly field?: string,
  ) {
    super(message);
  }
}

/** How one field reads a user's value. */
export interface FieldSpec<T> {
  /** Used when the user gives nothing (absent or undefined); a field without one is required. */
  readonly default?: T;
  /** Returns the field's value, or calls reject(reason) when raw is unacceptable. */
  readonly parse: (raw: unknown) => T;
  /** The values parse accepts, in words ("integer ≥ 2", `"v" | "q"`): the range column of the generated config tables. */
  readonly accepts?: string;
}

/** Thrown by parsers with the reason alone; buildConfig adds the config and field name around it. */
class FieldProblem extends Error {}

/** Signals from inside a parser or check that the value is unacceptable, e.g. reject("must be ≥ 1"). */
export function reject(reason: string): never {
  throw new FieldProblem(reason);
}

/** A field with a hand-written parser, for types the primitives below do not cover; accepts describes its values. */
export function field<T>(parse: (raw: unknown) => T, defaultValue?: T, accepts?: string): FieldSpec<T> {
  return { default: defaultValue, parse, accepts };
}

interface Bounds {
  /** Inclusive lower bound (≥). */
  readonly min?: number;
  /** Exclusive lower bound (>). */
  readonly above?: number;
  /** Inclusive upper bound (≤). */
  readonly max?: number;
}

interface Options<T> {
  readonly default?: T;
  /** A further rule; returns the reason ("must be …") when the value breaks it. */
  readonly check?: (value: T) => string | undefined;
}

function checked<T>(value: T, check: Options<T>["check"]): T {
  const reason = check?.(value);
  return reason === undefined ? value : reject(reason);
}

function describeBounds(kind: string, { min, above, max }: Bounds): string {
  const limits = [min === undefined ? "" : `≥ ${min}`, above === undefined ? "" : `> ${above}`, max === undefined ? "" : `≤ ${max}`];
  const stated = limits.filter((limit) => limit !== "");
  return stated.length === 0 ? kind : `${kind} ${stated.join(", ")}`;
}

function inBounds(value: number, { min, above, max }: Bounds): number {
  if (min !== undefined && !(value >= min)) reject(`must be ≥ ${min}`);
  if (above !== undefined && !(value > above)) reject(`must be > ${above}`);
  if (max !== undefined && !(value <= max)) reject(`must be ≤ ${max}`);
  return value;
}

export function int(options: Options<number> & Bounds = {}): FieldSpec<number> {
  return field((raw) => {
    if (typeof raw !== "number" || !Number.isSafeInteger(raw)) reject("must be an integer");
    return checked(inBounds(raw, options), options.check);
  }, options.default, describeBounds("integer", options));
}

export function float(options: Options<number> & Bounds = {}): FieldSpec<number> {
  return field((raw) => {
    if (typeof raw !== "number" || !Number.isFinite(raw)) reject("must be a finite number");
    return checked(inBounds(raw, options), options.check);
  }, options.default, describeBounds("number", options));
}

export function bool(options: Options<boolean> = {}): FieldSpec<boolean> {
  return field((raw) => {
    if (typeof raw !== "boolean") reject("must be true or false");
    return checked(raw, options.check);
  }, options.default, "true | false");
}

export function text(options: Options<string> = {}): FieldSpec<string> {
  return field((raw) => {
    if (typeof raw !== "string") reject("must be a string");
    return checked(raw, options.check);
  }, options.default, "string");
}

/**
 * One of a fixed set of strings. Matching ignores case and surrounding blanks, as CoMLRL's normalisation does;
 * aliases map other spellings to an allowed value. A JSON/YAML null is looked up as the alias "null".
 */
export function oneOf<const V extends string, const A extends string = never>(
  allowed: readonly V[],
  options: Options<V> & { readonly aliases?: Readonly<Record<A, V>> } = {},
): FieldSpec<V> & Aliased<A> {
  const aliases = new Map<string, V>(Object.entries(options.aliases ?? {}));
  const spec = field((raw) => {
    const key = raw === null ? "null" : typeof raw === "string" ? raw.trim().toLowerCase() : undefined;
    const value = key === undefined ? undefined : (allowed.find((v) => v === key) ?? aliases.get(key));
    if (value === undefined) reject(`must be one of ${allowed.map((v) => JSON.stringify(v)).join(", ")}`);
    return checked(value, options.check);
  }, options.default, allowed.map((v) => JSON.stringify(v)).join(" | "));
  return { ...spec, aliases: Object.freeze([...aliases.keys()]) as readonly A[] };
}

/** A oneOf field's other spellings (CoMLRL's aliases): accepted as input, never produced. */
export interface Aliased<A extends string> {
  /** The aliases, each read as the value it names. */
  readonly aliases: readonly A[];
}

/** Also accepts null; the default is the inner spec's default, or null when it has none. */
export function nullable<T>(inner: FieldSpec<T>): FieldSpec<T | null> {
  const accepts = inner.accepts === undefined ? undefined : `${inner.accepts} | null`;
  return field((raw) => (raw === null ? null : inner.parse(raw)), inner.default === undefined ? null : inner.default, accepts);
}

/** The same field (aliases and all) with another default. */
export function withDefault<F extends FieldSpec<unknown>>(spec: F, defaultValue: ValueOf<F>): F {
  return { ...spec, default: defaultValue };
}

/** A config's spec table: one field spec per camelCase field name. */
export type FieldSpecs = Readonly<Record<string, FieldSpec<unknown>>>;

/**
 * The spec table with other defaults for some fields (how config variants such as MAREINFORCEConfig differ from their
 * parent). Its type is the parent's, so each field keeps its doc comment.
 */
export function withDefaults<S extends FieldSpecs>(specs: S, defaults: { readonly [K in keyof S]?: ValueOf<S[K]> }): S {
  const changed = Object.entries(defaults).map(([name, value]) => [name, withDefault(specs[name]!, value)]);
  return { ...specs, ...Object.fromEntries(changed) };
}

/** Some fields of a spec table, doc comments and all, for a config that shares them without the rest of their group. */
export function pickFields<S extends FieldSpecs, K extends keyof S>(specs: S, ...names: K[]): Pick<S, K> {
  return Object.fromEntries(names.map((name) => [name, specs[name]])) as Pick<S, K>;
}

/** The value a field spec produces. */
export type ValueOf<F> = F extends FieldSpec<infer T> ? T : never;

/** The values a spec table produces, one per field. */
export type ValuesOf<S extends FieldSpecs> = { -readonly [K in keyof S]: ValueOf<S[K]> };

/**
 * The config a spec table builds, so that a config is declared once, by its specs: one readonly property per field,
 * carrying the doc comment written on the field's spec, typed as the field's value, or as `Resolved` types it for the
 * fields a builder's cross-field rules settle (a null default that takes another field's value). Each public config
 * type is an interface extending this, which TypeDoc and the docs generator read field by field.
 */
export type ConfigOf<S extends FieldSpecs, Resolved extends { readonly [K in keyof S]?: unknown } = Record<never, never>> = {
  readonly [K in keyof S]: K extends keyof Resolved ? Resolved[K] : ValueOf<S[K]>;
};

/** A camelCase field name as CoMLRL's config files spell it (camelToSnake at the type level). */
export type SnakeCase<Name extends string, Done extends string = ""> = Name extends `${infer Head}${infer Rest}`
  ? SnakeCase<Rest, `${Done}${Head extends Lowercase<Head> ? Head : `_${Lowercase<Head>}`}`>
  : Done;

/** The values a field accepts: those it produces and its aliases (the alias "null" also as null, as oneOf reads it). */
export type InputOf<F> = ValueOf<F> | (F extends Aliased<infer A> ? A | (A extends "null" ? null : never) : never);

/**
 * What a config builder accepts: any subset of the fields, each under its camelCase name or its snake_case twin (the
 * keys of CoMLRL's config files), with the values the fields' specs accept; undefined means not given.
 */
export type ConfigInput<S extends FieldSpecs> = { readonly [K in keyof S]?: InputOf<S[K]> } & {
  readonly [K in keyof S & string as SnakeCase<K>]?: InputOf<S[K]>;
};

/** Rejects a field's value from a cross-field rule; reason reads after the field name ("must be set when …"). */
export type Fail<S extends FieldSpecs> = (field: keyof S & string, reason: string) => never;

export interface BuildOptions<S extends FieldSpecs, R> {
  /** Names the config in messages: "MAGRPOConfig.numGenerations must be ≥ 2, got 1". */
  readonly configName: string;
  /** Where the input came from (a file path), prefixed to messages. */
  readonly source?: string;
  /** Cross-field rules and derived values, run once every field on its own is valid. */
  readonly finish?: (values: ValuesOf<S>, fail: Fail<S>) => R;
}

export function camelToSnake(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/**
 * Reads input against specs: each key is a field's camelCase name or its snake_case twin; unknown keys, both spellings
 * of one field, and invalid values are errors; absent fields take their defaults. Returns a frozen plain object.
 */
export function buildConfig<S extends FieldSpecs, R = ValuesOf<S>>(
  specs: S,
  input: unknown,
  options: BuildOptions<S, R>,
): Readonly<R> {
  const { configName, source } = options;
  const prefix = source === undefined ? "" : `${source}: `;
  if (input === undefined) input = {};
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    throw new ConfigError(`${prefix}${configName} must be built from an object of fields, got ${show(input)}`);
  }

  const spelledAs = readKeys(specs, input as Record<string, unknown>, configName, prefix);
  const name = (field: string): string => {
    const key = spelledAs.get(field);
    return key === undefined || key === field ? `${configName}.${field}` : `${configName}.${field} (${key})`;
  };

  const values: Record<string, unknown> = {};
  for (const [field, spec] of Object.entries(specs)) {
    const key = spelledAs.get(field);
    const raw = key === undefined ? undefined : (input as Record<string, unknown>)[key];
    if (raw === undefined) {
      if (spec.default === undefined) throw new ConfigError(`${prefix}${name(field)} is required`, field);
      values[field] = spec.default;
      continue;
    }
    try {
      values[field] = spec.parse(raw);
    } catch (error) {
      if (!(error instanceof FieldProblem)) throw error;
      // The value shown as written but with its secrets masked: a key, a key header, a URL's user info.
      const shown = show(redactSecrets({ [key!]: raw })[key!]);
      throw new ConfigError(scrubSecrets(`${prefix}${name(field)} ${error.message}, got ${shown}`, secretValues(input)), field);
    }
  }

  const fail: Fail<S> = (field, reason) => {
    throw new ConfigError(scrubSecrets(`${prefix}${name(field)} ${reason}`, secretValues(input)), field);
  };
  const result = options.finish ? options.finish(values as ValuesOf<S>, fail) : values;
  return Object.freeze(result) as Readonly<R>;
}

/**
 * A field's value as buildConfig would read it from input (under either spelling), or its default when absent;
 * undefined when the value is invalid, which building the config then refuses by name. For the one field a trainer
 * must know before it builds its config (whether a preference trainer's agents count its roles).
 */
export function fieldValue<S extends FieldSpecs, K extends keyof S & string>(specs: S, input: unknown, name: K): ValueOf<S[K]> | undefined {
  const fields = (typeof input === "object" && input !== null ? input : {}) as Record<string, unknown>;
  const raw = fields[name] !== undefined ? fields[name] : fields[camelToSnake(name)];
  const spec = specs[name] as FieldSpec<ValueOf<S[K]>>;
  if (raw === undefined) return spec.default;
  try {
    return spec.parse(raw);
  } catch (error) {
    if (error instanceof FieldProblem) return undefined;
    throw error;
  }
}

/** A CoMLRL field that comlrl does not take: the value that means what comlrl always does, and why no other can be taken. */
export interface UnsupportedField {
  /** CoMLRL's default, which is what comlrl does without the field; a config file that sets this value loads (the field is reported as having no effect). */
  readonly comlrlDefault: unknown;
  /** Why the field is not supported; reads after "is not supported: ". */
  readonly reason: string;
}

/** CoMLRL fields that no comlrl config has, by camelCase name: a key naming one is refused with its reason, not as an unknown field. */
export const UNSUPPORTED_FIELDS: Readonly<Record<string, UnsupportedField>> = {
  evalBatchSize: {
    comlrlDefault: 1,
    reason: "evaluation runs its items one at a time, as CoMLRL 1.4.3 does with its default of 1; remove the field",
  },
};

/** Maps each field the user set to the key they spelled it with, rejecting unknown keys and doubled spellings. */
function readKeys(
  specs: FieldSpecs,
  input: Record<string, unknown>,
  configName: string,
  prefix: string,
): Map<string, string> {
  const fields = Object.keys(specs);
  const bySnake = new Map(fields.map((f) => [camelToSnake(f), f]));
  const spelledAs = new Map<string, string>();
  const unknown: string[] = [];
  for (const [key, raw] of Object.entries(input)) {
    // TypeScript callers spread optional values; an undefined field means "not given", as an absent one does.
    if (raw === undefined) continue;
    const field = Object.hasOwn(specs, key) ? key : bySnake.get(key);
    if (field === undefined) {
      const unsupported = unsupportedField(key);
      if (unsupported !== undefined) {
        const spelled = unsupported === key ? key : `${unsupported} (${key})`;
        throw new ConfigError(`${prefix}${configName}.${spelled} is not supported: ${UNSUPPORTED_FIELDS[unsupported]!.reason}`, unsupported);
      }
      unknown.push(key);
      continue;
    }
    const earlier = spelledAs.get(field);
    if (earlier !== undefined) {
      throw new ConfigError(`${prefix}${configName}.${field} is given twice, as "${earlier}" and "${key}"; keep one`, field);
    }
    spelledAs.set(field, key);
  }
  if (unknown.length > 0) {
    const described = unknown.map((key) => {
      const guess = closestField(key, fields);
      return guess === undefined ? `"${key}"` : `"${key}" (did you mean "${guess}"?)`;
    });
    throw new ConfigError(`${prefix}${configName} has no field ${described.join(", ")}`, unknown[0]);
  }
  return spelledAs;
}

/** The camelCase name of the unsupported CoMLRL field a key spells (either way), if it spells one. */
export function unsupportedField(key: string): string | undefined {
  return Object.keys(UNSUPPORTED_FIELDS).find((field) => key === field || key === camelToSnake(field));
}

/** The known field nearest to a mistyped key, in the key's own spelling style; undefined when nothing is close. */
export function closestField(key: string, fields: readonly string[]): string | undefined {
  const squash = (s: string) => s.replaceAll("_", "").toLowerCase();
  const wanted = squash(key);
  let best: { field: string; distance: number } | undefined;
  for (const field of fields) {
    const candidate = squash(field);
    // A key that is part of a field name (or the reverse) is usually an old or shortened name for it, e.g.
    // CoMLRL ≤1.2's termination_threshold for early_termination_threshold.
    const contained = Math.min(wanted.length, candidate.length) >= 4 && (candidate.includes(wanted) || wanted.includes(candidate));
    const distance = contained ? 0.5 : editDistance(wanted, candidate);
    if (best === undefined || distance < best.distance) best = { field, distance };
  }
  if (best === undefined || best.distance > Math.max(2, Math.floor(wanted.length / 3))) return undefined;
  return key.includes("_") ? camelToSnake(best.field) : best.field;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** A user's value as it would appear in their config file. */
export function show(value: unknown): string {
  if (value === undefined) return "undefined";
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
