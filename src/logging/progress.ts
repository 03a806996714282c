// Console progress for long runs. On a terminal: one line redrawn in place,
//   label [#####.....] 37/100 37% | 12.3 steps/s | ETA 1m05s | reward 0.42
// Elsewhere (CI logs, pipes, files) carriage returns would pile up into one unreadable line, so the same text is
// printed as ordinary lines, only when another tenth of the work is done or enough time has passed since the last.

/** Where progress goes: process.stderr by default; anything with write() (isTTY decides the mode). */
export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/** Named values shown after the progress bar (loss, reward, …). */
export type ProgressFields = Record<string, number | string>;

export interface ProgressBarOptions {
  total: number;
  label?: string;
  /** What is counted, for the rate ("steps" → "12.3 steps/s"). */
  unit?: string;
  /** Work already done when the bar starts (a resumed run): the rate and ETA count only work done since. */
  start?: number;
  /** Print nothing at all, not even log() messages. */
  quiet?: boolean;
  stream?: ProgressStream;
  /** Off a terminal, the longest silence between lines while work is progressing. Default 30. */
  plainIntervalSeconds?: number;
  /** Clock in milliseconds; tests pass a fake one. */
  now?: () => number;
}

const BAR_WIDTH = 20;
// Redrawing faster than the eye can follow only costs terminal bandwidth.
const MIN_REDRAW_MS = 100;
const CLEAR_LINE = "\r\x1b[K";

/** 45s, 1m05s, 2h03m, 3d04h; "?" when unknown. */
export function formatDuration(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds) || seconds < 0) return "?";
  const s = Math.round(seconds);
  const pad = (n: number) => String(n).padStart(2, "0");
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86400)}d${pad(Math.floor((s % 86400) / 3600))}h`;
}

/** Three significant digits below 100, whole numbers from there (no 1.23e+3): 0.42, 12.3, 1235, 1.5e-7. */
export function formatNumber(value: number): string {
  if (Number.isInteger(value) || !Number.isFinite(value)) return String(value);
  if (Math.abs(value) >= 100) return String(Math.round(value));
  return String(Number(value.toPrecision(3)));
}

/** Work per second since the bar started, or null before any time has passed. */
export function progressRate(done: number, start: number, elapsedSeconds: number): number | null {
  return elapsedSeconds > 0 ? (done - start) / elapsedSeconds : null;
}

/** Seconds left at the current rate, or null while there is no rate to extrapolate. */
export function etaSeconds(done: number, total: number, rate: number | null): number | null {
  if (done >= total) return 0;
  if (rate === null || rate <= 0) return null;
  return (total - done) / rate;
}

export function formatProgressLine(state: {
  label: string;
  done: number;
  total: number;
  unit: string;
  rate: number | null;
  eta: number | null;
  fields: ProgressFields;
}): string {
  const fraction = state.total > 0 ? Math.min(1, Math.max(0, state.done / state.total)) : 1;
  const filled = Math.round(fraction * BAR_WIDTH);
  const bar = `[${"#".repeat(filled)}${".".repeat(BAR_WIDTH - filled)}]`;
  const rate = state.rate === null ? `? ${state.unit}/s` : `${formatNumber(state.rate)} ${state.unit}/s`;
  const parts = [
    `${state.label ? `${state.label} ` : ""}${bar} ${state.done}/${state.total} ${Math.floor(fraction * 100)}%`,
    rate,
    `ETA ${formatDuration(state.eta)}`,
    ...Object.entries(state.fields).map(([key, value]) => `${key} ${typeof value === "number" ? formatNumber(value) : value}`),
  ];
  return parts.join(" | ");
}

export class ProgressBar {
  private total: number;
  private readonly label: string;
  private readonly unit: string;
  private readonly start: number;
  private readonly quiet: boolean;
  private readonly stream: ProgressStream;
  private readonly plainIntervalMs: number;
  private readonly now: () => number;
  private readonly startedAt: number;

  private done: number;
  private fields: ProgressFields = {};
  private lastDrawAt = -Infinity;
  private lastPrintedTenth = -1;
  private lastPrintedDone: number | null = null;
  private drawn = false;
  private finished = false;

  constructor(options: ProgressBarOptions) {
    if (!Number.isFinite(options.total) || options.total < 0) {
      throw new Error(`ProgressBar: total must be a non-negative number, got ${options.total}`);
    }
    this.total = options.total;
    this.label = options.label ?? "";
    this.unit = options.unit ?? "steps";
    this.start = options.start ?? 0;
    this.quiet = options.quiet ?? false;
    this.stream = options.stream ?? process.stderr;
    this.plainIntervalMs = (options.plainIntervalSeconds ?? 30) * 1000;
    this.now = options.now ?? Date.now;
    this.startedAt = this.now();
    this.done = this.start;
  }

  private get isTTY(): boolean {
    return this.stream.isTTY === true;
  }

  private line(): string {
    const rate = progressRate(this.done, this.start, (this.now() - this.startedAt) / 1000);
    return formatProgressLine({
      label: this.label,
      done: this.done,
      total: this.total,
      unit: this.unit,
      rate,
      eta: etaSeconds(this.done, this.total, rate),
      fields: this.fields,
    });
  }

  private redraw(): void {
    const line = this.line();
    // A line wider than the terminal wraps, and "\r" then returns only to the start of the last row.
    const width = this.stream.columns;
    this.stream.write(CLEAR_LINE + (width && line.length >= width ? line.slice(0, width - 1) : line));
    this.drawn = true;
    this.lastDrawAt = this.now();
  }

  private printPlain(): void {
    this.stream.write(`${this.line()}\n`);
    this.lastDrawAt = this.now();
    this.lastPrintedDone = this.done;
    this.lastPrintedTenth = this.tenth();
  }

  private tenth(): number {
    return this.total > 0 ? Math.floor((this.done / this.total) * 10) : 10;
  }

  /**
   * Records progress (done counts from 0, not from `start`) and the fields shown after the ETA; `total` replaces the
   * total when the work turned out larger or smaller (a stage whose length is known only once an earlier one ran).
   */
  update(done: number, fields?: ProgressFields, total?: number): void {
    this.done = done;
    if (total !== undefined) this.total = total;
    if (fields) this.fields = { ...fields };
    if (this.quiet || this.finished) return;
    const sinceDraw = this.now() - this.lastDrawAt;
    if (this.isTTY) {
      if (sinceDraw >= MIN_REDRAW_MS) this.redraw();
    } else if (this.tenth() > this.lastPrintedTenth || sinceDraw >= this.plainIntervalMs) {
      this.printPlain();
    }
  }

  /** Prints message on its own line; on a terminal the bar is cleared first and redrawn below it. */
  log(message: string): void {
    if (this.quiet) return;
    if (this.isTTY && this.drawn && !this.finished) {
      this.stream.write(`${CLEAR_LINE}${message}\n`);
      this.redraw();
    } else {
      this.stream.write(`${message}\n`);
    }
  }

  /** Shows the final state and ends the line. Later updates print nothing; finishing twice is harmless. */
  finish(): void {
    if (this.quiet || this.finished) return;
    this.finished = true;
    if (this.isTTY) {
      this.redraw();
      this.stream.write("\n");
    } else if (this.lastPrintedDone !== this.done) {
      this.printPlain();
    }
  }
}
