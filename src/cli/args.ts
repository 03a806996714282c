// Argument handling shared by the `comlrl` commands: node:util parseArgs in strict mode, --help on every command,
// and typed readers for option values. Any problem with the command line is a UsageError, which main.ts prints with
// the command's usage line and exit status 2 — before the command has done any work.
import { parseArgs, type ParseArgsConfig } from "node:util";

export class UsageError extends Error {
  /** Always "UsageError". */
  override name = "UsageError";
}

type OptionSpecs = NonNullable<ParseArgsConfig["options"]>;
export type OptionValues = Record<string, string | boolean | undefined>;

export interface Command {
  name: string;
  /** The usage text: the first line is the synopsis, the rest describes the options. */
  usage: string;
  options: OptionSpecs;
  /** Everything from the first argument that is not an option on is another program's command line (launch). */
  passthrough?: boolean;
  /**
   * Validates the parsed option values and runs the command (validation first: a UsageError must precede any work).
   * Resolves to the exit status when it is not 0. `rest` is the passthrough command line.
   */
  run(values: OptionValues, rest: string[]): Promise<number | void>;
}

/** The command's own arguments and, for a passthrough command, the command line after them. */
export function splitPassthrough(command: Command, argv: string[]): [string[], string[]] {
  if (!command.passthrough) return [argv, []];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") return [argv.slice(0, i), argv.slice(i + 1)];
    if (!arg.startsWith("-")) return [argv.slice(0, i), argv.slice(i)];
    const spec = command.options[arg.replace(/^--?/, "")];
    if (spec?.type === "string" && !arg.includes("=")) i++;
  }
  return [argv, []];
}

/** The command's option values, or null when --help / -h was given. Unknown options and missing values are UsageErrors. */
export function parseCommandArgs(command: Command, argv: string[]): OptionValues | null {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { ...command.options, help: { type: "boolean", short: "h" } }, strict: true, allowPositionals: false });
  } catch (error) {
    // parseArgs words its errors for the command line already ("Unknown option '--bogus'").
    throw new UsageError((error as Error).message.replace(/\. To specify an option argument starting with a dash use.*$/s, ""));
  }
  if (parsed.values.help) return null;
  return parsed.values as OptionValues;
}

/** An integer option's value (undefined when absent), at least `min`. */
export function integerOption(values: OptionValues, name: string, min: number): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  const value = typeof raw === "string" && /^-?\d+$/.test(raw.trim()) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min) throw new UsageError(`--${name} must be an integer ≥ ${min}, got ${JSON.stringify(raw)}`);
  return value;
}

/** A string option's value (undefined when absent); an empty value is a UsageError. */
export function stringOption(values: OptionValues, name: string): string | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  if (typeof raw !== "string" || raw.trim() === "") throw new UsageError(`--${name} needs a value`);
  return raw;
}

/** An error as one or more lines for the terminal: its message and its causes, no stack (COMLRL_DEBUG=1 adds it). */
export function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (process.env.COMLRL_DEBUG === "1") return error.stack ?? error.message;
  const lines = [error.message];
  let cause = error.cause;
  while (cause instanceof Error) {
    const message = cause.message;
    // hub and loader errors already quote their cause's message; say it once.
    if (!lines.some((line) => line.includes(message))) lines.push(`  caused by: ${message}`);
    cause = cause.cause;
  }
  return lines.join("\n");
}
