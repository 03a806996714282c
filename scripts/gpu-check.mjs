#!/usr/bin/env node
// The GPU checks scripts/gpu-check.sh runs once the addon is there, cheap correctness first (scripts/gpu-check/
// correctness.mjs), then throughput and training (throughput.mjs), then the long rows: transformers on the same
// device, DDP, load cost and seeded repeats (late.mjs). Each row is PASS, FAIL or SKIP (with the reason), survives
// the failure of any other, runs under its own time budget inside the run's (GPU_CHECK_DEADLINE), and is written to
// the JSON file as soon as it ends (harness.mjs). DEVICE=cpu runs every row that has a CPU analogue on the CPU with
// small shapes (what CI runs: every row must PASS or SKIP there); rows that need a GPU SKIP.
//   node scripts/gpu-check.mjs <device> <out.json>
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { correctnessRows } from "./gpu-check/correctness.mjs";
import { prepareFixtures } from "./gpu-check/fixtures.mjs";
import { Harness } from "./gpu-check/harness.mjs";
import { lateRows } from "./gpu-check/late.mjs";
import { halfBillionRow, throughputRows } from "./gpu-check/throughput.mjs";

const [device = "cuda:0", outFile = "gpu-check.json"] = process.argv.slice(2);
const h = new Harness(device, outFile);
// A promise a row left behind must not end the run and lose the rows after it.
process.on("unhandledRejection", (reason) => console.log(`gpu-check: a row left a rejected promise: ${String(reason?.message ?? reason).split("\n")[0]}`));
const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-gpu-check-"));

let fixtures = null;
await h.check("fixtures: a random model sized for the device", async () => {
  fixtures = await prepareFixtures(h, scratch);
  return { ok: true, detail: `${fixtures.prompts.length} prompts, up to ${fixtures.keys} keys per sequence (${fixtures.bitwise ? "equal-bits rows judged to the bit" : "equal-bits rows judged by tolerance"})` };
}, { estimate: { gpu: 3, cpu: 3 } });
if (fixtures) {
  await correctnessRows(h, fixtures, scratch);
  const decodes = await throughputRows(h, fixtures, scratch);
  const halfB = await halfBillionRow(h, scratch);
  await lateRows(h, fixtures, scratch, { decodes, halfB });
}
process.exit(h.finish());
