// Console progress: the pure formatting helpers, and what a terminal and a log file each receive, on a fake clock.
import { describe, expect, it } from "vitest";
import {
  etaSeconds,
  formatDuration,
  formatNumber,
  formatProgressLine,
  ProgressBar,
  progressRate,
  type ProgressStream,
} from "../../src/logging/progress.js";

describe("formatDuration", () => {
  it("picks the two most useful units", () => {
    expect(formatDuration(0)).toBe("0s");
    expect(formatDuration(44.6)).toBe("45s");
    expect(formatDuration(65)).toBe("1m05s");
    expect(formatDuration(3599)).toBe("59m59s");
    expect(formatDuration(3600)).toBe("1h00m");
    expect(formatDuration(2 * 3600 + 3 * 60 + 59)).toBe("2h03m");
    expect(formatDuration(3 * 86400 + 4 * 3600)).toBe("3d04h");
  });

  it("shows ? for unknown durations", () => {
    expect(formatDuration(null)).toBe("?");
    expect(formatDuration(Infinity)).toBe("?");
    expect(formatDuration(Number.NaN)).toBe("?");
    expect(formatDuration(-1)).toBe("?");
  });
});

describe("formatNumber", () => {
  it("keeps three significant digits, and whole numbers from 100 up", () => {
    expect(formatNumber(0.42)).toBe("0.42");
    expect(formatNumber(0.421337)).toBe("0.421");
    expect(formatNumber(12.345)).toBe("12.3");
    expect(formatNumber(1234)).toBe("1234");
    expect(formatNumber(1234.5)).toBe("1235");
    expect(formatNumber(123.4)).toBe("123");
    expect(formatNumber(0.00001234)).toBe("0.0000123");
    expect(formatNumber(-0.5)).toBe("-0.5");
    expect(formatNumber(Number.NaN)).toBe("NaN");
  });
});

describe("rate and ETA", () => {
  it("counts only work done since the bar started", () => {
    expect(progressRate(30, 10, 4)).toBe(5);
    expect(progressRate(30, 10, 0)).toBeNull();
  });

  it("extrapolates the remaining work", () => {
    expect(etaSeconds(37, 100, 12.6)).toBeCloseTo(5);
    expect(etaSeconds(100, 100, null)).toBe(0);
    expect(etaSeconds(10, 100, null)).toBeNull();
    expect(etaSeconds(10, 100, 0)).toBeNull();
  });
});

describe("formatProgressLine", () => {
  it("lays out label, bar, counts, rate, ETA and fields", () => {
    const line = formatProgressLine({
      label: "train",
      done: 37,
      total: 100,
      unit: "steps",
      rate: 12.3,
      eta: 65,
      fields: { reward: 0.42, phase: "rollout" },
    });
    expect(line).toBe("train [#######.............] 37/100 37% | 12.3 steps/s | ETA 1m05s | reward 0.42 | phase rollout");
  });

  it("copes with no rate yet and an empty total", () => {
    const line = formatProgressLine({ label: "", done: 0, total: 0, unit: "it", rate: null, eta: null, fields: {} });
    expect(line).toBe("[####################] 0/0 100% | ? it/s | ETA ?");
  });
});

class FakeStream implements ProgressStream {
  text = "";
  constructor(
    readonly isTTY: boolean,
    readonly columns?: number,
  ) {}
  write(chunk: string): boolean {
    this.text += chunk;
    return true;
  }
}

function fakeClock(): { now: () => number; advance: (seconds: number) => void } {
  let ms = 1_000_000;
  return { now: () => ms, advance: (seconds) => (ms += seconds * 1000) };
}

describe("ProgressBar on a terminal", () => {
  it("redraws one line in place and ends it on finish", () => {
    const stream = new FakeStream(true);
    const clock = fakeClock();
    const bar = new ProgressBar({ total: 100, label: "train", stream, now: clock.now });
    clock.advance(2);
    bar.update(25, { reward: 0.5 });
    clock.advance(2);
    bar.update(50, { reward: 0.75 });
    bar.finish();
    const frames = stream.text.split("\r\x1b[K").filter(Boolean);
    expect(frames[0]).toBe("train [#####...............] 25/100 25% | 12.5 steps/s | ETA 6s | reward 0.5");
    expect(frames[1]).toBe("train [##########..........] 50/100 50% | 12.5 steps/s | ETA 4s | reward 0.75");
    expect(frames.at(-1)!.endsWith("\n")).toBe(true);
    expect(stream.text.split("\n")).toHaveLength(2);
  });

  it("throttles redraws that come faster than the eye can follow", () => {
    const stream = new FakeStream(true);
    const clock = fakeClock();
    const bar = new ProgressBar({ total: 1000, stream, now: clock.now });
    bar.update(1);
    bar.update(2);
    bar.update(3);
    expect(stream.text.split("\r").filter(Boolean)).toHaveLength(1);
    clock.advance(0.2);
    bar.update(4);
    expect(stream.text.split("\r").filter(Boolean)).toHaveLength(2);
  });

  it("prints log messages above the bar and redraws it", () => {
    const stream = new FakeStream(true);
    const clock = fakeClock();
    const bar = new ProgressBar({ total: 10, label: "eval", stream, now: clock.now });
    bar.update(3);
    bar.log("checkpoint saved");
    expect(stream.text).toMatch(/\r\x1b\[Kcheckpoint saved\n\r\x1b\[Keval \[######/);
  });

  it("cuts the line to the terminal width so it never wraps", () => {
    const stream = new FakeStream(true, 30);
    const bar = new ProgressBar({ total: 10, label: "a-long-label", stream, now: fakeClock().now });
    bar.update(1, { reward: 1 });
    expect(stream.text.replace("\r\x1b[K", "")).toHaveLength(29);
  });
});

describe("ProgressBar off a terminal", () => {
  it("prints plain lines at each new tenth and after long silences, never carriage returns", () => {
    const stream = new FakeStream(false);
    const clock = fakeClock();
    const bar = new ProgressBar({ total: 100, label: "train", stream, now: clock.now, plainIntervalSeconds: 60 });
    for (let done = 1; done <= 25; done++) {
      clock.advance(1);
      bar.update(done);
    }
    // Tenths 0, 1 and 2 were reached: done = 1, 10 and 20.
    expect(stream.text.split("\n").filter(Boolean).map((l) => l.split(" ")[2])).toEqual(["1/100", "10/100", "20/100"]);
    clock.advance(61);
    bar.update(26);
    expect(stream.text).toContain("26/100");
    bar.finish();
    bar.finish();
    expect(stream.text).not.toContain("\r");
    // finish adds nothing when the last printed line is current.
    expect(stream.text.split("\n").filter(Boolean)).toHaveLength(4);
  });

  it("prints the final state on finish", () => {
    const stream = new FakeStream(false);
    const clock = fakeClock();
    const bar = new ProgressBar({ total: 100, stream, now: clock.now });
    bar.update(1);
    clock.advance(1);
    bar.update(5);
    bar.finish();
    expect(stream.text.trim().split("\n").at(-1)).toContain("5/100");
    bar.log("done");
    expect(stream.text.endsWith("done\n")).toBe(true);
  });

  it("takes a new total given with an update (work whose size became known on the way)", () => {
    const stream = new FakeStream(false);
    const clock = fakeClock();
    const bar = new ProgressBar({ total: 10, stream, now: clock.now });
    clock.advance(1);
    bar.update(5, {}, 20);
    expect(stream.text).toContain("5/20 25% | 5 steps/s | ETA 3s");
  });

  it("measures the rate from the resumed position", () => {
    const stream = new FakeStream(false);
    const clock = fakeClock();
    const bar = new ProgressBar({ total: 100, start: 50, stream, now: clock.now });
    clock.advance(10);
    bar.update(60);
    expect(stream.text).toContain("60/100 60% | 1 steps/s | ETA 40s");
  });
});

describe("ProgressBar quiet", () => {
  it("prints nothing at all", () => {
    const stream = new FakeStream(true);
    const bar = new ProgressBar({ total: 10, quiet: true, stream });
    bar.update(5, { reward: 1 });
    bar.log("message");
    bar.finish();
    expect(stream.text).toBe("");
  });

  it("rejects a bad total", () => {
    expect(() => new ProgressBar({ total: -1 })).toThrow(/total must be a non-negative number, got -1/);
  });
});
