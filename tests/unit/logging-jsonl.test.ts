// metrics.jsonl: line format, crash tolerance on read, and repair of a torn last line when a run is resumed.
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { JsonlMetricsWriter, readJsonlMetrics } from "../../src/logging/jsonl.js";

let scratch: string;
beforeEach(() => {
  scratch = mkdtempSync(path.join(tmpdir(), "comlrl-jsonl-"));
});
afterEach(() => {
  rmSync(scratch, { recursive: true, force: true });
});

describe("JsonlMetricsWriter", () => {
  it("writes one object per line with step, time and kind first", () => {
    const file = path.join(scratch, "nested", "metrics.jsonl");
    const writer = new JsonlMetricsWriter(file);
    writer.write("train", 4, { "turn_1/reward_mean": 0.5 });
    writer.write("eval", 8, { "eval/turn_1/reward_mean": 0.75, note: "ok" });
    writer.close();

    const lines = readFileSync(file, "utf8").split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[2]).toBe("");
    const first = JSON.parse(lines[0]!);
    expect(Object.keys(first)).toEqual(["step", "time", "kind", "turn_1/reward_mean"]);
    expect(first.step).toBe(4);
    expect(first.kind).toBe("train");
    expect(new Date(first.time).toISOString()).toBe(first.time);
    expect(JSON.parse(lines[1]!)).toMatchObject({ step: 8, kind: "eval", "eval/turn_1/reward_mean": 0.75, note: "ok" });
  });

  it("keeps every line on disk before close, as a crashed process would leave it", () => {
    const file = path.join(scratch, "metrics.jsonl");
    const writer = new JsonlMetricsWriter(file);
    writer.write("train", 1, { a: 1 });
    writer.write("train", 2, { a: 2 });
    expect(readJsonlMetrics(file).map((r) => r.a)).toEqual([1, 2]);
    writer.close();
  });

  it("writes NaN and infinities as strings instead of null", () => {
    const file = path.join(scratch, "metrics.jsonl");
    const writer = new JsonlMetricsWriter(file);
    writer.write("train", 0, { loss: Number.NaN, up: Infinity, down: -Infinity });
    writer.close();
    expect(readJsonlMetrics(file)[0]).toMatchObject({ loss: "NaN", up: "Infinity", down: "-Infinity" });
  });

  it("appends to an existing file, dropping a partial last line a crash left behind", () => {
    const file = path.join(scratch, "metrics.jsonl");
    writeFileSync(file, `{"step":1,"time":"t","kind":"train","a":1}\n{"step":2,"ti`);
    const writer = new JsonlMetricsWriter(file);
    writer.write("train", 3, { a: 3 });
    writer.close();
    expect(readFileSync(file, "utf8").split("\n")).toHaveLength(3);
    expect(readJsonlMetrics(file).map((r) => r.step)).toEqual([1, 3]);
  });

  it("empties a file whose only line is partial", () => {
    const file = path.join(scratch, "metrics.jsonl");
    writeFileSync(file, `{"step":1,`);
    new JsonlMetricsWriter(file).close();
    expect(readFileSync(file, "utf8")).toBe("");
  });

  it("rejects reserved field names, bad steps and writes after close, naming the problem", () => {
    const file = path.join(scratch, "metrics.jsonl");
    const writer = new JsonlMetricsWriter(file);
    expect(() => writer.write("train", 1, { step: 5 })).toThrow(/"step" is reserved/);
    expect(() => writer.write("train", -1, {})).toThrow(/step must be a non-negative integer, got -1/);
    expect(() => writer.write("train", 1.5, {})).toThrow(/got 1\.5/);
    writer.close();
    writer.close();
    expect(() => writer.write("train", 1, {})).toThrow(/metrics\.jsonl is closed/);
  });
});

describe("readJsonlMetrics", () => {
  it("drops a truncated last line", () => {
    const file = path.join(scratch, "metrics.jsonl");
    writeFileSync(file, `{"step":1,"kind":"train"}\n{"step":2,"kind":"train"}\n{"step":3,"kin`);
    expect(readJsonlMetrics(file).map((r) => r.step)).toEqual([1, 2]);
  });

  it("keeps a complete last line that lost only its newline", () => {
    const file = path.join(scratch, "metrics.jsonl");
    writeFileSync(file, `{"step":1}\n{"step":2}`);
    expect(readJsonlMetrics(file).map((r) => r.step)).toEqual([1, 2]);
  });

  it("reports a corrupt line in the middle with file and line number", () => {
    const file = path.join(scratch, "metrics.jsonl");
    writeFileSync(file, `{"step":1}\nnot json\n{"step":3}\n`);
    expect(() => readJsonlMetrics(file)).toThrow(/metrics\.jsonl line 2 is not valid JSON/);
  });

  it("rejects a line that is JSON but not a record", () => {
    const file = path.join(scratch, "metrics.jsonl");
    appendFileSync(file, `[1,2]\n`);
    expect(() => readJsonlMetrics(file)).toThrow(/line 1 is not a metrics record/);
  });

  it("reads an empty file as no records", () => {
    const file = path.join(scratch, "metrics.jsonl");
    writeFileSync(file, "");
    expect(readJsonlMetrics(file)).toEqual([]);
  });
});
