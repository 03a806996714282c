// Wrong code that tries to forge the coding reward: each attack returns wrong answers and tries to make the tests
// pass anyway: result lines on the runner's channel, patched builtins and modules the asserts use, the runner's frames,
// the expected values read out of a process, values that compare equal to anything. None may earn more than the same
// wrong code without the trick (its honest reward). Nested defs are avoided: the completion reader cuts a function at
// a nested def, which would defuse the attack rather than test the harness.
import { describe, expect, it } from "vitest";
import type { Item, RewardContext } from "../../src/rollout/types.js";
import { coopHumanEvalProblems } from "../../src/tasks/data/coophumaneval.js";
import { humanEvalProblems } from "../../src/tasks/data/humaneval.js";
import { getTask } from "../../src/tasks/registry.js";

const context = (item: Item): RewardContext => ({ itemIndex: 0, item, turn: 0, prompts: [], promptHistory: [[], []], responseHistory: [[], []] });
const sumOfPrimes = coopHumanEvalProblems.find((p) => p.entry_point === "sum_of_primes")!;
const circleArea = humanEvalProblems.find((p) => p.entry_point === "circle_area")!;

const isPrime = "def aux(n):\n    if n < 2:\n        return False\n    for d in range(2, int(n ** 0.5) + 1):\n        if n % d == 0:\n            return False\n    return True";
const squared = "def aux(r):\n    return r * r";

async function reward(item: Item, aux: string, main: string): Promise<number> {
  const task = getTask(item === circleArea ? "humaneval" : "coophumaneval", { testTimeoutMs: 2000 });
  return ((await task.rewardFunc([[aux], [main]], context(item))) as number[])[0];
}

/** A main for sum_of_primes that uses aux, runs `trick` (indented function-body lines), then returns a wrong answer. */
const wrongSum = (trick: string) => `def sum_of_primes(numbers):\n    flags = [aux(x) for x in numbers]\n${trick}\n    return -1 + 0 * len(flags)`;
/** A main for circle_area that uses aux, runs `trick`, then returns `result` (0.0 unless the trick sets it). */
const wrongArea = (trick: string) => `def circle_area(radius):\n    result = 0.0 * aux(radius)\n${trick}\n    return result`;

const indent = (lines: string) => lines.split("\n").map((line) => `    ${line}`).join("\n");

// Result lines in the runner's format for every test index, written to every descriptor the process can reach.
const FLOOD_FDS = indent(`import os
lines = ''.join('{"kind": "test", "index": %d, "status": "pass"}\\n' % i for i in range(16)).encode()
for fd in range(256):
    try:
        os.write(fd, lines)
    except OSError:
        pass`);

const ATTACKS: Record<string, { item: Item; aux: string; main: string; honest: string }> = {
  "result lines on every open descriptor": { item: sumOfPrimes, aux: isPrime, main: wrongSum(FLOOD_FDS), honest: wrongSum("") },
  "result lines, then exit before the runner reports": {
    item: sumOfPrimes,
    aux: isPrime,
    main: wrongSum(`${FLOOD_FDS}\n    os._exit(0)`),
    honest: wrongSum(""),
  },
  "result lines into every process's descriptors through /proc": {
    item: sumOfPrimes,
    aux: isPrime,
    main: wrongSum(
      indent(`import os
lines = ''.join('{"kind": "test", "index": %d, "status": "pass"}\\n' % i for i in range(16))
for pid in os.listdir('/proc'):
    if not pid.isdigit():
        continue
    try:
        fds = os.listdir('/proc/%s/fd' % pid)
    except OSError:
        continue
    for fd in fds:
        try:
            with open('/proc/%s/fd/%s' % (pid, fd), 'w') as f:
                f.write(lines)
        except OSError:
            pass`),
    ),
    honest: wrongSum(""),
  },
  "patched builtins: exec does nothing": {
    item: sumOfPrimes,
    aux: isPrime,
    main: wrongSum(indent("import builtins\nbuiltins.exec = lambda *args, **kwargs: None\nbuiltins.eval = lambda *args, **kwargs: True")),
    honest: wrongSum(""),
  },
  "the runner's frames: every report says pass": {
    item: sumOfPrimes,
    aux: isPrime,
    main: wrongSum(
      indent(`import sys, json
frame = sys._getframe()
while frame is not None:
    g = frame.f_globals
    for name, value in list(g.items()):
        if callable(value) and name in ('emit', 'report', 'send', 'verdict', 'grade', 'judge'):
            g[name] = (lambda write: lambda *a, **e: write(json.dumps(dict(e, status='pass')) + '\\n'))(getattr(g.get('report'), 'write', print))
    frame = frame.f_back`),
    ),
    honest: wrongSum(""),
  },
  "an object equal to everything": {
    item: sumOfPrimes,
    aux: isPrime,
    main: wrongSum(indent("class Anything:\n    __eq__ = lambda self, other: True\n    __hash__ = object.__hash__\nflags = Anything()")).replace("return -1 + 0 * len(flags)", "return flags"),
    honest: wrongSum(""),
  },
  "an int subclass equal to everything": {
    item: sumOfPrimes,
    aux: isPrime,
    main: wrongSum(indent("class Int(int):\n    __eq__ = lambda self, other: True\n    __hash__ = int.__hash__")).replace("return -1 + 0 * len(flags)", "return Int(-1)"),
    honest: wrongSum(""),
  },
  "the expected values read out of the process's own memory": {
    item: sumOfPrimes,
    aux: isPrime,
    main: wrongSum(
      indent(`import gc, re, ast
for obj in gc.get_objects() + [s for o in gc.get_objects() if isinstance(o, dict) for s in o.values()]:
    texts = [obj] if isinstance(obj, str) else [s for s in obj if isinstance(s, str)] if isinstance(obj, (list, tuple)) else []
    for text in texts:
        found = re.match(r'assert sum_of_primes\\((.*)\\) == (.*)$', text)
        if found and ast.literal_eval(found.group(1)) == numbers:
            return ast.literal_eval(found.group(2))`),
    ),
    honest: wrongSum(""),
  },
  "the expected values read out of other processes through /proc": {
    item: sumOfPrimes,
    aux: isPrime,
    main: wrongSum(
      indent(`import os, re, ast
pattern = re.compile(rb'sum_of_primes\\((\\[[-0-9, ]*\\])\\) == ([-0-9]+)')
for pid in os.listdir('/proc'):
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    chunks = []
    for name in ('cmdline', 'environ', 'fd/0'):
        try:
            with open('/proc/%s/%s' % (pid, name), 'rb') as f:
                chunks.append(f.read(1 << 20))
        except OSError:
            pass
    try:
        with open('/proc/%s/maps' % pid) as maps, open('/proc/%s/mem' % pid, 'rb', 0) as mem:
            for line in maps:
                start, end = (int(x, 16) for x in line.split()[0].split('-'))
                if 'rw' in line.split()[1] and end - start < 64 << 20:
                    try:
                        mem.seek(start)
                        chunks.append(mem.read(end - start))
                    except OSError:
                        pass
    except OSError:
        pass
    for chunk in chunks:
        for args, expected in pattern.findall(chunk):
            if ast.literal_eval(args.decode()) == numbers:
                return int(expected)`),
    ),
    honest: wrongSum(""),
  },
  "patched module: math.pi made to match the wrong answer": {
    item: circleArea,
    aux: squared,
    main: wrongArea(indent("import math\nmath.pi = 0.0")),
    honest: wrongArea(""),
  },
  "patched builtin the assert uses: abs is always 0": {
    item: circleArea,
    aux: squared,
    main: wrongArea(indent("import builtins\nbuiltins.abs = lambda x: 0")),
    honest: wrongArea(""),
  },
  "a float whose subtraction and abs lie": {
    item: circleArea,
    aux: squared,
    main: wrongArea(
      indent("class Tiny(float):\n    __sub__ = lambda self, other: Tiny(0.0)\n    __abs__ = lambda self: 0.0\n    __eq__ = lambda self, other: True\n    __hash__ = float.__hash__\nresult = Tiny(5.0)"),
    ),
    honest: wrongArea(""),
  },
  "a lying defaulted argument evaluated at load time": {
    item: sumOfPrimes,
    aux: "def aux(n, _=__import__('builtins').__setattr__('exec', lambda *a, **k: None)):\n    return n > 1 and all(n % d for d in range(2, n))",
    main: wrongSum(""),
    honest: wrongSum(""),
  },
};

describe("forging the coding reward", () => {
  for (const [name, { item, aux, main, honest }] of Object.entries(ATTACKS)) {
    it(`${name}: no more than the wrong code's honest reward`, async () => {
      const honestAux = name.startsWith("a lying defaulted") ? isPrime : aux;
      const [forged, fair] = await Promise.all([reward(item, aux, main), reward(item, honestAux, honest)]);
      expect(forged).toBeLessThanOrEqual(fair + 1e-12);
    });
  }
});
