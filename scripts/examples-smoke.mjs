#!/usr/bin/env node
// Runs every example in examples/ (scripts and config files) at a tiny size, each under its own time limit, so that none rots: a tiny model is
// made here (nothing is downloaded) and handed to the examples through COMLRL_MODEL; each example gets arguments that
// keep it short. An example file without an entry below fails the run, so a new example cannot skip the smoke test.
//   node scripts/examples-smoke.mjs [--timeout 30] [NAME…]     (needs `npm run build:ts` and the native addon)
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

const root = new URL("../", import.meta.url).pathname;
const { values, positionals } = parseArgs({ options: { timeout: { type: "string", default: "30" } }, allowPositionals: true });
const limitSeconds = Number(values.timeout);

const work = mkdtempSync(join(tmpdir(), "comlrl-examples-"));
const out = (name) => join(work, name);
const tsx = join(root, "node_modules", ".bin", "tsx");
const ex = (file) => join(root, "examples", file);
const cli = join(root, "dist", "cli", "main.js");

/** How each example runs at smoke size: the command, its arguments, and where it starts (default: a scratch directory). */
const RUNS = {
  "quickstart.ts": [tsx, [ex("quickstart.ts")]],
  "alternating-trainers.ts": [tsx, [ex("alternating-trainers.ts"), "--items", "2", "--epochs", "1", "--out", out("alternating")]],
  "story-len-ratio.ts": [tsx, [ex("story-len-ratio.ts"), "--items", "2", "--epochs", "1", "--out", out("story")]],
  "tldr-len-ratio.ts": [tsx, [ex("tldr-len-ratio.ts"), "--items", "2", "--epochs", "1", "--out", out("tldr")]],
  "tldr-len-ratio-iac.ts": [tsx, [ex("tldr-len-ratio-iac.ts"), "--items", "2", "--epochs", "1", "--out", out("tldr-iac")]],
  "tldr-len-ratio-maac.ts": [tsx, [ex("tldr-len-ratio-maac.ts"), "--items", "2", "--epochs", "1", "--out", out("tldr-maac")]],
  "checkpoint-resume.ts": [tsx, [ex("checkpoint-resume.ts"), "--items", "4", "--out", out("checkpoint")]],
  // The tiny model through COMLRL_MODEL, as every example here: SmolLM2 itself would not fit the time limit.
  "real-model.ts": [tsx, [ex("real-model.ts"), "--items", "2", "--epochs", "1", "--out", out("real-model")]],
  "centralized-magrpo.ts": [tsx, [ex("centralized-magrpo.ts"), "--items", "2", "--epochs", "1", "--out", out("centralized")]],
  "iterative-madpo.ts": [tsx, [ex("iterative-madpo.ts"), "--items", "2", "--epochs", "2", "--out", out("iterative")]],
  // MADPO only: the MARLHF recipe (four reward-model epochs, then RL) does not fit the time limit even at 4 items.
  "preference-cover-vowels.ts": [tsx, [ex("preference-cover-vowels.ts"), "--algorithm", "madpo", "--items", "4", "--out", out("preference")]],
  "credit-study.ts": [tsx, [ex("credit-study.ts"), "--seeds", "1", "--env-steps", "48", "--out", out("credit")]],
  "configs/magrpo-cover-vowels.yaml": [process.execPath, [cli, "train", "--config", join(work, "magrpo-cover-vowels.yaml"), "--output", out("train"), "--quiet"]],
  // comlrl launch runs a .ts script through the tsx of the directory it starts in: this checkout's.
  "ddp-demo.ts": [process.execPath, [cli, "launch", "--nproc", "2", ex("ddp-demo.ts"), "--epochs", "2", "--out", out("ddp")], root],
};
const HELPERS = new Set(["common.ts"]);

const files = [
  ...readdirSync(join(root, "examples")).filter((f) => f.endsWith(".ts") && !HELPERS.has(f)),
  ...readdirSync(join(root, "examples", "configs")).map((f) => `configs/${f}`),
];
const missing = files.filter((f) => !(f in RUNS));
if (missing.length > 0) {
  console.error(`examples-smoke: no smoke run for ${missing.join(", ")}: add it to RUNS in scripts/examples-smoke.mjs`);
  process.exit(1);
}
const chosen = positionals.length > 0 ? files.filter((f) => positionals.some((p) => f.startsWith(p))) : files;

const { createTinyModel } = await import(join(root, "dist", "index.js"));
const model = join(work, "tiny-model");
await createTinyModel(model, { seed: 1 });
// Config files name a hub model; their smoke runs train the tiny one instead.
for (const file of files.filter((f) => f.startsWith("configs/"))) {
  const text = readFileSync(join(root, "examples", file), "utf8");
  writeFileSync(join(work, file.slice("configs/".length)), text.replace(/^(\s+name:) \S+/m, `$1 ${model}`));
}

let running;
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    if (running !== undefined) process.kill(-running.pid, "SIGKILL");
    rmSync(work, { recursive: true, force: true });
    process.exit(1);
  });
}

function run(file) {
  const [command, args, cwd = work] = RUNS[file];
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      cwd,
      env: { ...process.env, COMLRL_MODEL: model, INIT_CWD: root },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    running = child;
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      process.kill(-child.pid, "SIGKILL");
    }, limitSeconds * 1000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ file, code, timedOut, seconds: (performance.now() - started) / 1000, output });
    });
  });
}

let failed = 0;
for (const file of chosen) {
  const result = await run(file);
  const ok = result.code === 0 && !result.timedOut;
  if (!ok) failed++;
  const why = result.timedOut ? `timed out after ${limitSeconds} s` : `exit ${result.code}`;
  console.log(`examples-smoke: ${ok ? "ok  " : "FAIL"} ${file} ${result.seconds.toFixed(1)} s${ok ? "" : ` (${why})`}`);
  if (!ok) console.log(result.output.split("\n").slice(-25).join("\n"));
}
rmSync(work, { recursive: true, force: true });
console.log(`examples-smoke: ${chosen.length - failed} of ${chosen.length} examples ran`);
process.exit(failed > 0 ? 1 : 0);
