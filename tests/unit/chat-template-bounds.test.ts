// A model's chat template is code from the model repository: one that loops range(10^9), nests loops, or doubles a
// string is stopped with an error naming the template, where rendering it once took the whole heap (a fatal V8
// out-of-memory that ended the process). The hostile cases run in a child with a 256 MiB heap, so a template that
// still exhausts memory crashes the child (and fails the test), never the machine.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { buildByteLevelBpeTokenizer } from "../../src/models/tiny-tokenizer.js";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";

const messages = [{ role: "user", content: "hi" }];

/** applyChatTemplate with `template` in a child under a 256 MiB heap: what it printed and how it ended. */
function renderInChild(template: string): { stdout: string; status: number | null; signal: string | null; stderr: string } {
  const body = `import { buildByteLevelBpeTokenizer } from ${JSON.stringify(path.resolve("src/models/tiny-tokenizer.ts"))};
    import { ComlrlTokenizer } from ${JSON.stringify(path.resolve("src/models/tokenizer.ts"))};
    const tiny = buildByteLevelBpeTokenizer();
    const tok = ComlrlTokenizer.fromJson({ ...tiny, source: "hostile/model", tokenizerConfig: { ...tiny.tokenizerConfig, chat_template: ${JSON.stringify(template)} } });
    try { console.log("rendered " + tok.applyChatTemplate(${JSON.stringify(messages)}).length); } catch (error) { console.log(error.message); }`;
  const run = spawnSync(process.execPath, ["--max-old-space-size=256", "--import", "tsx", "--input-type=module", "-e", body], { encoding: "utf8", timeout: 60_000 });
  return { stdout: run.stdout.trim(), status: run.status, signal: run.signal, stderr: run.stderr.slice(-300) };
}

describe("chat template bounds", () => {
  it("range(10^9) is refused, naming the template, before the list is built", () => {
    const run = renderInChild("{% for i in range(1000000000) %}x{% endfor %}");
    expect({ status: run.status, signal: run.signal }, run.stderr).toEqual({ status: 0, signal: null });
    expect(run.stdout).toMatch(/^The chat template of hostile\/model failed: range\(\) of 1000000000 items is over the 100000 a chat template may make/);
  });

  it("nested loops are stopped after a bounded number of steps", () => {
    const run = renderInChild("{% for i in range(1000) %}{% for j in range(1000) %}{{ j }}{% endfor %}{% endfor %}");
    expect({ status: run.status, signal: run.signal }, run.stderr).toEqual({ status: 0, signal: null });
    expect(run.stdout).toMatch(/^The chat template of hostile\/model failed: rendering took over 250000 steps/);
  });

  it("a string doubled past the output bound is stopped", () => {
    const run = renderInChild("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}");
    expect({ status: run.status, signal: run.signal }, run.stderr).toEqual({ status: 0, signal: null });
    expect(run.stdout).toMatch(/^The chat template of hostile\/model failed: a value of \d+ characters is over the 16777216 a chat template may make/);
  });

  it("a list holding itself twice, doubled in a loop, is stopped before tojson prints its 2^26 leaves", () => {
    const started = performance.now();
    const run = renderInChild("{% set ns = namespace(l=[1]) %}{% for i in range(26) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l|tojson }}");
    expect({ status: run.status, signal: run.signal }, run.stderr).toEqual({ status: 0, signal: null });
    expect(run.stdout).toMatch(/^The chat template of hostile\/model failed: a list or mapping that would print as over 16777216 characters/);
    expect(performance.now() - started).toBeLessThan(20_000);
  });

  it("a render that runs past the time bound in few steps is stopped", () => {
    const run = renderInChild(
      "{% set ns = namespace(s='x', n=0) %}{% for i in range(23) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}" +
        "{% for i in range(5000) %}{% set ns.n = ns.n + (ns.s|replace('x', 'y')|length) %}{% endfor %}{{ ns.n }}",
    );
    expect({ status: run.status, signal: run.signal }, run.stderr).toEqual({ status: 0, signal: null });
    expect(run.stdout).toMatch(/^The chat template of hostile\/model failed: rendering took over 10 s/);
  });

  it("ordinary templates render as before, with range, loops and strftime_now", () => {
    const tiny = buildByteLevelBpeTokenizer();
    const template = "{% for m in messages %}{{ m.role }}:{{ m.content }}{% for i in range(3) %}{{ i }}{% endfor %}{% endfor %}|{{ strftime_now('%Y') | length }}|{{ true }}";
    const tok = ComlrlTokenizer.fromJson({ ...tiny, source: "tiny", tokenizerConfig: { ...tiny.tokenizerConfig, chat_template: template } });
    expect(tok.applyChatTemplate(messages)).toBe("user:hi012|4|true");
  });
});
