#!/usr/bin/env node
// Writes the generated parts of README.md and docs/*.md, so that they cannot drift from what they describe. A page
// marks each part with <!-- generated: KIND ARGS --> … <!-- /generated -->:
//   config-table MAGRPOConfig            every field of a registered trainer's config: name, file key, default, accepted
//                                        values, description (fields and defaults from the compiled trainer registry,
//                                        dist/trainers/builtins.js — run `npm run build:ts` first — descriptions from
//                                        the doc comments on the field specs, which each config's derived type carries)
//   config-table MAACConfig vs IACConfig only the fields that are new or differ
//   task-table                           the built-in tasks (dist/tasks/registry.js)
//   example examples/quickstart.ts       the file as a code block (every example is type-checked and smoke-run in CI)
//   perf-table docs/data/FILE.json [0,3] a measurement table with its machine, date, command and data file (optionally some columns)
//   cli-usage [COMMAND]                  `comlrl [COMMAND] --help`, as the command prints it
// `--check` rewrites nothing and exits 1 when a page is not what this script would write (CI runs it so).
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const trainers = await import(join(root, "dist", "trainers", "builtins.js"));
const tasks = await import(join(root, "dist", "tasks", "registry.js"));

/** Each registered trainer's config: its field table, its builder (for the resolved defaults) and the interface its fields are documented on. */
const CONFIGS = Object.fromEntries(
  trainers.trainerDefinitions().map((definition) => [definition.configName, { fields: definition.fields, build: definition.config, documentedOn: definition.documentedOn }]),
);

/** Doc comments of every property of the config types, read with the type checker from the field specs they derive from. */
function fieldDocs() {
  const files = readdirSync(join(root, "src", "config")).filter((f) => f.endsWith(".ts")).map((f) => join(root, "src", "config", f));
  const program = ts.createProgram(files, { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, strict: true });
  const checker = program.getTypeChecker();
  const docs = new Map();
  for (const file of files) {
    const source = program.getSourceFile(file);
    ts.forEachChild(source, (node) => {
      if (!(ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node))) return;
      const type = checker.getTypeAtLocation(node.name);
      const byField = new Map();
      for (const property of checker.getPropertiesOfType(type)) {
        byField.set(property.name, ts.displayPartsToString(property.getDocumentationComment(checker)).replace(/\s+/g, " ").trim());
      }
      docs.set(node.name.text, byField);
    });
  }
  return docs;
}

const DOCS = fieldDocs();
/** Every field without an accepts description or a doc comment, reported together at the end. */
const undocumented = new Set();

function snake(name) {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function shown(value) {
  if (value === undefined) return "required";
  return JSON.stringify(value, (_, v) => (typeof v === "number" && v !== 0 && Math.abs(v) < 1e-3 ? v.toExponential() : v)).replace(/"(\d(?:\.\d+)?e-\d+)"/g, "$1");
}

function cell(text) {
  return text.replace(/\|/g, "\\|");
}

/** One row per field: name, file key, default (with what it resolves to when the builder derives it), accepted values, description. */
function rows(configName) {
  const config = CONFIGS[configName];
  if (config === undefined) throw new Error(`docs: unknown config ${configName} (known: ${Object.keys(CONFIGS).join(", ")})`);
  const resolved = config.build({});
  const docs = DOCS.get(config.documentedOn ?? configName);
  if (docs === undefined) throw new Error(`docs: no interface ${config.documentedOn ?? configName} in src/config`);
  return Object.entries(config.fields).map(([field, spec]) => {
    if (spec.accepts === undefined) undocumented.add(`${configName}.${field}: no accepts description (give field() its third argument)`);
    const description = docs.get(field) ?? "";
    if (!description) undocumented.add(`${configName}.${field}: no doc comment on its field spec in src/config`);
    const given = shown(spec.default);
    const derived = shown(resolved[field]);
    const defaultCell = derived === given || spec.default === undefined ? given : `${given} (→ ${derived})`;
    return { field, key: snake(field), defaultCell, accepts: spec.accepts ?? "", description };
  });
}

function table(list) {
  const lines = ["| field | file key | default | accepts | what it does |", "|---|---|---|---|---|"];
  for (const r of list) lines.push(`| \`${r.field}\` | \`${r.key}\` | \`${cell(r.defaultCell)}\` | ${cell(r.accepts)} | ${cell(r.description)} |`);
  return lines.join("\n");
}

function render(spec) {
  const [configName, base] = spec.split(/\s+vs\s+/).map((s) => s.trim());
  const own = rows(configName);
  if (base === undefined) return table(own);
  const baseRows = new Map(rows(base).map((r) => [r.field, r]));
  const changed = own.filter((r) => {
    const b = baseRows.get(r.field);
    return b === undefined || b.defaultCell !== r.defaultCell || b.accepts !== r.accepts;
  });
  const ownNames = new Set(own.map((r) => r.field));
  const dropped = [...baseRows.keys()].filter((f) => !ownNames.has(f));
  const parts = [`${configName} has every field of ${base}${dropped.length ? ` except ${dropped.map((f) => `\`${f}\``).join(", ")}` : ""}; these are new or differ:`, "", table(changed)];
  return parts.join("\n");
}

function taskTable() {
  const lines = ["| task | agents | turns | reward range | train / eval items | options | what it is |", "|---|---|---|---|---|---|---|"];
  for (const name of tasks.listTasks()) {
    const task = tasks.getTask(name);
    const options = Object.entries(tasks.taskOptions(name)).map(([key, meaning]) => `\`${key}\`: ${meaning}`).join("; ") || "—";
    const range = task.rewardRange ? `[${task.rewardRange.join(", ")}]` : "—";
    const turns = task.externalTransition ? "multi" : "1";
    const counts = `${task.dataset({ split: "train" }).length} / ${task.dataset({ split: "eval" }).length}`;
    lines.push(`| \`${name}\` | ${task.numAgents} | ${turns} | ${range} | ${counts} | ${cell(options)} | ${cell(task.description)} |`);
  }
  return lines.join("\n");
}

/** The file as a user writes it: imports of the package's source read as imports of "comlrl". */
function exampleBlock(file) {
  const text = readFileSync(join(root, file), "utf8").trimEnd().replace(/from "(\.\.\/)+src\/index\.js"/g, 'from "comlrl"');
  if (file.endsWith(".yaml")) return `\`\`\`yaml\n# ${file}\n${text}\n\`\`\``;
  return `\`\`\`ts\n// ${file}\n${text}\n\`\`\``;
}

/** A measurement table: data/*.json holds columns, rows and where the numbers come from. */
// A clock time in a caption reads as a claim about when to expect the numbers; the README's captions say what was
// measured and where the data are, and a data file keeps its clock times under "times", which is not rendered.
const CLOCK_TIME = /\b\d{1,2}:\d{2}\b/;

function perfTable(spec, page) {
  const [file, pick] = spec.split(/\s+/);
  const data = JSON.parse(readFileSync(join(root, file), "utf8"));
  for (const key of ["title", "machine", "date", "command", "columns", "rows"]) {
    if (data[key] === undefined) throw new Error(`${file}: missing "${key}"`);
  }
  const link = relative(dirname(page), join(root, file));
  const caption = `**${data.title}** — ${data.machine}; ${data.date}; \`${data.command}\`.${data.conditions ? ` ${data.conditions}` : ""} Data: [${file}](${link}).`;
  if (relative(root, page) === "README.md" && CLOCK_TIME.test(caption)) throw new Error(`${file}: the README's caption has a clock time (${caption.match(CLOCK_TIME)[0]}); keep it under "times"`);
  const lines = [caption, ""];
  const shown = pick === undefined ? data.columns.map((_, i) => i) : pick.split(",").map(Number);
  if (shown.some((i) => !(i >= 0 && i < data.columns.length))) throw new Error(`${file}: columns ${pick} out of range (${data.columns.length} columns)`);
  lines.push(`| ${shown.map((i) => cell(data.columns[i])).join(" | ")} |`, `|${shown.map((_, k) => (k === 0 ? "---" : "---:")).join("|")}|`);
  for (const row of data.rows) {
    if (row.length !== data.columns.length) throw new Error(`${file}: a row has ${row.length} cells for ${data.columns.length} columns: ${JSON.stringify(row)}`);
    lines.push(`| ${shown.map((i) => cell(String(row[i]))).join(" | ")} |`);
  }
  if (data.notes) lines.push("", data.notes);
  return lines.join("\n");
}

function cliUsage(command) {
  const args = [join(root, "dist", "cli", "main.js"), ...(command ? [command] : []), "--help"];
  const usage = execFileSync(process.execPath, args, { encoding: "utf8" }).trimEnd();
  return `\`\`\`text\n${usage}\n\`\`\``;
}

function generate(kind, args, page) {
  if (kind === "cli-usage") return cliUsage(args);
  if (kind === "config-table") return render(args);
  if (kind === "task-table") return taskTable();
  if (kind === "example") return exampleBlock(args);
  if (kind === "perf-table") return perfTable(args, page);
  throw new Error(`unknown generated part "${kind}" (config-table, task-table, example, perf-table, cli-usage)`);
}

const MARKER = /(<!-- generated: ([a-z-]+) ?([^>]*?) -->\n)([\s\S]*?)(<!-- \/generated -->)/g;

function pages(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "api" ? [] : pages(path);
    return entry.name.endsWith(".md") ? [path] : [];
  });
}

const check = process.argv.includes("--check");
let stale = 0;
/** Pages with a TypeScript block that is not an example file: such code is never type-checked, so it is refused. */
const unchecked = [];
for (const path of [join(root, "README.md"), ...pages(join(root, "docs"))]) {
  const text = readFileSync(path, "utf8");
  const next = text.replace(MARKER, (_, open, kind, args, _old, close) => `${open}${generate(kind, args.trim(), path)}\n${close}`);
  if (/^```(ts|typescript)\b/m.test(next.replace(MARKER, ""))) unchecked.push(relative(root, path));
  if (next === text) continue;
  stale++;
  if (check) console.error(`docs: ${relative(root, path)} is not up to date; run node scripts/docs/generate.mjs`);
  else writeFileSync(path, next);
}
if (undocumented.size > 0) {
  console.error(`docs: ${undocumented.size} config field(s) undocumented:\n  ${[...undocumented].join("\n  ")}`);
  process.exit(1);
}
if (unchecked.length > 0) {
  console.error(`docs: TypeScript blocks outside <!-- generated: example FILE --> in ${unchecked.join(", ")}: move the code to examples/ or docs/snippets/, where it is type-checked`);
  process.exit(1);
}
if (check && stale > 0) process.exit(1);
if (!check) console.log(`docs: ${stale} page(s) rewritten`);
