// Line charts as self-contained SVG text: learning curves in reports and run directories, viewable in any browser
// and embeddable in HTML (W&B's Html panels) without a plotting library or a display.
import path from "node:path";
import { writeFileAtomic } from "../util/atomic.js";
import { makeDirs } from "../util/make-dirs.js";

/** One line of a chart: its legend name and its [x, y] points. */
export interface LineSeries {
  /** The legend entry. */
  name: string;
  /** The line's [x, y] points, in drawing order. */
  points: [number, number][];
}

/** A dashed horizontal line for a level worth comparing against ("random policy", "task max"). */
export interface ReferenceLine {
  /** The level, in the y axis' units. */
  y: number;
  /** The text shown beside the line. */
  label: string;
}

/** A chart's title, axis labels, size in pixels, y range and reference lines. */
export interface LineChartOptions {
  /** The heading above the plot. */
  title: string;
  /** The x axis' label. */
  xLabel: string;
  /** The y axis' label. */
  yLabel: string;
  /** Width in pixels (default 640). */
  width?: number;
  /** Height in pixels (default 400). */
  height?: number;
  /** Fix an end of the y axis; by default both ends are the nice round values around the data and references. */
  yMin?: number;
  /** Fix the top of the y axis; see yMin. */
  yMax?: number;
  /** Dashed horizontal lines to compare against. */
  references?: ReferenceLine[];
}

// Tableau 10: distinguishable for most colour-blind readers.
const COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
const MARGIN = { top: 40, right: 20, bottom: 52, left: 68 };
const TARGET_TICKS = 5;

function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&${{ "&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos" }[c]};`);
}

// Two decimals of a pixel are invisible; more only bloat the file.
function px(value: number): number {
  return Math.round(value * 100) / 100;
}

/** The 1, 2 or 5 × 10^k step that divides [min, max] into about `target` intervals. */
function niceStep(min: number, max: number, target: number): number {
  const raw = (max - min) / target;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const fraction = raw / magnitude;
  return (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * magnitude;
}

/**
 * Round tick values covering [min, max], and the round bounds they span. A zero-width range (one point, a constant
 * series) is widened around its value so it still gets an axis.
 */
export function niceTicks(min: number, max: number, target = TARGET_TICKS): { lo: number; hi: number; step: number; ticks: number[] } {
  if (min === max) {
    const pad = min === 0 ? 1 : Math.abs(min) * 0.1;
    min -= pad;
    max += pad;
  }
  const step = niceStep(min, max, target);
  const decimals = Math.max(0, -Math.floor(Math.log10(step)));
  const round = (v: number) => Number(v.toFixed(decimals));
  const lo = round(Math.floor(min / step) * step);
  const hi = round(Math.ceil(max / step) * step);
  const ticks: number[] = [];
  for (let i = 0; lo + i * step <= hi + step / 2; i++) ticks.push(round(lo + i * step));
  return { lo, hi, step, ticks };
}

/**
 * Labels for one axis's ticks: plain decimals, or all in k / M once the largest reaches 10 000 (5k, 10k, 15k rather
 * than 5000, 10k, 15k), with as many decimals as the step needs; zero stays "0" in any unit.
 */
export function formatTicks(ticks: number[], step: number): string[] {
  const largest = Math.max(0, ...ticks.map(Math.abs));
  const [divisor, suffix] = largest >= 1e6 ? [1e6, "M"] : largest >= 1e4 ? [1e3, "k"] : [1, ""];
  // The fewest decimals that write the step exactly: 0.2 → 1, 2.5 → 1, 0.25 → 2.
  const scaled = step / divisor;
  let decimals = 0;
  while (decimals < 10 && Math.abs(Math.round(scaled * 10 ** decimals) - scaled * 10 ** decimals) > 1e-6) decimals++;
  return ticks.map((t) => (t === 0 && suffix ? "0" : `${(t / divisor).toFixed(decimals)}${suffix}`));
}

// A loop, not Math.min(...values): spreading a long run's points overflows the call stack.
function extent(values: number[]): [number, number] | null {
  if (values.length === 0) return null;
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return [min, max];
}

/** The axis range: fixed ends where given, round values around the data elsewhere. */
function axisRange(values: number[], fixedMin?: number, fixedMax?: number): { lo: number; hi: number; ticks: number[]; step: number } {
  const [dataMin, dataMax] = extent(values) ?? [0, 1];
  const from = fixedMin ?? dataMin;
  const to = fixedMax ?? dataMax;
  const nice = niceTicks(Math.min(from, to), Math.max(from, to));
  const lo = fixedMin ?? nice.lo;
  const hi = fixedMax ?? nice.hi;
  if (!(lo < hi)) throw new Error(`lineChartSvg: the y axis would run from ${lo} to ${hi}; yMin must be below yMax and the data`);
  if (fixedMin === undefined && fixedMax === undefined) return nice;
  const inner = niceTicks(lo, hi);
  return { lo, hi, step: inner.step, ticks: inner.ticks.filter((t) => t >= lo && t <= hi) };
}

export function lineChartSvg(series: LineSeries[], options: LineChartOptions): string {
  const width = options.width ?? 640;
  const height = options.height ?? 400;
  const plotWidth = width - MARGIN.left - MARGIN.right;
  const plotHeight = height - MARGIN.top - MARGIN.bottom;
  if (plotWidth < 40 || plotHeight < 40) {
    throw new Error(`lineChartSvg: ${width}×${height} leaves no room for a plot inside the axes; use at least 130×140`);
  }
  const finite = series.map((s) => ({ name: s.name, points: s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y)) }));
  const allPoints = finite.flatMap((s) => s.points);
  const references = options.references ?? [];
  const x = axisRange(allPoints.map(([vx]) => vx));
  const y = axisRange([...allPoints.map(([, vy]) => vy), ...references.map((r) => r.y)], options.yMin, options.yMax);

  const toX = (v: number) => px(MARGIN.left + ((v - x.lo) / (x.hi - x.lo)) * plotWidth);
  const toY = (v: number) => px(MARGIN.top + plotHeight - ((v - y.lo) / (y.hi - y.lo)) * plotHeight);
  const left = MARGIN.left;
  const right = MARGIN.left + plotWidth;
  const top = MARGIN.top;
  const bottom = MARGIN.top + plotHeight;
  // Same size ⇒ same plot rectangle, so charts inlined into one page may share this id without harm.
  const clipId = `comlrl-plot-${width}x${height}`;

  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
      `font-family="sans-serif" font-size="12">`,
    `<defs><clipPath id="${clipId}"><rect x="${left}" y="${top}" width="${plotWidth}" height="${plotHeight}"/></clipPath></defs>`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${px(width / 2)}" y="24" text-anchor="middle" font-size="15" font-weight="bold">${escapeXml(options.title)}</text>`,
  );

  // Grid lines and tick labels.
  const xLabels = formatTicks(x.ticks, x.step);
  x.ticks.forEach((t, i) => {
    out.push(
      `<line x1="${toX(t)}" y1="${top}" x2="${toX(t)}" y2="${bottom}" stroke="#e5e5e5"/>`,
      `<text x="${toX(t)}" y="${bottom + 16}" text-anchor="middle">${xLabels[i]}</text>`,
    );
  });
  const yLabels = formatTicks(y.ticks, y.step);
  y.ticks.forEach((t, i) => {
    out.push(
      `<line x1="${left}" y1="${toY(t)}" x2="${right}" y2="${toY(t)}" stroke="#e5e5e5"/>`,
      `<text x="${left - 6}" y="${toY(t) + 4}" text-anchor="end">${yLabels[i]}</text>`,
    );
  });
  out.push(
    `<rect x="${left}" y="${top}" width="${plotWidth}" height="${plotHeight}" fill="none" stroke="#333"/>`,
    `<text x="${px(left + plotWidth / 2)}" y="${height - 12}" text-anchor="middle">${escapeXml(options.xLabel)}</text>`,
    `<text transform="translate(16 ${px(top + plotHeight / 2)}) rotate(-90)" text-anchor="middle">${escapeXml(options.yLabel)}</text>`,
  );

  for (const ref of references) {
    if (ref.y < y.lo || ref.y > y.hi) continue;
    const lineY = toY(ref.y);
    // Labels sit above their line, except at the top edge, where that would be outside the plot.
    const labelY = lineY - top < 16 ? lineY + 14 : lineY - 4;
    out.push(
      `<line x1="${left}" y1="${lineY}" x2="${right}" y2="${lineY}" stroke="#666" stroke-dasharray="6 4"/>`,
      `<text x="${px(left + 6)}" y="${labelY}" fill="#666">${escapeXml(ref.label)}</text>`,
    );
  }

  out.push(`<g clip-path="url(#${clipId})" fill="none" stroke-width="2">`);
  finite.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    if (s.points.length === 1) {
      // A one-point polyline draws nothing; show the point itself.
      const [vx, vy] = s.points[0]!;
      out.push(`<circle cx="${toX(vx)}" cy="${toY(vy)}" r="3" fill="${color}" stroke="none"/>`);
    } else if (s.points.length > 1) {
      const coords = s.points.map(([vx, vy]) => `${toX(vx)},${toY(vy)}`).join(" ");
      out.push(`<polyline points="${coords}" stroke="${color}"/>`);
    }
  });
  out.push(`</g>`);

  // Legend in the top-right corner of the plot, on a translucent box so curves under it stay visible.
  if (series.length > 0) {
    const rowHeight = 16;
    const boxWidth = 34 + 7 * Math.max(...series.map((s) => s.name.length));
    const boxLeft = right - boxWidth - 6;
    out.push(
      `<rect x="${boxLeft}" y="${top + 6}" width="${boxWidth}" height="${series.length * rowHeight + 8}" ` +
        `fill="white" fill-opacity="0.85" stroke="#ccc"/>`,
    );
    series.forEach((s, i) => {
      const rowY = top + 6 + 4 + i * rowHeight + rowHeight / 2;
      out.push(
        `<line x1="${boxLeft + 6}" y1="${rowY}" x2="${boxLeft + 24}" y2="${rowY}" stroke="${COLORS[i % COLORS.length]}" stroke-width="2"/>`,
        `<text x="${boxLeft + 28}" y="${rowY + 4}">${escapeXml(s.name)}</text>`,
      );
    });
  }

  out.push(`</svg>`);
  return `${out.join("\n")}\n`;
}

/** Writes lineChartSvg(series, options) to file atomically, creating its directory. */
export async function writeLineChartSvg(file: string, series: LineSeries[], options: LineChartOptions): Promise<void> {
  await makeDirs(path.dirname(path.resolve(file)));
  await writeFileAtomic(file, lineChartSvg(series, options));
}
