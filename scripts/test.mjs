#!/usr/bin/env node
// `npm test`: runs vitest and ends with the one line CI reads, "N passed, N failed, N skipped".
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

const dir = mkdtempSync(path.join(tmpdir(), "comlrl-test-"));
const report = path.join(dir, "vitest.json");
const vitest = path.resolve("node_modules", ".bin", "vitest");
const run = spawnSync(vitest, ["run", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`, ...process.argv.slice(2)], {
  stdio: "inherit",
});
let passed = 0;
let failed = 0;
let skipped = 0;
if (existsSync(report)) {
  const result = JSON.parse(readFileSync(report, "utf8"));
  passed = result.numPassedTests;
  failed = result.numFailedTests;
  skipped = result.numPendingTests + result.numTodoTests;
  // A suite that failed to load counts as a failure even though none of its tests ran.
  failed += result.testResults.filter((file) => file.status === "failed" && file.assertionResults.length === 0).length;
}
rmSync(dir, { recursive: true, force: true });
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(run.status === 0 && failed === 0 && passed > 0 ? 0 : 1);
