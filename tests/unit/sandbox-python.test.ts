// The sandbox's Python is real files (src/sandbox/python): each file and each program joined from them compiles, the
// shared pieces run on their own (they carry their own imports), and a dist/ build has the same files beside it.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { PROGRAM_FILES, PYTHON_DIR, pythonProgram } from "../../src/sandbox/programs.js";

/** Runs Python source given on stdin under `python3 -I`, with `check` (Python) applied to it as `source`. */
function python(check: string, source: string, name: string) {
  return spawnSync("python3", ["-I", "-c", `import sys\nsource = sys.stdin.read()\nname = ${JSON.stringify(name)}\n${check}`], { input: source, encoding: "utf8" });
}
const compiles = (source: string, name: string) => python('compile(source, name, "exec")', source, name);

describe("the sandbox's Python files", () => {
  const files = readdirSync(PYTHON_DIR).filter((file) => file.endsWith(".py"));

  it("are the files the programs are joined from", () => {
    expect(files.sort()).toEqual([...new Set(Object.values(PROGRAM_FILES).flat())].sort());
  });

  it.each(files)("%s compiles", (file) => {
    const run = compiles(readFileSync(PYTHON_DIR + file, "utf8"), file);
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
  });

  it.each(Object.keys(PROGRAM_FILES) as (keyof typeof PROGRAM_FILES)[])("the %s program compiles as joined", (name) => {
    const run = compiles(pythonProgram(name), name);
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
  });

  it("a syntax error is reported with its file and line", () => {
    const broken = readFileSync(PYTHON_DIR + "timer.py", "utf8").replace("def timed(seconds, run):", "def timed(seconds, run)");
    const run = compiles(broken, "timer.py");
    expect(run.status).not.toBe(0);
    expect(run.stderr).toMatch(/File "timer\.py", line \d+[\s\S]*SyntaxError/);
  });

  it("codec.py and timer.py run on their own and define what the programs use", () => {
    const run = python(
      'scope = {}\nexec(compile(source, name, "exec"), scope)\nprint(" ".join(sorted(k for k in scope if not k.startswith("__"))))',
      readFileSync(PYTHON_DIR + "codec.py", "utf8") + "\n" + readFileSync(PYTHON_DIR + "timer.py", "utf8"),
      "shared",
    );
    expect(run.stderr).toBe("");
    expect(run.stdout.trim().split(" ")).toEqual(expect.arrayContaining(["encode", "decode", "load_plain_json", "timed", "TestTimeout", "describe", "json", "signal"]));
  });

  it.runIf(existsSync("dist/sandbox/programs.js"))("a dist/ build carries the same files beside the compiled module", () => {
    for (const file of files) expect(readFileSync(`dist/sandbox/python/${file}`, "utf8")).toBe(readFileSync(PYTHON_DIR + file, "utf8"));
  });
});
