// Split specs in the syntax of Hugging Face `datasets`: "train", "train[:100]", "train[16:]", "test[-5:]",
// "train[:10%]", "train[10%:20%]", and several joined with "+" ("train[:10%]+validation"). Absolute bounds may be
// negative (counted from the end); a percent applies to the split's size and is rounded to the closest row, as
// `datasets`' default "closest" rounding does (Python's round(), halves to even).

/** A split expression that is malformed, empty, or names a split the dataset lacks; the message lists the available ones. */
export class SplitError extends Error {
  /** Always "SplitError". */
  override name = "SplitError";
}

/** One part of a split spec: rows [from, to) of a split, either as row numbers or as percents of its size. */
export interface SplitSlice {
  /** The split's name ("train", "test", …). */
  readonly split: string;
  /** undefined: from the start. */
  readonly from?: number;
  /** undefined: to the end. */
  readonly to?: number;
  /** Whether from and to count rows or percent of the split. */
  readonly unit: "rows" | "%";
}

const SPLIT_NAME = String.raw`\w+(?:\.\w+)*`;
const SLICE = new RegExp(String.raw`^(${SPLIT_NAME})(?:\[(?:(-?\d+)(%)?)?:(?:(-?\d+)(%)?)?\])?$`);

/** Parses a split spec into its parts, in order. */
export function parseSplit(spec: string): SplitSlice[] {
  if (typeof spec !== "string" || spec.trim() === "") throw new SplitError(`split ${JSON.stringify(spec)} is empty`);
  return spec.split(/\s*\+\s*/).map((part) => {
    const match = SLICE.exec(part.trim());
    if (!match) {
      throw new SplitError(
        `split ${JSON.stringify(spec)}: ${JSON.stringify(part)} is not a split name with an optional slice ` +
          `(train, train[:100], train[16:], train[-5:], train[:10%], train[10%:20%])`,
      );
    }
    const [, split, from, fromPct, to, toPct] = match;
    // As in `datasets`, one percent sign makes the whole slice a percent slice.
    const unit = fromPct !== undefined || toPct !== undefined ? "%" : "rows";
    const slice: SplitSlice = { split: split!, unit, ...(from !== undefined && { from: Number(from) }), ...(to !== undefined && { to: Number(to) }) };
    if (unit === "%") {
      for (const bound of [slice.from, slice.to]) {
        if (bound !== undefined && Math.abs(bound) > 100) {
          throw new SplitError(`split ${JSON.stringify(spec)}: percent bounds must lie in [-100, 100], got ${bound}%`);
        }
      }
    }
    return slice;
  });
}

/** Python's round(): to the nearest integer, halves to the even one. */
function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const diff = x - floor;
  if (diff > 0.5) return floor + 1;
  if (diff < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** The rows [start, end) a slice selects from a split of `size` rows (end ≥ start; an empty range is possible). */
export function sliceRange(
  slice: SplitSlice,
  size: number,
): {
  /** First row (inclusive). */
  start: number;
  /** Last row (exclusive). */
  end: number;
} {
  const absolute = (bound: number | undefined, missing: number) => {
    if (bound === undefined) return missing;
    const rows = slice.unit === "%" ? roundHalfEven((bound * size) / 100) : bound;
    return Math.min(rows < 0 ? Math.max(size + rows, 0) : rows, size);
  };
  const start = absolute(slice.from, 0);
  return { start, end: Math.max(start, absolute(slice.to, size)) };
}

/** Whether the slice's end is known without the split's size (no percents, no bounds counted from the end). */
export function boundedFromStart(slice: SplitSlice): boolean {
  return slice.unit === "rows" && slice.to !== undefined && slice.to >= 0 && (slice.from ?? 0) >= 0;
}
