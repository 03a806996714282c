// SVG line charts: well-formed markup (checked by a small tag-balance parser here), round tick values, and the
// degenerate inputs a short run produces (one point, a constant curve, no data).
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { formatTicks, lineChartSvg, niceTicks, writeLineChartSvg, type LineChartOptions } from "../../src/logging/svg-plot.js";
import { scratchPerTest } from "../support/scratch.js";

const scratch = scratchPerTest("comlrl-svg-");

interface Element {
  name: string;
  attributes: Record<string, string>;
}

/** Checks tags nest and close, attributes are quoted and text has no raw markup; returns the elements in order. */
function parseXml(svg: string): Element[] {
  const elements: Element[] = [];
  const open: string[] = [];
  const tag = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/g;
  let last = 0;
  for (let match = tag.exec(svg); match; match = tag.exec(svg)) {
    const text = svg.slice(last, match.index);
    expect(text, `text before <${match[2]}>`).not.toMatch(/[<>]|&(?!(amp|lt|gt|quot|apos);)/);
    last = tag.lastIndex;
    const [, closing, name, attributeText, selfClosing] = match;
    if (closing) {
      expect(open.pop(), `closing </${name}>`).toBe(name);
      continue;
    }
    const attributes = Object.fromEntries([...attributeText!.matchAll(/([\w:-]+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
    elements.push({ name: name!, attributes });
    if (!selfClosing) open.push(name!);
  }
  expect(svg.slice(last).trim()).toBe("");
  expect(open).toEqual([]);
  expect(elements[0]?.name).toBe("svg");
  return elements;
}

const options: LineChartOptions = { title: "Reward", xLabel: "env_step", yLabel: "reward" };

function texts(svg: string): string[] {
  return [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]!);
}

function finiteCoordinates(elements: Element[]): void {
  for (const element of elements) {
    for (const key of ["x", "y", "x1", "x2", "y1", "y2", "cx", "cy"]) {
      if (element.attributes[key] !== undefined) expect(Number.isFinite(Number(element.attributes[key])), `${element.name}.${key}`).toBe(true);
    }
    for (const pair of element.attributes.points?.split(" ") ?? []) {
      expect(pair).toMatch(/^-?[\d.]+,-?[\d.]+$/);
    }
  }
}

describe("niceTicks", () => {
  it("picks 1, 2 or 5 × 10^k steps and round bounds around the data", () => {
    expect(niceTicks(0, 1)).toEqual({ lo: 0, hi: 1, step: 0.2, ticks: [0, 0.2, 0.4, 0.6, 0.8, 1] });
    expect(niceTicks(3, 97)).toEqual({ lo: 0, hi: 100, step: 20, ticks: [0, 20, 40, 60, 80, 100] });
    expect(niceTicks(-0.13, 0.42).ticks).toEqual([-0.2, 0, 0.2, 0.4, 0.6]);
    expect(niceTicks(0, 7000).ticks).toEqual([0, 2000, 4000, 6000, 8000]);
  });

  it("widens a zero-width range around its value", () => {
    expect(niceTicks(0, 0)).toMatchObject({ lo: -1, hi: 1 });
    const around5 = niceTicks(5, 5);
    expect(around5.lo).toBeLessThan(5);
    expect(around5.hi).toBeGreaterThan(5);
  });

  it("labels ticks with the decimals the step needs, large axes in one compact unit", () => {
    expect(formatTicks([0, 0.1, 0.20000000000000004, 0.30000000000000004], 0.1)).toEqual(["0.0", "0.1", "0.2", "0.3"]);
    expect(formatTicks([0, 20, 40], 20)).toEqual(["0", "20", "40"]);
    expect(formatTicks([0, 5000, 10000, 15000], 5000)).toEqual(["0", "5k", "10k", "15k"]);
    expect(formatTicks([0, 2500, 5000, 7500, 10000], 2500)).toEqual(["0", "2.5k", "5.0k", "7.5k", "10.0k"]);
    expect(formatTicks([0, 500_000, 1_000_000, 1_500_000], 500_000)).toEqual(["0", "0.5M", "1.0M", "1.5M"]);
  });
});

describe("lineChartSvg", () => {
  it("draws each series with a legend entry, ticks and labels", () => {
    const svg = lineChartSvg(
      [
        { name: "MAGRPO", points: [[0, 0.1], [100, 0.4], [200, 0.6]] },
        { name: "IAC <baseline>", points: [[0, 0.2], [200, 0.3]] },
      ],
      { ...options, references: [{ y: 0.25, label: "random policy" }, { y: 1, label: "task max" }] },
    );
    const elements = parseXml(svg);
    finiteCoordinates(elements);
    expect(elements.filter((e) => e.name === "polyline")).toHaveLength(2);
    expect(texts(svg)).toEqual(expect.arrayContaining(["Reward", "env_step", "reward", "MAGRPO", "IAC &lt;baseline&gt;", "random policy", "task max"]));
    expect(texts(svg)).toEqual(expect.arrayContaining(["0", "100", "200", "0.2", "1.0"]));
    expect(elements.filter((e) => e.attributes["stroke-dasharray"])).toHaveLength(2);
    expect(elements[0]!.attributes).toMatchObject({ width: "640", height: "400", xmlns: "http://www.w3.org/2000/svg" });
  });

  it("shows a single point as a dot on a widened axis", () => {
    const svg = lineChartSvg([{ name: "only", points: [[5, 0.5]] }], options);
    const elements = parseXml(svg);
    finiteCoordinates(elements);
    expect(elements.filter((e) => e.name === "circle")).toHaveLength(1);
    expect(elements.filter((e) => e.name === "polyline")).toHaveLength(0);
  });

  it("draws a constant series as a flat line inside the plot", () => {
    const svg = lineChartSvg([{ name: "flat", points: [[0, 3], [10, 3], [20, 3]] }], { ...options, width: 300, height: 200 });
    const elements = parseXml(svg);
    finiteCoordinates(elements);
    const points = elements.find((e) => e.name === "polyline")!.attributes.points!.split(" ").map((p) => p.split(",").map(Number));
    expect(new Set(points.map(([, y]) => y)).size).toBe(1);
    const y = points[0]![1]!;
    expect(y).toBeGreaterThan(40);
    expect(y).toBeLessThan(200 - 52);
  });

  it("skips non-finite points and draws empty input as bare axes", () => {
    const svg = lineChartSvg([{ name: "gappy", points: [[0, 1], [1, Number.NaN], [2, Number.POSITIVE_INFINITY], [3, 3]] }], options);
    const drawn = parseXml(svg);
    finiteCoordinates(drawn);
    const lines = drawn.filter((e) => e.name === "polyline");
    expect(lines).toHaveLength(1);
    const points = lines[0]!.attributes.points!.split(" ").map((p) => p.split(",").map(Number));
    expect(points).toHaveLength(2);
    const [[x0, y0], [x1, y1]] = points as [[number, number], [number, number]];
    expect(x0).toBeLessThan(x1);
    // y grows downwards in SVG: the later, larger value sits higher.
    expect(y0).toBeGreaterThan(y1);
    const empty = lineChartSvg([], options);
    const elements = parseXml(empty);
    finiteCoordinates(elements);
    expect(elements.some((e) => e.name === "polyline" || e.name === "circle")).toBe(false);
  });

  it("honours fixed y bounds, dropping references outside them", () => {
    const svg = lineChartSvg([{ name: "r", points: [[0, 0.2], [1, 0.4]] }], {
      ...options,
      yMin: 0,
      yMax: 1,
      references: [{ y: 2, label: "off the chart" }],
    });
    parseXml(svg);
    expect(texts(svg)).not.toContain("off the chart");
    expect(texts(svg)).toEqual(expect.arrayContaining(["0.0", "1.0"]));
    expect(() => lineChartSvg([], { ...options, yMin: 1, yMax: 0 })).toThrow(/yMin must be below yMax/);
  });

  it("refuses a size with no room for the plot", () => {
    expect(() => lineChartSvg([], { ...options, width: 100, height: 60 })).toThrow(/100×60 leaves no room/);
  });
});

describe("writeLineChartSvg", () => {
  it("writes the chart to a new directory", async () => {
    const file = path.join(scratch(), "plots", "reward.svg");
    const series = [{ name: "a", points: [[0, 1], [1, 2]] as [number, number][] }];
    await writeLineChartSvg(file, series, options);
    expect(readFileSync(file, "utf8")).toBe(lineChartSvg(series, options));
  });
});
