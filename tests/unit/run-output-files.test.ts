// What a run writes into outputDir when the disk is full, when an earlier run left its files there, or when a link
// was planted in their place. A full disk is injected at the write call (node:fs's writeSync fails with ENOSPC, as it
// does on a full filesystem): the error names the file, and nothing already written is lost or left half-replaced.
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { JsonlMetricsWriter, readJsonlMetrics, readRunMetrics } from "../../src/logging/jsonl.js";
import { TensorBoardWriter } from "../../src/logging/tensorboard.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { makeBase, makeTrainer } from "../support/checkpoint-run.js";

const disk = vi.hoisted(() => ({ full: false, short: false }));
vi.mock("node:fs", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:fs")>();
  const writeSync = (fd: number, data: Buffer | string, ...rest: unknown[]): number => {
    if (disk.full) throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC", errno: -28, syscall: "write" });
    if (disk.short && typeof data !== "string") return real.writeSync(fd, data.subarray(0, Math.floor(data.length / 2)));
    return (real.writeSync as (...args: unknown[]) => number)(fd, data, ...rest);
  };
  return { ...real, default: { ...real, writeSync }, writeSync };
});

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-output-files-"));
const base = path.join(scratch, "base");
let tokenizer: ComlrlTokenizer;

beforeAll(async () => {
  tokenizer = await makeBase(base);
});
afterEach(() => {
  disk.full = false;
  disk.short = false;
});

describe("a full disk", () => {
  it("a metrics.jsonl write that fails names the file, and the file keeps its whole records", () => {
    const file = path.join(scratch, "full", "metrics.jsonl");
    const writer = new JsonlMetricsWriter(file);
    writer.write("train", 1, { loss: 1 });
    disk.full = true;
    expect(() => writer.write("train", 2, { loss: 2 })).toThrow(`cannot write ${file}: ENOSPC: no space left on device, write`);
    disk.full = false;
    disk.short = true;
    expect(() => writer.write("train", 3, { loss: 3 })).toThrow(`cannot write ${file}: only `);
    disk.short = false;
    writer.write("train", 4, { loss: 4 });
    writer.close();
    expect(readJsonlMetrics(file).map((r) => r.step)).toEqual([1, 4]);
  });

  it("a TensorBoard write that fails names the event file", () => {
    const writer = new TensorBoardWriter(path.join(scratch, "full-tensorboard"));
    disk.full = true;
    expect(() => writer.addScalar("loss", 1, 1)).toThrow(`cannot write ${writer.file}: ENOSPC: no space left on device, write`);
    disk.full = false;
    writer.close();
  });

  it("a saveModel that fails part way leaves the earlier saved model whole, and no half-written agents", async () => {
    const out = path.join(scratch, "save");
    const saved = path.join(out, "final");
    const trainer = await makeTrainer(base, tokenizer, out, 1);
    try {
      await trainer.saveModel(saved);
      const before = readFileSync(path.join(saved, "agent_1", "config.json"), "utf8");
      const second = (trainer as unknown as { agents: Array<{ model: { save: (...args: unknown[]) => Promise<void> } }> }).agents[1].model;
      second.save = () => Promise.reject(Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" }));
      writeFileSync(path.join(saved, "agent_0", "marker"), "from the first save");
      await expect(trainer.saveModel(saved)).rejects.toThrow(/ENOSPC/);
      expect(readFileSync(path.join(saved, "agent_0", "marker"), "utf8")).toBe("from the first save");
      expect(readFileSync(path.join(saved, "agent_1", "config.json"), "utf8")).toBe(before);
      expect(readdirSync(out).filter((name) => name.includes(".export-"))).toEqual([]);
    } finally {
      await trainer.close();
    }
  }, 60_000);

  it("a saveModel into an empty place that fails leaves no agent_0 without its agent_1", async () => {
    const out = path.join(scratch, "save-fresh");
    const trainer = await makeTrainer(base, tokenizer, out, 1);
    try {
      const second = (trainer as unknown as { agents: Array<{ model: { save: (...args: unknown[]) => Promise<void> } }> }).agents[1].model;
      second.save = () => Promise.reject(Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" }));
      await expect(trainer.saveModel(path.join(out, "final"))).rejects.toThrow(/ENOSPC/);
      expect(existsSync(path.join(out, "final", "agent_0"))).toBe(false);
    } finally {
      await trainer.close();
    }
  }, 60_000);
});

describe("an outputDir an earlier run wrote to", () => {
  it("a fresh run starts a new metrics.jsonl, the earlier one set aside whole, and readRunMetrics returns only the new run's", async () => {
    const out = path.join(scratch, "twice");
    const runOnce = async () => {
      const trainer = await makeTrainer(base, tokenizer, out, 1);
      try {
        await trainer.train();
      } finally {
        await trainer.close();
      }
    };
    await runOnce();
    const first = readFileSync(path.join(out, "metrics.jsonl"), "utf8");
    const firstRecords = readRunMetrics(out).length;
    await runOnce();
    expect(readRunMetrics(out).length).toBe(firstRecords);
    const aside = readdirSync(out).filter((name) => name.startsWith("earlier-run-"));
    expect(aside).toHaveLength(1);
    expect(readFileSync(path.join(out, aside[0], "metrics.jsonl"), "utf8")).toBe(first);
  }, 60_000);

  it("a metrics.jsonl symlink is never written through", () => {
    const target = path.join(scratch, "elsewhere.txt");
    writeFileSync(target, "not metrics\n");
    const file = path.join(scratch, "planted", "metrics.jsonl");
    fs.mkdirSync(path.dirname(file));
    symlinkSync(target, file);
    expect(() => new JsonlMetricsWriter(file)).toThrow(`cannot write ${file}: it is a symbolic link, which metrics are never written through`);
    expect(() => readRunMetrics(path.dirname(file))).toThrow(`readRunMetrics: ${file} is a symbolic link`);
    expect(readFileSync(target, "utf8")).toBe("not metrics\n");
  });

  it("a fresh run in an outputDir with a planted metrics.jsonl symlink leaves the link's target alone", async () => {
    const out = path.join(scratch, "planted-run");
    const target = path.join(scratch, "victim.txt");
    writeFileSync(target, "precious\n");
    fs.mkdirSync(out);
    symlinkSync(target, path.join(out, "metrics.jsonl"));
    const trainer = await makeTrainer(base, tokenizer, out, 1);
    try {
      await trainer.train();
    } finally {
      await trainer.close();
    }
    expect(readFileSync(target, "utf8")).toBe("precious\n");
    expect(lstatSync(path.join(out, "metrics.jsonl")).isFile()).toBe(true);
  }, 60_000);
});
