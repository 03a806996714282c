// The `comlrl` command line: help for every command, and bad command lines answered with a usage line and exit
// status 2 before any work is done — never a stack trace. Runs the CLI as a user does, in its own process.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createTinyModel } from "../../src/models/tiny-model.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-cli-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function comlrl(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, ["--import", "tsx", path.resolve("src/cli/main.ts"), ...args], { encoding: "utf8", timeout: 60_000 });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

const STACK_FRAME = /^\s+at /m;

describe("comlrl", () => {
  it("prints the command list for --help, and each command's options for <command> --help", () => {
    const top = comlrl("--help");
    expect(top.status).toBe(0);
    for (const command of ["info", "demo", "train", "export", "bench"]) expect(top.stdout).toMatch(new RegExp(`^  ${command} `, "m"));
    for (const command of ["info", "demo", "train", "export", "bench"]) {
      const help = comlrl(command, "--help");
      expect(help.status, command).toBe(0);
      expect(help.stdout, command).toMatch(new RegExp(`^usage: comlrl ${command}`));
    }
    expect(comlrl("train", "-h").stdout).toContain("--resume X");
  });

  it("answers unknown commands and options, missing values and bad numbers with usage and exit 2", () => {
    const cases: Array<[string[], RegExp]> = [
      [["bogus"], /^comlrl: unknown command "bogus"\nusage: comlrl <command>/],
      [["demo", "--bogus"], /^comlrl demo: Unknown option '--bogus'\nusage: comlrl demo \[--out DIR\]/],
      [["demo", "--epochs=-3"], /^comlrl demo: --epochs must be an integer ≥ 1, got "-3"\nusage: comlrl demo/],
      [["demo", "--seed", "1.5"], /^comlrl demo: --seed must be an integer ≥ 0, got "1\.5"/],
      [["demo", "extra"], /^comlrl demo: Unexpected argument 'extra'/],
      [["train"], /^comlrl train: --config FILE is required\nusage: comlrl train --config FILE/],
      [["train", "--config"], /^comlrl train: Option '--config <value>' argument missing/],
      [["bench", "--quick=yes"], /^comlrl bench: Option '--quick' does not take an argument/],
      [["info", "--verbose"], /^comlrl info: Unknown option '--verbose'/],
      [["train", "--config", "c.yaml", "--gguf", "f32"], /^comlrl train: --gguf must be one of f16, bf16, q8_0, got "f32"/],
      [["export", "--model", "m"], /^comlrl export: --model DIR and --out FILE are required\nusage: comlrl export --model DIR/],
      [["export", "--model", "m", "--out", "m.gguf", "--dtype", "q4_0"], /^comlrl export: --dtype must be one of f16, bf16, q8_0, got "q4_0"/],
    ];
    for (const [args, message] of cases) {
      const run = comlrl(...args);
      expect(run.status, args.join(" ")).toBe(2);
      expect(run.stderr, args.join(" ")).toMatch(message);
      expect(run.stderr, args.join(" ")).not.toMatch(STACK_FRAME);
    }
  });

  it("validates the demo's arguments before writing anything", () => {
    const out = path.join(scratch, "demo-out");
    expect(comlrl("demo", "--out", out, "--epochs=-3").status).toBe(2);
    expect(existsSync(out)).toBe(false);
  });

  it("export writes a model directory as a GGUF file, and names the directory it cannot read", async () => {
    const model = path.join(scratch, "tiny");
    await createTinyModel(model, { hiddenSize: 32, numLayers: 1 });
    const out = path.join(scratch, "tiny.gguf");
    const run = comlrl("export", "--model", model, "--out", out, "--dtype", "q8_0");
    expect(run.status, run.stderr).toBe(0);
    // The embedding, the final norm and the layer's 12 (two norms, q/k/v with biases, o, gate, up, down); the LM head is tied.
    expect(run.stderr).toBe(`comlrl export: ${out} (qwen2, 14 tensors)\n`);
    expect(readFileSync(out).subarray(0, 4).toString("ascii")).toBe("GGUF");
    const missing = comlrl("export", "--model", path.join(scratch, "absent"), "--out", out);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/^comlrl export: .*absent\/config\.json: cannot read it as JSON/);
    expect(missing.stderr).not.toMatch(STACK_FRAME);
  });

  it("a failing train run prints its error without a stack trace and exits 1", () => {
    const config = path.join(scratch, "iac.yaml");
    writeFileSync(config, "model:\n  name: ./somewhere\ndataset:\n  type: tldr\niac:\n  num_turns: 1\n");
    const run = comlrl("train", "--config", config);
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/^comlrl train: .*iac\.yaml: iac needs critics; set critic_model\.name/);
    expect(run.stderr).not.toMatch(STACK_FRAME);
    const missing = comlrl("train", "--config", path.join(scratch, "nope.yaml"));
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/cannot read config file .*nope\.yaml/);
  });
});
