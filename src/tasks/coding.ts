// The paper's coding tasks (LLM_Collab_Code_Generation; HumanEval, CoopHumanEval): an aux agent writes a helper
// `aux(...)`, a main agent writes the problem's entry point, which may call it. The shared reward (max 4.0):
//   L1  +0.4 aux defined with a return; +0.6 main defined with a return (missing main: stop)
//   L2  +0.5 the combined code (prompt imports + aux + main) parses (else stop)
//   L3  +passed/total over the problem's asserts, run in the sandbox (10 s each, after 3 timeouts the rest are skipped)
//       and judged by its grader, out of the code's reach (see sandbox/python/grader.py);
//       when a test passed and aux exists: +0.5 if main calls aux, and then +1.0 if main is not a thin wrapper
//       around aux and −0.5 if main calls aux as a bare statement, ignoring its result
// Static checks follow the upstream text-level rules; syntax, loading and tests run in one sandboxed Python process
// per joint action. Multi-turn: `level_feedback` feeds those diagnostics back, `plain` only asks for a revision.
import type { ExternalTransition, Formatter, Item, RewardFunction } from "../rollout/types.js";
import { runSandboxed, type SandboxMode, type SandboxResult } from "../sandbox/sandbox.js";

// ---------------------------------------------------------------- reading completions

/** The import lines of a problem's prompt, each once, in order. */
export function extractImports(prompt: string): string {
  const lines = prompt
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => /^from\s+[\w.]+\s+import\s+.*$/.test(line) || /^import\s+[\w.,\s]+$/.test(line));
  return [...new Set(lines)].join("\n");
}

const DEF = /^(\s*)def\s+\w+\s*\(/;
const indentOf = (line: string) => line.length - line.trimStart().length;
const isDocstringStart = (stripped: string) => stripped.startsWith('"""') || stripped.startsWith("'''");
const PROSE_LINE = /^[A-Z][a-z].*[.!?:]$/;
const CODE_MARKS = ["def ", "return ", "if ", "for ", "while ", "=", "(", ")", "[", "]"];

/** The function definitions in a completion, without markdown fences, surrounding prose or stray statements. */
export function cleanupCode(code: string): string {
  const lines = code.replace(/```python\s*\n?/g, "").replace(/```\s*\n?/g, "").split("\n");
  const blocks: string[] = [];
  let current: string[] | null = null;
  let base = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const stripped = line.trim();
    if (DEF.test(line)) {
      if (current) blocks.push(current.join("\n"));
      current = [line];
      base = indentOf(line);
    } else if (current) {
      if (stripped === "" || line.startsWith(" ".repeat(base + 1)) || line.startsWith("\t")) {
        current.push(line);
      } else if (isDocstringStart(stripped)) {
        // A docstring at the def's own indentation still belongs to it; take it whole.
        current.push(line);
        const quote = stripped.slice(0, 3);
        if (!(stripped.endsWith(quote) && stripped.length > 3)) {
          while (++i < lines.length) {
            current.push(lines[i]);
            if (lines[i].includes(quote)) break;
          }
        }
      } else {
        blocks.push(current.join("\n"));
        current = null;
      }
    }
  }
  if (current) blocks.push(current.join("\n"));
  const result = blocks
    .join("\n\n")
    .split("\n")
    .filter((line) => {
      const stripped = line.trim();
      const prose = stripped && !stripped.startsWith("#") && !isDocstringStart(stripped) && !CODE_MARKS.some((m) => line.includes(m)) && PROSE_LINE.test(stripped);
      return !prose;
    })
    .join("\n")
    .trim();
  return /def\s+\w+\s*\(/.test(result) ? result : "";
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The (last-started) definition of `name` in a completion, or "" when it has none. */
export function extractFunction(code: string, name: string): string {
  if (!code || !name) return "";
  const start = new RegExp(`^(\\s*)def\\s+${escapeRegExp(name)}\\s*\\(`);
  let lines: string[] = [];
  let inside = false;
  let base = 0;
  for (const line of cleanupCode(code).split("\n")) {
    if (start.test(line)) {
      lines = [line];
      inside = true;
      base = indentOf(line);
    } else if (inside) {
      if (line.trim() === "" || line.startsWith(" ".repeat(base + 1)) || line.startsWith("\t")) lines.push(line);
      else break;
    }
  }
  return lines.join("\n").trim();
}

export function checkDefinition(code: string, name: string, description: string): { ok: boolean; message: string } {
  const func = extractFunction(code, name);
  if (!func) return { ok: false, message: `${description} not defined` };
  if (!/return\s+/.test(func)) return { ok: false, message: `${description} missing return statement` };
  return { ok: true, message: `${description} properly defined with return statement` };
}

/** The problem's asserts on `candidate`, one statement each, with the entry point's name put in. */
export function extractTestCases(test: string, entryPoint: string): string[] {
  if (!test || !entryPoint) return [];
  const body = /def check\(candidate\):([\s\S]*?)(?=\n\ndef|$)/.exec(test)?.[1];
  if (body === undefined) return [];
  const asserts = body
    .trim()
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => /^assert\s+.*candidate/.test(line));
  return [...new Set(asserts)].map((line) => line.replaceAll("candidate", entryPoint));
}

export const mainCallsAux = (mainFunc: string): boolean => /\baux\s*\(/.test(mainFunc);

/** Code lines of a function body: no blank lines, comments, docstrings or the def line. */
function bodyLines(func: string): string[] {
  const lines: string[] = [];
  let inDocstring = false;
  for (const raw of func.split("\n")) {
    const stripped = raw.trim();
    if (!stripped) continue;
    if (isDocstringStart(stripped)) {
      if (!(stripped.endsWith(stripped.slice(0, 3)) && stripped.length > 3)) inDocstring = true;
      continue;
    }
    if (inDocstring) {
      if (stripped.includes('"""') || stripped.includes("'''")) inDocstring = false;
      continue;
    }
    if (stripped.startsWith("#") || stripped.startsWith("def ")) continue;
    lines.push(stripped);
  }
  return lines;
}

/** Main only hands back what aux returns: `return aux(...)`, or `r = aux(...)` then `return r` (or an empty body). */
export function isThinWrapper(mainFunc: string): boolean {
  if (!mainFunc) return false;
  const lines = bodyLines(mainFunc);
  if (lines.length === 0) return true;
  if (lines.length === 1) return lines[0].startsWith("return ") && lines[0].includes("aux");
  if (lines.length === 2) {
    const assigned = /(\w+)\s*=\s*aux\s*\(/.exec(lines[0]);
    return assigned !== null && lines[1] === `return ${assigned[1]}`;
  }
  return false;
}

/** Lines of main that call aux as a bare statement, throwing its result away. */
export function ignoredAuxCalls(mainFunc: string): string[] {
  return mainFunc
    .split("\n")
    .map((line, i) => ({ line: line.trim(), number: i + 1 }))
    .filter(({ line }) => /^aux\s*\(.*\)\s*;?$/.test(line))
    .map(({ line, number }) => `Line ${number}: ${line}`);
}

// ---------------------------------------------------------------- analysis (static + sandboxed)

export interface CodeProblem {
  prompt: string;
  entryPoint: string;
  test: string;
}

export function codeProblem(item: Item): CodeProblem {
  const text = (name: string) => {
    const value = item[name];
    if (typeof value !== "string" || !value) throw new Error(`coding task item has no "${name}" string (HumanEval format: prompt, entry_point, test)`);
    return value;
  };
  return { prompt: text("prompt"), entryPoint: text("entry_point"), test: text("test") };
}

export interface ExecutionSettings {
  sandbox: SandboxMode;
  testTimeoutMs: number;
  maxTimeouts: number;
}

export const DEFAULT_EXECUTION: ExecutionSettings = { sandbox: "bwrap", testTimeoutMs: 10_000, maxTimeouts: 3 };

export interface CodeAnalysis {
  auxFunc: string;
  mainFunc: string;
  aux: { ok: boolean; message: string };
  main: { ok: boolean; message: string };
  combinedCode: string;
  tests: string[];
  /** The sandboxed run (syntax, load, tests); null when main is missing, so nothing ran. */
  execution: SandboxResult | null;
  mainCallsAux: boolean;
  thinWrapper: boolean;
  ignoredAuxCalls: string[];
}

export async function analyzeCode(problem: CodeProblem, auxCompletion: string, mainCompletion: string, settings: ExecutionSettings): Promise<CodeAnalysis> {
  const auxFunc = extractFunction(auxCompletion, "aux");
  const mainFunc = extractFunction(mainCompletion, problem.entryPoint);
  const main = checkDefinition(mainCompletion, problem.entryPoint, `Main function (${problem.entryPoint})`);
  const combinedCode = [extractImports(problem.prompt), cleanupCode(auxFunc), cleanupCode(mainFunc)].filter(Boolean).join("\n\n");
  const tests = extractTestCases(problem.test, problem.entryPoint);
  const execution = main.ok
    ? await runSandboxed({
        code: combinedCode,
        tests,
        entryPoint: problem.entryPoint,
        testSetup: extractImports(problem.prompt),
        mode: settings.sandbox,
        testTimeoutMs: settings.testTimeoutMs,
        maxTimeouts: settings.maxTimeouts,
      })
    : null;
  return {
    auxFunc,
    mainFunc,
    aux: checkDefinition(auxCompletion, "aux", "Aux function"),
    main,
    combinedCode,
    tests,
    execution,
    mainCallsAux: mainCallsAux(mainFunc),
    thinWrapper: isThinWrapper(mainFunc),
    ignoredAuxCalls: ignoredAuxCalls(mainFunc),
  };
}

export interface CodeRewardBreakdown {
  definitions: number;
  syntax: number;
  tests: number;
  usesAux: number;
  notWrapper: number;
  ignoredResult: number;
  total: number;
  /** Tests that ran in the code's own process (the harness could not split them), so their verdicts could be forged. */
  inProcessTests: number;
  /** The level the pair stopped at, or null when it reached the tests. */
  stoppedAt: 1 | 2 | 3 | null;
}

/**
 * The reward's parts. With strictTests (the default) a test that ran in the code's own process scores 0 even when
 * it passed: the code could have forged that verdict, and a policy trained on forgeable verdicts learns to forge.
 */
export function codeRewardBreakdown(analysis: CodeAnalysis, strictTests = true): CodeRewardBreakdown {
  const r: CodeRewardBreakdown = { definitions: 0, syntax: 0, tests: 0, usesAux: 0, notWrapper: 0, ignoredResult: 0, total: 0, inProcessTests: analysis.execution?.inProcess ?? 0, stoppedAt: 1 };
  const finish = (stoppedAt: CodeRewardBreakdown["stoppedAt"]) => {
    r.stoppedAt = stoppedAt;
    r.total = r.definitions + r.syntax + r.tests + r.usesAux + r.notWrapper + r.ignoredResult;
    return r;
  };
  if (analysis.aux.ok) r.definitions += 0.4;
  if (!analysis.main.ok || !analysis.execution) return finish(1);
  r.definitions += 0.6;
  if (!analysis.execution.syntaxOk) return finish(2);
  r.syntax = 0.5;
  if (analysis.tests.length === 0) return finish(3);
  const passed = strictTests ? analysis.execution.results.filter((t) => t.status === "pass" && !t.inProcess).length : analysis.execution.passed;
  r.tests = passed / analysis.tests.length;
  if (passed > 0 && analysis.auxFunc && analysis.mainCallsAux) {
    r.usesAux = 0.5;
    if (!analysis.thinWrapper) r.notWrapper = 1;
    if (analysis.ignoredAuxCalls.length > 0) r.ignoredResult = -0.5;
  }
  return finish(null);
}

/** Reward and transition look at the same joint actions; one sandboxed run serves both. */
class AnalysisCache {
  private entries = new Map<string, Promise<CodeAnalysis>>();
  constructor(private readonly capacity = 512) {}

  get(problem: CodeProblem, aux: string, main: string, settings: ExecutionSettings): Promise<CodeAnalysis> {
    const key = JSON.stringify([problem, aux, main, settings]);
    let analysis = this.entries.get(key);
    if (analysis) {
      this.entries.delete(key);
    } else {
      analysis = analyzeCode(problem, aux, main, settings);
      analysis.catch(() => this.entries.delete(key));
    }
    this.entries.set(key, analysis);
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
    return analysis;
  }
}

export interface CodeRewardOptions extends Partial<ExecutionSettings> {
  /** Subtract 4, so the reward lies in [−4, 0] (upstream's reward_processor.shift = −4). */
  shift?: boolean;
  /** Tests the grader could not split score 0 (default true; false counts them, as upstream does). */
  strictTests?: boolean;
}

export const CODE_REWARD_MAX = 4;

function settingsOf(options: Partial<ExecutionSettings>): ExecutionSettings {
  return { ...DEFAULT_EXECUTION, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) };
}

/** The shared reward for aux/main joint actions; the item carries the problem (prompt, entry_point, test). */
export function codeRewardFunc(options: CodeRewardOptions = {}, cache = new AnalysisCache()): RewardFunction {
  const settings = settingsOf(options);
  const offset = options.shift ? -CODE_REWARD_MAX : 0;
  return async (completions, context) => {
    if (completions.length !== 2) throw new Error(`the coding reward needs 2 agents (aux, main), got ${completions.length}`);
    const problem = codeProblem(context.item);
    const analyses = await Promise.all(completions[0].map((aux, j) => cache.get(problem, aux, completions[1][j], settings)));
    return analyses.map((a) => codeRewardBreakdown(a, options.strictTests ?? true).total + offset);
  };
}

// ---------------------------------------------------------------- prompts

function signatureParams(prompt: string): string[] {
  const params = /def\s+\w+\s*\(([^)]+)\)/.exec(prompt)?.[1] ?? "";
  return params.split(",").map((p) => p.trim()).filter(Boolean);
}

const OUTPUT_RULES =
  "- Output ONLY the function code, no explanations or examples\n" +
  "- Do NOT include markdown code blocks (```python)\n" +
  "- Do NOT include any text before or after the function\n" +
  "- Do NOT include test cases or example usage\n";

export function auxPrompt(problem: CodeProblem): string {
  return (
    `Create a helper function for this coding problem.\n\nProblem:\n${problem.prompt}\n\nIMPORTANT INSTRUCTIONS:\n${OUTPUT_RULES}` +
    "- Create a helper function named 'aux' that can assist the main function\n" +
    "- The function should return useful data for solving the problem\n\n" +
    "Your output should follow this format:\n\ndef aux(...):\n    # your function code here\n    return result\n"
  );
}

export function mainPrompt(problem: CodeProblem): string {
  const params = signatureParams(problem.prompt).join(", ");
  return (
    `Solve this coding problem by implementing the required function.\n\nProblem:\n${problem.prompt}\n\n` +
    `You have access to a helper function: aux(...)\n\nIMPORTANT INSTRUCTIONS:\n${OUTPUT_RULES}` +
    "- Do NOT redefine the aux() function\n" +
    `- Implement ONLY the '${problem.entryPoint}' function as specified\n` +
    "- You can call aux() to assign value to a variable within your function if helpful\n\n" +
    `Your output should follow this format:\n\ndef ${problem.entryPoint}(${params}):\n    # your function code here\n    return result\n`
  );
}

/** First turn: the role's prompt from the problem; later turns: the transition's prompt as it is. */
export const codeFormatters: Formatter[] = [auxPrompt, mainPrompt].map(
  (build) =>
    (item: Item, externalPrompt?: string) =>
      externalPrompt ?? build(codeProblem(item)),
);

// ---------------------------------------------------------------- multi-turn transitions

export type CodeTransitionMode = "level_feedback" | "plain";

function history(title: string, prompts: string[], responsesTitle: string, responses: string[]): string[] {
  const lines: string[] = [];
  if (prompts.length > 0) lines.push(title, ...prompts.map((p, t) => `- Turn ${t + 1} prompt:\n${p}`), "");
  if (responses.length > 0) lines.push(responsesTitle, ...responses.map((r, t) => `- Turn ${t + 1} response:\n${r}`), "");
  return lines;
}

function diagnostics(a: CodeAnalysis, order: ("aux" | "main")[]): string[] {
  const found = (check: { ok: boolean; message: string }) => `${check.ok ? "FOUND" : "MISSING"} (${check.message})`;
  const lines = ["Static and execution diagnostics:", ...order.map((role) => (role === "aux" ? `- Aux definition: ${found(a.aux)}` : `- Main definition: ${found(a.main)}`))];
  const run = a.execution;
  if (!run) {
    lines.push("- Syntax: not checked (no main function to run)");
    return lines;
  }
  lines.push(`- Syntax: ${run.syntaxOk ? "OK (Combined code syntax OK)" : "ERROR (Combined code has a syntax error)"}`);
  if (run.syntaxError) lines.push(`  SyntaxError at line ${run.syntaxError.line}, col ${run.syntaxError.offset}: ${run.syntaxError.message}`);
  if (!run.syntaxOk) return lines;
  if (run.loadError) lines.push(`- Loading the code failed: ${run.loadError.errorType}: ${run.loadError.message}`);
  if (a.tests.length === 0) {
    lines.push("- Tests: no test cases found");
    return lines;
  }
  lines.push(`- Tests: ${run.passed}/${a.tests.length} passed`);
  for (const result of run.results) {
    if (result.status !== "pass") lines.push(`  Failed case: ${result.test} -> ${result.errorType ?? result.status}: ${result.message ?? ""}`);
  }
  return lines;
}

function auxUsage(a: CodeAnalysis): string[] {
  if (!a.main.ok) return [];
  const lines = [
    !a.mainCallsAux
      ? "- Aux usage: main does NOT call aux"
      : a.ignoredAuxCalls.length > 0
        ? `- Aux usage: called but misused (${a.ignoredAuxCalls.slice(0, 2).join(", ")})`
        : "- Aux usage: main calls aux and uses its result",
  ];
  if (a.thinWrapper) lines.push("- Warning: main appears to be a thin wrapper over aux");
  return lines;
}

function levelFeedbackPrompts(a: CodeAnalysis, entryPoint: string, prompts: string[][], responses: string[][]): string[] {
  const aux = [
    ...history("History: previous prompts:", prompts[0], "History: your previous aux(...) responses:", responses[0]),
    ...diagnostics(a, ["aux", "main"]),
    "\nRevise your aux(...) accordingly. Output ONLY the function code with no extra text.",
  ];
  const main = [
    ...history("History: previous prompts:", prompts[1], "History: your previous main responses:", responses[1]),
    ...diagnostics(a, ["main", "aux"]),
    ...auxUsage(a),
    `\nRevise your ${entryPoint}(...) accordingly. Output ONLY the function code with no extra text.`,
  ];
  return [aux.join("\n"), main.join("\n")];
}

function plainPrompts(a: CodeAnalysis, entryPoint: string): string[] {
  return [
    ["Your previous aux(...) implementation:", a.auxFunc || "<no implementation found>", "", "Revise your aux(...) accordingly. Output ONLY the function code."].join("\n"),
    ["Your previous main implementation:", a.mainFunc || "<no implementation found>", "", `Revise your ${entryPoint}(...) accordingly. Output ONLY the function code.`].join("\n"),
  ];
}

/** The next turn's prompts for aux and main from the branch's last joint action. */
export function codeTransition(mode: CodeTransitionMode, options: Partial<ExecutionSettings> = {}, cache = new AnalysisCache()): ExternalTransition {
  const settings = settingsOf(options);
  return async ({ agentCompletions, numAgents, promptHistoryPerAgent, responseHistoryPerAgent, item }) => {
    if (numAgents !== 2) throw new Error(`the coding transition needs 2 agents (aux, main), got ${numAgents}`);
    const problem = codeProblem(item);
    const analysis = await cache.get(problem, agentCompletions[0], agentCompletions[1], settings);
    return mode === "plain" ? plainPrompts(analysis, problem.entryPoint) : levelFeedbackPrompts(analysis, problem.entryPoint, promptHistoryPerAgent, responseHistoryPerAgent);
  };
}

/** The reward and transition of one task, sharing the sandboxed runs. */
export function codingEnvironment(options: CodeRewardOptions & { mode?: CodeTransitionMode }) {
  const cache = new AnalysisCache();
  return { rewardFunc: codeRewardFunc(options, cache), externalTransition: codeTransition(options.mode ?? "level_feedback", options, cache) };
}
