#!/usr/bin/env node
// Rewrites typedoc.baseline.json: the exports of src/index.ts that still lack a doc comment, and the types public
// signatures use but the package does not export, as TypeDoc's validation reports them. typedoc.json extends the
// baseline, so `npm run docs` fails on any export added without a doc comment, and — because TypeDoc also warns about
// a baseline name that is documented or gone — on a baseline that is not shrunk when one gets its comment. Run this
// after documenting: the list should only get shorter.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = new URL("../../", import.meta.url).pathname;
const options = JSON.parse(readFileSync(join(root, "typedoc.json"), "utf8"));
delete options.extends;
options.tsconfig = join(root, options.tsconfig);
options.entryPoints = options.entryPoints.map((entry) => join(root, entry));
const work = mkdtempSync(join(tmpdir(), "typedoc-baseline-"));
const file = join(work, "typedoc.json");
writeFileSync(file, JSON.stringify({ ...options, treatWarningsAsErrors: false }));
const run = spawnSync(join(root, "node_modules", ".bin", "typedoc"), ["--options", file, "--emit", "none"], { cwd: root, encoding: "utf8" });
rmSync(work, { recursive: true, force: true });
const output = `${run.stdout}\n${run.stderr}`;
const lines = output.replace(/\x1b\[[0-9;]*m/g, "").split("\n");
const undocumented = new Set();
const unexported = new Set();
const other = [];
for (const line of lines) {
  let match;
  if ((match = /^\[warning\] (\S+) \([A-Za-z]+\), defined in .* does not have any documentation$/.exec(line))) undocumented.add(match[1]);
  else if ((match = /^\[warning\] (\S+), defined in .* is referenced by .* but not included in the documentation$/.exec(line))) unexported.add(match[1]);
  else if (line.startsWith("[warning]") && !line.includes("Found 0 errors")) other.push(line);
}
if (other.length > 0) {
  console.error(`typedoc-baseline: warnings a baseline cannot hold; fix them first:\n${other.join("\n")}`);
  process.exit(1);
}
const baseline = { intentionallyNotDocumented: [...undocumented].sort(), intentionallyNotExported: [...unexported].sort() };
writeFileSync(join(root, "typedoc.baseline.json"), JSON.stringify(baseline, null, 2) + "\n");
console.log(`typedoc-baseline: ${undocumented.size} undocumented, ${unexported.size} unexported in typedoc.baseline.json`);
