// A FIFO where a file is read whole (a model's config.json, the file `comlrl train --config` names) would block the
// read until something writes to it: forever, and for readFileSync the whole process. Each is refused at once by
// name. Every case runs in a child process under a wall clock, so a read that blocks fails the test, not the worker.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-fifo-"));

function fifo(file: string): string {
  expect(spawnSync("mkfifo", [file]).status).toBe(0);
  return file;
}

/** Runs an ES module body in a child under a 15 s wall clock; its stdout and whether the clock ran out. */
function child(body: string): { stdout: string; stderr: string; hung: boolean } {
  const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", body], { encoding: "utf8", timeout: 15_000 });
  return { stdout: run.stdout, stderr: run.stderr, hung: run.signal === "SIGTERM" };
}

const module = (file: string) => JSON.stringify(path.resolve(file));

describe("FIFOs as input files", () => {
  it("a model directory whose config.json is a FIFO is refused, naming the file", () => {
    const dir = path.join(scratch, "model");
    mkdirSync(dir);
    const config = fifo(path.join(dir, "config.json"));
    const run = child(`import { CausalLM } from ${module("src/models/causal-lm.ts")};
      await CausalLM.fromDirectory(${JSON.stringify(dir)}).then(() => console.log("loaded"), (error) => console.log(error.message));`);
    expect(run.hung, "the load blocked on the FIFO").toBe(false);
    expect(run.stdout.trim()).toBe(`${config} is not a regular file (a FIFO)`);
  });

  it("comlrl train --config naming a FIFO is refused, naming the file", () => {
    const config = fifo(path.join(scratch, "train.yaml"));
    const run = spawnSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "train", "--config", config], { encoding: "utf8", timeout: 15_000 });
    expect(run.signal, "the CLI blocked on the FIFO").toBeNull();
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(`cannot read config file ${config}: it is not a regular file (a FIFO)`);
  });
});

describe("FIFOs in checkpoints and bench results", () => {
  it("a checkpoint whose manifest.json is a FIFO is refused, naming the file", () => {
    const dir = path.join(scratch, "checkpoint-manifest");
    mkdirSync(dir);
    const manifest = fifo(path.join(dir, "manifest.json"));
    const run = child(`import { verifyManifest } from ${module("src/checkpoint/manifest.ts")};
      await verifyManifest(${JSON.stringify(dir)}).then(() => console.log("verified"), (error) => console.log(error.message));`);
    expect(run.hung, "the resume blocked on the FIFO").toBe(false);
    expect(run.stdout.trim()).toBe(`checkpoint file ${manifest} is not a regular file (a FIFO)`);
  });

  it("readCheckpointMetadata on a checkpoint whose trainer_state.json is a FIFO is refused, naming the file", () => {
    const dir = path.join(scratch, "checkpoint-state");
    mkdirSync(dir);
    const state = fifo(path.join(dir, "trainer_state.json"));
    const run = child(`import { readCheckpointMetadata } from ${module("src/checkpoint/checkpoint.ts")};
      try { readCheckpointMetadata(${JSON.stringify(dir)}); console.log("read"); } catch (error) { console.log(error.message); }`);
    expect(run.hung, "the read blocked on the FIFO").toBe(false);
    expect(run.stdout.trim()).toBe(`checkpoint file ${state} is not a regular file (a FIFO)`);
  });

  it("comlrl bench --compare naming a FIFO is refused before the run, naming the file", () => {
    const previous = fifo(path.join(scratch, "previous.json"));
    const run = spawnSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "bench", "--quick", "--compare", previous], { encoding: "utf8", timeout: 15_000 });
    expect(run.signal, "the bench blocked on the FIFO").toBeNull();
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(`cannot read a bench result: ${previous} is not a regular file (a FIFO)`);
  });
});
