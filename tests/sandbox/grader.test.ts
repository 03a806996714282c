// The split harness: asserts keep Python's meaning on the values the code returns (judged by the grader, out of the
// code's reach), values that are not plain fail, and a test the grader cannot split runs in the code's process and is
// reported as in-process.
import { describe, expect, it } from "vitest";
import { runSandboxed } from "../../src/sandbox/sandbox.js";

const run = (code: string, tests: string[]) => runSandboxed({ code, tests, entryPoint: "f", testSetup: "import math", testTimeoutMs: 2000 });
const statuses = (r: Awaited<ReturnType<typeof run>>) => r.results.map((t) => `${t.status}${t.inProcess ? " in-process" : ""}`);

describe("split asserts", () => {
  it("compare as Python does on genuine values: True == 1, 1 == 1.0, -0.0 == 0.0, but a tuple is no list and nan equals nothing", async () => {
    const code = "def f(kind):\n    return {'bool': True, 'int': 1, 'zero': -0.0, 'tuple': (1, 2), 'nan': float('nan'), 'set': {1, 2}, 'dict': {'a': (1,)}, 'bytes': b'x', 'complex': 1j}[kind]";
    const tests = [
      "assert f('bool') == 1",
      "assert f('int') == 1.0",
      "assert f('zero') == 0.0",
      "assert str(f('zero')) == '-0.0'",
      "assert f('tuple') == [1, 2]",
      "assert f('tuple') == (1, 2)",
      "assert f('nan') == f('nan')",
      "assert math.isnan(f('nan'))",
      "assert (f('set'), f('dict')) == ({2, 1}, {'a': (1,)})",
      "assert (f('bytes'), f('complex') * 1j) == (b'x', -1)",
    ];
    const r = await run(code, tests);
    expect(statuses(r)).toEqual(["pass", "pass", "pass", "pass", "fail", "pass", "fail", "pass", "pass", "pass"]);
    expect(r.inProcess).toBe(0);
  });

  it("keyword, starred and computed arguments reach the code; the assert's message comes back", async () => {
    const r = await run("def f(a, b=0, *rest):\n    return a + b + sum(rest)", ["assert f(1, b=2) == 3", "assert f(*[1, 2, 3]) == 6", "assert f(len('abc'), math.floor(2.5)) == 5", "assert f(1) == 2, 'one is not two'"]);
    expect(statuses(r)).toEqual(["pass", "pass", "pass", "fail"]);
    expect(r.results[3]).toMatchObject({ errorType: "AssertionError", message: "one is not two" });
  });

  it("a value that is not plain fails, whatever it claims to equal", async () => {
    const code = "class Same:\n    __eq__ = lambda self, other: True\ndef f(kind):\n    return {'object': Same(), 'generator': (x for x in [1]), 'deep': eval('[' * 150 + ']' * 150)}[kind]";
    const r = await run(code, ["assert f('object') == 1", "assert f('generator') == [1]", "assert f('deep') == 0"]);
    expect(statuses(r)).toEqual(["fail", "fail", "fail"]);
    expect(r.results[0]).toMatchObject({ errorType: "NotPlain", message: expect.stringMatching(/a Same is not a plain value/) });
  });

  it("an oversized result fails instead of flooding the grader", async () => {
    const r = await run("def f():\n    return 'x' * (8 << 20)", ["assert len(f()) > 0"]);
    expect(r.results[0]).toMatchObject({ status: "fail", message: expect.stringMatching(/more than 4194304/) });
  });

  it("tests it cannot split run in-process and say so: nested, conditional, the code's own names, statements", async () => {
    const code = "def helper(x):\n    return x\ndef f(x):\n    return x";
    const tests = ["assert f(f(1)) == 1", "assert f(1) == 1 or f(2) == 5", "assert f(1) == helper(1)", "f(1)", "assert all(f(x) == x for x in range(3))", "assert f(1) == 1"];
    const r = await run(code, tests);
    expect(statuses(r)).toEqual(["pass in-process", "pass in-process", "pass in-process", "pass in-process", "pass in-process", "pass"]);
    expect(r.inProcess).toBe(5);
  });

  it("without an entry point every test runs in-process", async () => {
    const r = await runSandboxed({ code: "def f(x):\n    return x", tests: ["assert f(1) == 1"], testTimeoutMs: 2000 });
    expect(statuses(r)).toEqual(["pass in-process"]);
  });
});
