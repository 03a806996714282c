// MetricsLogger with TensorBoard on and W&B off: what each sink receives, the spec's train rate limit, eval prefixes,
// sample tables, and the state a checkpoint carries. (W&B through the facade is covered in logging-wandb.test.ts.)
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { MetricsLogger, samplesMarkdown, shouldLogTrain, type SampleRow } from "../../src/logging/metrics-logger.js";
import { scratchPerTest } from "../support/scratch.js";
import { illTyped } from "../support/ill-typed.js";

const scratch = scratchPerTest("comlrl-metrics-");

// TensorBoard summaries as (step, tag, scalar or text) — a minimal reader; logging-tensorboard.test.ts verifies the
// framing and CRCs in depth.
interface TbValue {
  step: number;
  tag: string;
  scalar?: number;
  text?: string;
}

function fields(buffer: Buffer): { field: number; varint?: number; bytes?: Buffer }[] {
  const out: { field: number; varint?: number; bytes?: Buffer }[] = [];
  let at = 0;
  const varint = () => {
    let value = 0;
    for (let scale = 1; ; scale *= 128) {
      const byte = buffer[at++]!;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
    }
  };
  while (at < buffer.length) {
    const key = varint();
    const wire = key % 8;
    const field = Math.floor(key / 8);
    if (wire === 0) out.push({ field, varint: varint() });
    else {
      const length = wire === 1 ? 8 : wire === 5 ? 4 : varint();
      out.push({ field, bytes: buffer.subarray(at, (at += length)) });
    }
  }
  return out;
}

function tensorBoardValues(dir: string): TbValue[] {
  const [name] = readdirSync(dir);
  const file = readFileSync(path.join(dir, name!));
  const values: TbValue[] = [];
  for (let at = 0; at < file.length; ) {
    const length = Number(file.readBigUInt64LE(at));
    const event = fields(file.subarray(at + 12, at + 12 + length));
    at += 16 + length;
    const step = event.find((f) => f.field === 2)?.varint ?? 0;
    const summary = event.find((f) => f.field === 5);
    if (!summary) continue;
    for (const v of fields(summary.bytes!).filter((f) => f.field === 1)) {
      const vf = fields(v.bytes!);
      const tag = vf.find((f) => f.field === 1)!.bytes!.toString("utf8");
      const simple = vf.find((f) => f.field === 2);
      const tensor = vf.find((f) => f.field === 8);
      if (simple) values.push({ step, tag, scalar: simple.bytes!.readFloatLE(0) });
      if (tensor) values.push({ step, tag, text: fields(tensor.bytes!).find((f) => f.field === 8)!.bytes!.toString("utf8") });
    }
  }
  return values;
}

const jsonl = () => readJsonlMetrics(path.join(scratch(), "metrics.jsonl"));
const tb = () => tensorBoardValues(path.join(scratch(), "tensorboard"));

describe("shouldLogTrain", () => {
  it("follows the spec: loggingSteps ≤ 1, first time, or a gap of at least loggingSteps", () => {
    expect(shouldLogTrain(3, 2, 1)).toBe(true);
    expect(shouldLogTrain(3, 3, 0)).toBe(true);
    expect(shouldLogTrain(7, null, 50)).toBe(true);
    expect(shouldLogTrain(56, 7, 50)).toBe(false);
    expect(shouldLogTrain(57, 7, 50)).toBe(true);
  });
});

describe("samplesMarkdown", () => {
  it("builds a table whose cells cannot break its structure", () => {
    const rows: SampleRow[] = [{ turn: 1, agent: 0, prompt: "a | b", completion: "line 1\nline 2 *bold* <tag>", reward: 0.5 }];
    expect(samplesMarkdown(rows)).toBe(
      [
        "| turn | agent | prompt | completion | reward |",
        "|---|---|---|---|---|",
        "| 1 | 0 | a \\| b | line 1<br>line 2 \\*bold\\* \\<tag\\> | 0.5 |",
      ].join("\n"),
    );
  });
});

describe("MetricsLogger", () => {
  it("writes every train record to JSONL and only rate-limited ones to TensorBoard", async () => {
    const logger = await MetricsLogger.create({ outputDir: scratch(), loggingSteps: 10, algorithm: "MAGRPO", tensorboard: true });
    const forwarded = [1, 5, 11, 15, 21].map((step) => logger.logTrain({ "turn_1/reward_mean": step / 100 }, step));
    await logger.close();

    expect(forwarded).toEqual([true, false, true, false, true]);
    expect(jsonl().map((r) => [r.kind, r.step, r["turn_1/reward_mean"]])).toEqual([
      ["train", 1, 0.01],
      ["train", 5, 0.05],
      ["train", 11, 0.11],
      ["train", 15, 0.15],
      ["train", 21, 0.21],
    ]);
    expect(tb().map((v) => [v.step, v.tag])).toEqual([
      [1, "turn_1/reward_mean"],
      [11, "turn_1/reward_mean"],
      [21, "turn_1/reward_mean"],
    ]);
    expect(tb()[1]!.scalar).toBeCloseTo(0.11, 6);
  });

  it("sends everything when loggingSteps is 1", async () => {
    const logger = await MetricsLogger.create({ outputDir: scratch(), loggingSteps: 1, algorithm: "MAGRPO", tensorboard: true });
    for (const step of [1, 1, 2]) expect(logger.logTrain({ x: step }, step)).toBe(true);
    await logger.close();
    expect(tb().map((v) => v.step)).toEqual([1, 1, 2]);
  });

  it("prefixes eval keys with eval/ in every sink and refuses keys prefixed twice", async () => {
    const logger = await MetricsLogger.create({ outputDir: scratch(), loggingSteps: 50, algorithm: "MAGRPO", tensorboard: true });
    logger.logTrain({ a: 1 }, 1);
    // Eval is never rate-limited.
    logger.logEval({ "turn_1/reward_mean": 0.7, pass_rate: 0.5 }, 2);
    expect(() => logger.logEval({ "eval/x": 1 }, 3)).toThrow(/metric "eval\/x" is already prefixed/);
    await logger.close();

    expect(jsonl()[1]).toMatchObject({ kind: "eval", step: 2, "eval/turn_1/reward_mean": 0.7, "eval/pass_rate": 0.5 });
    expect(tb().filter((v) => v.step === 2).map((v) => v.tag)).toEqual(["eval/turn_1/reward_mean", "eval/pass_rate"]);
  });

  it("logs unthrottled records, sending strings to TensorBoard as text and keeping the rest in JSONL", async () => {
    const logger = await MetricsLogger.create({ outputDir: scratch(), loggingSteps: 100, algorithm: "MAAC", tensorboard: true });
    logger.logTrain({ a: 1 }, 1);
    logger.log("train", { epoch_avg_return: 2.5, final_model_saved: "/out/final", converged: true, note: null }, 2);
    await logger.close();

    expect(jsonl()[1]).toMatchObject({ kind: "train", step: 2, epoch_avg_return: 2.5, final_model_saved: "/out/final", converged: true, note: null });
    expect(tb().filter((v) => v.step === 2)).toEqual([
      { step: 2, tag: "final_model_saved", text: "/out/final" },
      { step: 2, tag: "epoch_avg_return", scalar: 2.5 },
    ]);
  });

  it("records sample tables in JSONL and as markdown text in TensorBoard", async () => {
    const logger = await MetricsLogger.create({ outputDir: scratch(), loggingSteps: 1, algorithm: "MAGRPO", tensorboard: true });
    const rows: SampleRow[] = [
      { turn: 1, agent: 0, prompt: "Write a haiku", completion: "Autumn moonlight", reward: 1 },
      { turn: 1, agent: 1, prompt: "Write a haiku", completion: "a worm digs silently", reward: 0.5 },
    ];
    logger.logSamples(rows, 8);
    logger.logSamples(rows.slice(0, 1), 9, "eval/samples");
    await logger.close();

    expect(jsonl()).toMatchObject([
      { kind: "samples", step: 8, name: "samples", rows },
      { kind: "samples", step: 9, name: "eval/samples", rows: rows.slice(0, 1) },
    ]);
    expect(tb()).toEqual([
      { step: 8, tag: "samples", text: samplesMarkdown(rows) },
      { step: 9, tag: "eval/samples", text: samplesMarkdown(rows.slice(0, 1)) },
    ]);
  });

  it("writes no TensorBoard directory unless asked, and has no W&B run without a config", async () => {
    const logger = await MetricsLogger.create({ outputDir: scratch(), loggingSteps: 1, algorithm: "MAGRPO", wandb: null });
    logger.logTrain({ a: 1 }, 0);
    expect(logger.wandbRunIdentity()).toBeNull();
    await logger.close();
    expect(readdirSync(scratch())).toEqual(["metrics.jsonl"]);
  });

  it("carries lastLoggedStep across a resume, keeping the cadence", async () => {
    const first = await MetricsLogger.create({ outputDir: scratch(), loggingSteps: 10, algorithm: "MAGRPO", tensorboard: true });
    expect(first.state()).toEqual({ lastLoggedStep: null });
    first.logTrain({ a: 1 }, 4);
    first.logTrain({ a: 2 }, 9);
    const saved = first.state();
    expect(saved).toEqual({ lastLoggedStep: 4 });
    await first.close();

    const resumed = await MetricsLogger.create({ outputDir: scratch(), loggingSteps: 10, algorithm: "MAGRPO" });
    resumed.loadState(JSON.parse(JSON.stringify(saved)));
    expect(resumed.logTrain({ a: 3 }, 12)).toBe(false);
    expect(resumed.logTrain({ a: 4 }, 14)).toBe(true);
    expect(resumed.state()).toEqual({ lastLoggedStep: 14 });
    await resumed.close();
    // Both runs append to the same metrics.jsonl.
    expect(jsonl().map((r) => r.step)).toEqual([4, 9, 12, 14]);
  });

  it("rejects bad state, bad steps, bad options and use after close, naming the problem", async () => {
    await expect(MetricsLogger.create({ outputDir: scratch(), loggingSteps: Number.NaN, algorithm: "x" })).rejects.toThrow(
      /loggingSteps must be a number/,
    );
    const logger = await MetricsLogger.create({ outputDir: scratch(), loggingSteps: 1, algorithm: "MAGRPO" });
    expect(() => logger.loadState({ lastLoggedStep: -3 })).toThrow(/lastLoggedStep must be null or a non-negative integer, got -3/);
    expect(() => logger.loadState(illTyped({}))).toThrow(/lastLoggedStep must be null/);
    logger.loadState({ lastLoggedStep: null });
    expect(() => logger.logTrain({ a: 1 }, 1.5)).toThrow(/logTrain: envStep must be a non-negative integer, got 1\.5/);
    expect(() => logger.logSamples([], -1)).toThrow(/logSamples: envStep/);
    await logger.close();
    await logger.close();
    expect(() => logger.logTrain({ a: 1 }, 1)).toThrow(/logTrain: the logger is closed/);
    expect(() => logger.logEval({ a: 1 }, 1)).toThrow(/logEval: the logger is closed/);
  });
});
