#!/usr/bin/env node
// Writes the config-field tables of the trainer pages in docs/ from the config builders, so that they cannot drift:
// the fields, their defaults and accepted values come from the compiled field tables in dist/config (run
// `npm run build:ts` first), each field's description from its doc comment on the config interface in src/config.
// A page marks where a table goes with
//   <!-- config-table: MAGRPOConfig -->…<!-- /config-table -->            every field of a config
//   <!-- config-table: MAACConfig vs IACConfig -->…<!-- /config-table -->  only what differs from another config
// `--check` rewrites nothing and exits 1 when a page is not what this script would write (CI runs it so).
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const dist = (file) => import(join(root, "dist", "config", file));

const magrpo = await dist("magrpo.js");
const actorCritic = await dist("actor-critic.js");
const preference = await dist("preference.js");
const iterative = await dist("iterative.js");

/** Each config: its field table, its builder (for the resolved defaults) and the interface its fields are documented on. */
const CONFIGS = {
  MAGRPOConfig: { fields: magrpo.MAGRPO_FIELDS, build: magrpo.magrpoConfig },
  MAREINFORCEConfig: { fields: magrpo.MAREINFORCE_FIELDS, build: magrpo.mareinforceConfig, documentedOn: "MAGRPOConfig" },
  MAReMaxConfig: { fields: magrpo.MAREMAX_FIELDS, build: magrpo.maremaxConfig, documentedOn: "MAGRPOConfig" },
  MARLOOConfig: { fields: magrpo.MARLOO_FIELDS, build: magrpo.marlooConfig, documentedOn: "MAGRPOConfig" },
  CentralizedMAGRPOConfig: { fields: magrpo.CENTRALIZED_FIELDS, build: magrpo.centralizedMagrpoConfig },
  IACConfig: { fields: actorCritic.IAC_FIELDS, build: actorCritic.iacConfig },
  MAACConfig: { fields: actorCritic.MAAC_FIELDS, build: actorCritic.maacConfig, documentedOn: "ActorCriticConfig" },
  MADPOConfig: { fields: preference.MADPO_FIELDS, build: preference.madpoConfig },
  MARLHFConfig: { fields: preference.MARLHF_FIELDS, build: preference.marlhfConfig },
  MADPOIterConfig: { fields: iterative.MADPO_ITER_FIELDS, build: iterative.madpoIterConfig },
  MARLHFIterConfig: { fields: iterative.MARLHF_ITER_FIELDS, build: iterative.marlhfIterConfig },
};

/** Doc comments of every property of the config interfaces, inherited ones included, read with the type checker. */
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
  if (config === undefined) throw new Error(`config-tables: unknown config ${configName} (known: ${Object.keys(CONFIGS).join(", ")})`);
  const resolved = config.build({});
  const docs = DOCS.get(config.documentedOn ?? configName);
  if (docs === undefined) throw new Error(`config-tables: no interface ${config.documentedOn ?? configName} in src/config`);
  return Object.entries(config.fields).map(([field, spec]) => {
    if (spec.accepts === undefined) undocumented.add(`${configName}.${field}: no accepts description (give field() its third argument)`);
    const description = docs.get(field) ?? "";
    if (!description) undocumented.add(`${configName}.${field}: no doc comment on its interface in src/config`);
    const given = shown(spec.default);
    const derived = shown(resolved[field]);
    const defaultCell = derived === given || spec.default === undefined ? given : `${given} (→ ${derived})`;
    return { field, key: snake(field), defaultCell, accepts: spec.accepts, description };
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

const MARKER = /(<!-- config-table: ([^>]+?) -->\n)([\s\S]*?)(<!-- \/config-table -->)/g;

const check = process.argv.includes("--check");
const docsDir = join(root, "docs");
let stale = 0;
for (const page of readdirSync(docsDir).filter((f) => f.endsWith(".md"))) {
  const path = join(docsDir, page);
  const text = readFileSync(path, "utf8");
  const next = text.replace(MARKER, (_, open, spec, _old, close) => `${open}${render(spec)}\n${close}`);
  if (next === text) continue;
  stale++;
  if (check) console.error(`config-tables: docs/${page} is not up to date; run node scripts/docs/config-tables.mjs`);
  else writeFileSync(path, next);
}
if (undocumented.size > 0) {
  console.error(`config-tables: ${undocumented.size} field(s) undocumented:\n  ${[...undocumented].join("\n  ")}`);
  process.exit(1);
}
if (check && stale > 0) process.exit(1);
if (!check) console.log(`config-tables: ${stale} page(s) rewritten`);
