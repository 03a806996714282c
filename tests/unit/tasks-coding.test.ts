// The coding reward level by level on hand-made aux/main pairs (tests run in the real sandbox), the text-level
// checks, both transitions, every bundled problem's reference solution, and a short MAGRPO run on the reward.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readJsonlMetrics } from "../../src/logging/jsonl.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { Item, RewardContext } from "../../src/rollout/types.js";
import {
  analyzeCode,
  cleanupCode,
  codeProblem,
  codeRewardBreakdown,
  DEFAULT_EXECUTION,
  extractFunction,
  extractImports,
  extractTestCases,
  ignoredAuxCalls,
  isThinWrapper,
} from "../../src/tasks/coding.js";
import { coopHumanEvalProblems } from "../../src/tasks/data/coophumaneval.js";
import { humanEvalProblems } from "../../src/tasks/data/humaneval.js";
import { getTask } from "../../src/tasks/registry.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";

const FAST = { testTimeoutMs: 1000 };
const context = (item: Item): RewardContext => ({ itemIndex: 0, item, turn: 0, prompts: [], promptHistory: [[], []], responseHistory: [[], []] });
const sumOfPrimes = coopHumanEvalProblems[0]; // 4 asserts: [] → 0, [1..5] → 10, [4,6,8,9] → 0, [11,13,15] → 24

const isPrime = "def aux(n):\n    if n < 2:\n        return False\n    for d in range(2, int(n ** 0.5) + 1):\n        if n % d == 0:\n            return False\n    return True";
const usesAux = "def sum_of_primes(numbers):\n    total = 0\n    for x in numbers:\n        if aux(x):\n            total += x\n    return total";

async function reward(aux: string, main: string, options: Record<string, unknown> = {}): Promise<number> {
  const task = getTask("coophumaneval", { ...FAST, ...options });
  return ((await task.rewardFunc([[aux], [main]], context(sumOfPrimes))) as number[])[0];
}

describe("coding reward levels", () => {
  it("a correct cooperating pair earns the maximum 4.0 = 0.4 + 0.6 + 0.5 + 1 + 0.5 + 1", async () => {
    expect(await reward(isPrime, usesAux)).toBeCloseTo(4, 12);
  });

  it("shift moves it to 0", async () => {
    expect(await reward(isPrime, usesAux, { shift: true })).toBeCloseTo(0, 12);
    expect(getTask("coophumaneval", { shift: true }).rewardRange).toEqual([-4, 0]);
  });

  it("a thin wrapper misses the non-wrapper bonus: 4.0 − 1.0", async () => {
    const aux = "def aux(numbers):\n    total = 0\n    for x in numbers:\n        if x > 1 and all(x % d for d in range(2, x)):\n            total += x\n    return total";
    expect(await reward(aux, "def sum_of_primes(numbers):\n    return aux(numbers)")).toBeCloseTo(3, 12);
    expect(await reward(aux, "def sum_of_primes(numbers):\n    result = aux(numbers)\n    return result")).toBeCloseTo(3, 12);
  });

  it("an ignored aux result costs 0.5: all tests pass, 4.0 − 0.5", async () => {
    const main = "def sum_of_primes(numbers):\n    aux(2)\n    total = 0\n    for x in numbers:\n        if aux(x):\n            total += x\n    return total";
    expect(await reward(isPrime, main)).toBeCloseTo(3.5, 12);
  });

  it("main that solves it alone: no aux bonuses, 0.4 + 0.6 + 0.5 + 1 = 2.5", async () => {
    const main = "def sum_of_primes(numbers):\n    return sum(x for x in numbers if x > 1 and all(x % d for d in range(2, x)))";
    expect(await reward(isPrime, main)).toBeCloseTo(2.5, 12);
  });

  it("no aux: 0.6 + 0.5 + pass fraction (only the empty-list test passes: 1/4)", async () => {
    expect(await reward("I cannot help with that.", usesAux)).toBeCloseTo(0.6 + 0.5 + 0.25, 12);
  });

  it("a syntax error in the combined code stops at L1: 0.4 + 0.6", async () => {
    const main = "def sum_of_primes(numbers):\n    total = (0\n    return total";
    expect(await reward(isPrime, main)).toBeCloseTo(1, 12);
  });

  it("a missing main function stops at L1 with the aux credit only, and runs nothing", async () => {
    expect(await reward(isPrime, "def solve(numbers):\n    return 0")).toBeCloseTo(0.4, 12);
    expect(await reward(isPrime, "def sum_of_primes(numbers):\n    pass")).toBeCloseTo(0.4, 12);
  });

  it("wrong answers: 0.4 + 0.6 + 0.5 + 1/4, and aux bonuses still count once a test passes", async () => {
    // Returns 0 always: passes [] and [4,6,8,9] (2/4); calls aux and uses its result, not a wrapper.
    const main = "def sum_of_primes(numbers):\n    flags = [aux(x) for x in numbers]\n    return 0 * len(flags)";
    expect(await reward(isPrime, main)).toBeCloseTo(1.5 + 0.5 + 0.5 + 1, 12);
    // Nothing passes: no bonuses even though main calls aux.
    const never = "def sum_of_primes(numbers):\n    flags = [aux(x) for x in numbers]\n    return -1";
    expect(await reward(isPrime, never)).toBeCloseTo(1.5, 12);
  });

  it("hostile code in a completion is a failed test and the reward stays in range", async () => {
    const loop = "def sum_of_primes(numbers):\n    while True:\n        pass\n    return 0";
    expect(await reward(isPrime, loop, { testTimeoutMs: 200 })).toBeCloseTo(1.5, 12);
  });

  it("sandbox none is an explicit opt-out that scores the same; an item without a test names the field", async () => {
    const task = getTask("coophumaneval", FAST);
    expect(((await getTask("coophumaneval", { sandbox: "none", ...FAST }).rewardFunc([[isPrime], [usesAux]], context(sumOfPrimes))) as number[])[0]).toBeCloseTo(4, 12);
    await expect(task.rewardFunc([[isPrime], [usesAux]], context({ prompt: "x", entry_point: "f" }))).rejects.toThrow(/no "test" string/);
  });
});

describe("reading completions", () => {
  it("cleans markdown and prose, keeps functions; extracts one by name", () => {
    const completion = "Here is the code:\n```python\ndef aux(x):\n    return x * 2\n```\nThis doubles x.\n\ndef other():\n    return 1";
    expect(cleanupCode(completion)).toBe("def aux(x):\n    return x * 2\n\ndef other():\n    return 1");
    expect(extractFunction(completion, "aux")).toBe("def aux(x):\n    return x * 2");
    expect(extractFunction(completion, "missing")).toBe("");
  });

  it("imports from the prompt, asserts from check(candidate)", () => {
    expect(extractImports("from typing import List\nimport math\n\ndef f(): pass\nfrom typing import List")).toBe("from typing import List\nimport math");
    expect(extractTestCases(String(sumOfPrimes.test), "sum_of_primes")).toEqual([
      "assert sum_of_primes([]) == 0",
      "assert sum_of_primes([1, 2, 3, 4, 5]) == 10",
      "assert sum_of_primes([4, 6, 8, 9]) == 0",
      "assert sum_of_primes([11, 13, 15]) == 24",
    ]);
  });

  it("thin wrappers and ignored aux results", () => {
    expect(isThinWrapper("def f(x):\n    \"\"\"Doc.\"\"\"\n    return aux(x)")).toBe(true);
    expect(isThinWrapper("def f(x):\n    y = aux(x)\n    return y + 1")).toBe(false);
    expect(ignoredAuxCalls("def f(x):\n    aux(x)\n    y = aux(x)\n    return y")).toEqual(["Line 2: aux(x)"]);
  });
});

describe("coding transitions", () => {
  const input = (aux: string, main: string) => ({
    prompt: String(sumOfPrimes.prompt),
    agentCompletions: [aux, main],
    numAgents: 2,
    promptHistoryPerAgent: [["aux turn 1"], ["main turn 1"]],
    responseHistoryPerAgent: [[aux], [main]],
    item: sumOfPrimes,
  });

  it("level_feedback shows history, syntax errors and failing tests to each agent", async () => {
    const task = getTask("coophumaneval", FAST);
    const [aux, main] = await task.externalTransition!(input(isPrime, "def sum_of_primes(numbers):\n    return len(numbers)"));
    expect(aux).toContain("History: previous prompts:\n- Turn 1 prompt:\naux turn 1");
    expect(aux).toContain("- Aux definition: FOUND");
    expect(main).toContain("- Tests: 1/4 passed");
    expect(main).toContain("Failed case: assert sum_of_primes([1, 2, 3, 4, 5]) == 10 -> AssertionError");
    expect(main).toContain("- Aux usage: main does NOT call aux");
    expect(main).toMatch(/Revise your sum_of_primes\(\.\.\.\) accordingly\. Output ONLY the function code with no extra text\.$/);
    const [, broken] = await task.externalTransition!(input(isPrime, "def sum_of_primes(numbers):\n    total = (0\n    return total"));
    expect(broken).toMatch(/- Syntax: ERROR .*\n  SyntaxError at line \d+, col \d+: /);
  });

  it("plain restates the previous code and asks for a revision", async () => {
    const task = getTask("coophumaneval", { mode: "plain", ...FAST });
    const [aux, main] = await task.externalTransition!(input(isPrime, usesAux));
    expect(aux).toBe(`Your previous aux(...) implementation:\n${isPrime}\n\nRevise your aux(...) accordingly. Output ONLY the function code.`);
    expect(main).toContain(`Your previous main implementation:\n${usesAux}`);
  });

  it("formatters: the role's prompt on turn 1, the transition's prompt verbatim later", () => {
    const [auxFormatter, mainFormatter] = getTask("humaneval").formatters;
    expect(auxFormatter(sumOfPrimes)).toContain("Create a helper function named 'aux'");
    expect(mainFormatter(sumOfPrimes)).toContain("def sum_of_primes(numbers: List[int]):");
    expect(mainFormatter(sumOfPrimes, "feedback")).toBe("feedback");
  });
});

// Reference aux/main solutions for every bundled problem: each must earn the maximum, which checks the data too.
const REFERENCE: Record<string, [string, string]> = {
  below_zero: ["def aux(operations):\n    balances = []\n    total = 0\n    for op in operations:\n        total += op\n        balances.append(total)\n    return balances", "def below_zero(operations):\n    lows = [b for b in aux(operations) if b < 0]\n    return len(lows) > 0"],
  count_vowels: ["def aux(ch):\n    return ch.lower() in 'aeiou'", "def count_vowels(text):\n    count = 0\n    for ch in text:\n        if aux(ch):\n            count += 1\n    return count"],
  running_max: ["def aux(a, b):\n    return a if a > b else b", "def running_max(numbers):\n    out = []\n    for x in numbers:\n        out.append(x if not out else aux(out[-1], x))\n    return out"],
  is_palindrome_number: ["def aux(n):\n    return str(n)", "def is_palindrome_number(n):\n    digits = aux(n)\n    return digits == digits[::-1]"],
  circle_area: ["def aux(r):\n    return r * r", "def circle_area(radius):\n    squared = aux(radius)\n    return math.pi * squared"],
  second_largest: ["def aux(numbers):\n    return sorted(set(numbers), reverse=True)", "def second_largest(numbers):\n    distinct = aux(numbers)\n    if len(distinct) < 2:\n        return None\n    return distinct[1]"],
  sum_of_primes: [isPrime, usesAux],
  longest_word_length: ["def aux(word):\n    return word.strip('.,!?')", "def longest_word_length(sentence):\n    best = 0\n    for w in sentence.split():\n        best = max(best, len(aux(w)))\n    return best"],
  normalize_scores: ["def aux(scores):\n    return min(scores), max(scores)", "def normalize_scores(scores):\n    low, high = aux(scores)\n    if high == low:\n        return [0.0 for _ in scores]\n    return [(s - low) / (high - low) for s in scores]"],
  caesar_decode: ["def aux(ch, shift):\n    return chr((ord(ch) - ord('a') - shift) % 26 + ord('a'))", "def caesar_decode(text, shift):\n    out = []\n    for ch in text:\n        out.append(aux(ch, shift) if 'a' <= ch <= 'z' else ch)\n    return ''.join(out)"],
  count_anagram_pairs: ["def aux(word):\n    return ''.join(sorted(word))", "def count_anagram_pairs(words):\n    keys = [aux(w) for w in words]\n    pairs = 0\n    for i in range(len(keys)):\n        for j in range(i + 1, len(keys)):\n            if keys[i] == keys[j]:\n                pairs += 1\n    return pairs"],
  digit_root_sum: ["def aux(n):\n    while n >= 10:\n        n = sum(int(d) for d in str(n))\n    return n", "def digit_root_sum(n):\n    total = 0\n    for k in range(1, n + 1):\n        total += aux(k)\n    return total"],
};

describe("bundled problems", () => {
  it("every problem's reference solution earns 4.0, every test judged by the grader (none in-process)", async () => {
    const items = [...humanEvalProblems, ...coopHumanEvalProblems];
    const breakdowns = await Promise.all(
      items.map(async (item) => {
        const [aux, main] = REFERENCE[String(item.entry_point)];
        return codeRewardBreakdown(await analyzeCode(codeProblem(item), aux, main, { ...DEFAULT_EXECUTION, ...FAST }));
      }),
    );
    const byName = (pick: (b: (typeof breakdowns)[number]) => number) => Object.fromEntries(items.map((item, i) => [item.entry_point, pick(breakdowns[i])]));
    expect(byName((b) => b.total)).toEqual(Object.fromEntries(items.map((item) => [item.entry_point, 4])));
    expect(byName((b) => b.inProcessTests)).toEqual(Object.fromEntries(items.map((item) => [item.entry_point, 0])));
  });
});

describe("MAGRPO on the coding reward", () => {
  it("runs two steps on a tiny model; rewards are finite and within the task's range", async () => {
    const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-coding-"));
    await createTinyModel(path.join(scratch, "base"), { seed: 3, hiddenSize: 32, numLayers: 1 });
    const task = getTask("humaneval", { testTimeoutMs: 500 });
    const trainer = await MAGRPOTrainer.create({
      agents: [path.join(scratch, "base"), path.join(scratch, "base")],
      rewardFunc: task.rewardFunc,
      formatters: task.formatters,
      trainDataset: task.dataset({ limit: 2 }),
      outputDir: path.join(scratch, "run"),
      quiet: true,
      config: { numTurns: 1, numTrainEpochs: 1, numGenerations: 2, maxNewTokens: 8, evalInterval: 0, loggingSteps: 1 },
    });
    await trainer.train();
    await trainer.close();
    const rewards = readJsonlMetrics(path.join(scratch, "run", "metrics.jsonl"))
      .filter((r) => r.kind === "train" && typeof r["turn_1/reward_mean"] === "number")
      .map((r) => r["turn_1/reward_mean"] as number);
    expect(rewards.length).toBeGreaterThan(0);
    for (const r of rewards) {
      expect(Number.isFinite(r)).toBe(true);
      expect(r).toBeGreaterThanOrEqual(task.rewardRange![0]);
      expect(r).toBeLessThanOrEqual(task.rewardRange![1]);
    }
  }, 120_000);
});
