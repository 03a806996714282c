// One load measured in a process of its own: node --import tsx load-memory-child.ts <model dir>. Prints JSON with
// the resident memory before the load and the peak during it (VmHWM, reset first through clear_refs), the longest
// gap between ticks of a 10 ms timer while the load ran, and the load's wall time.
import { readFileSync, writeFileSync } from "node:fs";
import { CausalLM } from "../../src/models/causal-lm.js";
import { addon } from "../../src/native/loader.js";

const status = (field: string): number => {
  const line = readFileSync("/proc/self/status", "utf8").split("\n").find((l) => l.startsWith(`${field}:`));
  if (!line) throw new Error(`/proc/self/status has no ${field}`);
  return Number(line.split(/\s+/)[1]) * 1024;
};

const dir = process.argv[2]!;
// The addon loads, and the CPU lane and its thread pool start, before the baseline: they are the process's, not the
// load's. (Nothing as large as a weight runs first: the CPU cache would keep its blocks and hide the load's growth.)
const small = new Float32Array(64 * 64).fill(1);
await addon().matmulAsync(small, [64, 64], small, [64, 64], 1);
const baseline = status("VmRSS");
writeFileSync("/proc/self/clear_refs", "5");  // VmHWM := VmRSS
let last = performance.now();
let maxGapMs = 0;
const timer = setInterval(() => {
  const now = performance.now();
  maxGapMs = Math.max(maxGapMs, now - last);
  last = now;
}, 10);
const started = performance.now();
const model = await CausalLM.fromDirectory(dir);
const seconds = (performance.now() - started) / 1000;
const peak = status("VmHWM");
clearInterval(timer);
maxGapMs = Math.max(maxGapMs, performance.now() - last);
console.log(JSON.stringify({ baseline, peak, maxGapMs, seconds, parameters: model.info().parameterCount }));
