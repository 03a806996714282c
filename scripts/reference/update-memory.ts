// Peak memory of MAGRPO updates at Qwen's vocabulary (151,936) with few layers (docs/memory.md): the LM head scored
// whole against in blocks of rows, the CPU caching allocator at its default limit against off, and this checkout
// against another (`--before DIR`: a checkout of an earlier commit, its addon the same). Each run is its own process
// (a process's peak cannot be reset); runs alternate over the variants. Writes the runs and their medians as JSON.
//
//   npx tsx scripts/reference/update-memory.ts --layers 2,4 --pairs 2 --heads whole,blocked --caches default,0 \
//     --before /tmp/comlrl-before --out docs/data/update-memory.json
//
// The model is random (Qwen2 layout, hidden 896, MLP 4864, 14 / 2 heads, tied embeddings: Qwen2.5-0.5B's shape but
// for its depth) with the demo's tokenizer, its vocabulary padded with "<id>" tokens up to the model's, so that a
// sampled id past the demo's 512 decodes. The task is the demo's (cover-the-vowels); one epoch of one item, one
// update per agent of every completion.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { createDemoBaseModel, demoTrainerOptions } from "../../src/demo/recipes.js";
import { buildConfigJson } from "../../src/models/config.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import { runtimeInfo, setLogitsBlockRows } from "../../src/runtime.js";
import { MAGRPOTrainer } from "../../src/trainers/reinforce/magrpo.js";

const VOCAB = 151936;
const SEED = 7;
const GENERATIONS = 8;
const NEW_TOKENS = 64;

const { values } = parseArgs({
  options: {
    layers: { type: "string", default: "2,4" },
    pairs: { type: "string", default: "2" },
    out: { type: "string" },
    heads: { type: "string", default: "whole,blocked" },
    // COMLRL_CPU_CACHE_MB per variant: "default" leaves it unset (a quarter of physical memory).
    caches: { type: "string", default: "default" },
    before: { type: "string" },
    models: { type: "string", default: path.join("bench", "results", "update-memory-models") },
    // The child's options: one run.
    child: { type: "boolean", default: false },
    model: { type: "string" },
    head: { type: "string" },
  },
});

/** The demo tokenizer's files with the vocabulary padded to VOCAB, and a random model of that vocabulary beside them. */
async function makeModel(dir: string, layers: number): Promise<void> {
  if (existsSync(path.join(dir, "config.json"))) return;
  const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-update-memory-"));
  try {
    await createDemoBaseModel(scratch, SEED);
    const spec = JSON.parse(readFileSync(path.join(scratch, "tokenizer.json"), "utf8")) as { model: { vocab: Record<string, number> }; added_tokens: Array<{ id: number; content: string }> };
    const vocab = spec.model.vocab;
    const first = 1 + Math.max(...Object.values(vocab), ...spec.added_tokens.map((t) => t.id));
    for (let id = first; id < VOCAB; id++) vocab[`<${id}>`] = id;
    writeFileSync(path.join(scratch, "tokenizer.json"), JSON.stringify(spec));
    const tokenizer = await ComlrlTokenizer.fromDirectory(scratch);
    const shape = { vocabSize: VOCAB, hiddenSize: 896, intermediateSize: 4864, numLayers: layers, numHeads: 14, numKvHeads: 2, ropeTheta: 1e6, rmsNormEps: 1e-6, tieWordEmbeddings: true };
    const config = buildConfigJson("qwen2", shape, { bosTokenId: null, eosTokenId: tokenizer.eosTokenIds[0], padTokenId: tokenizer.padTokenId });
    const model = CausalLM.create(config, { seed: SEED, initStd: 0.02 });
    try {
      mkdirSync(path.dirname(dir), { recursive: true });
      await model.save(dir, { tokenizer });
    } finally {
      model.dispose();
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** One run: one epoch of one item, the head whole or in blocks; prints its figures as JSON. */
async function child(model: string, head: string): Promise<void> {
  if (head !== "whole" && head !== "blocked") throw new Error(`--head: whole or blocked, got ${head}`);
  setLogitsBlockRows(head === "whole" ? 2 ** 30 : 0);
  const tokenizer = await ComlrlTokenizer.fromDirectory(model);
  const outputDir = mkdtempSync(path.join(tmpdir(), "comlrl-update-memory-run-"));
  try {
    const options = demoTrainerOptions(model, tokenizer, { outputDir, epochs: 1, seed: SEED, quiet: true, items: 1 });
    const trainer = await MAGRPOTrainer.create({
      ...options,
      sampleLogInterval: 0,
      config: { ...options.config, numGenerations: GENERATIONS, maxNewTokens: NEW_TOKENS, rolloutBufferSize: GENERATIONS, trainBatchSize: GENERATIONS },
    });
    try {
      const started = performance.now();
      await trainer.train();
      const seconds = (performance.now() - started) / 1000;
      const memory = Object.fromEntries(Object.entries(trainer.timings.memory!.of("train")).map(([phase, m]) => [phase, m.peakRssBytes / 2 ** 20]));
      const time = trainer.timings.of("train");
      console.log(JSON.stringify({ head, seconds, updates: trainer.progress.update, phasePeakRssMiB: memory, phaseSeconds: time, peakRssMiB: process.resourceUsage().maxRSS / 1024 }));
    } finally {
      await trainer.close();
    }
  } finally {
    rmSync(outputDir, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

interface Variant {
  name: string;
  head: string;
  cache: string;
  /** The checkout whose scripts/reference/update-memory.ts runs the child. */
  tree: string;
}

function variants(): Variant[] {
  const trees = [["after", path.resolve(import.meta.dirname, "..", "..")], ...(values.before ? [["before", path.resolve(values.before)]] : [])];
  return trees.flatMap(([code, tree]) =>
    values.heads!.split(",").flatMap((head) =>
      values.caches!.split(",").map((cache) => ({ name: `${values.before ? `${code} ` : ""}${head}, cache ${cache}`, head, cache, tree })),
    ),
  );
}

type Run = Record<string, unknown> & { variant: string; peakRssMiB: number; phasePeakRssMiB: Record<string, number>; seconds: number };

function runChild(variant: Variant, dir: string): Run {
  const env = { ...process.env };
  if (variant.cache === "default") delete env.COMLRL_CPU_CACHE_MB;
  else env.COMLRL_CPU_CACHE_MB = variant.cache;
  const script = path.join(variant.tree, "scripts", "reference", "update-memory.ts");
  const done = spawnSync(process.execPath, ["--import", "tsx", script, "--child", "--model", dir, "--head", variant.head], { encoding: "utf8", env, cwd: variant.tree });
  if (done.status !== 0) throw new Error(`${variant.name} run failed:\n${done.stderr.slice(-4000)}`);
  return { ...JSON.parse(done.stdout.trim().split("\n").at(-1)!), variant: variant.name };
}

async function drive(): Promise<void> {
  const layers = values.layers!.split(",").map(Number);
  const pairs = Number(values.pairs);
  const all = variants();
  const rows = [];
  for (const depth of layers) {
    const dir = path.resolve(values.models!, `qwen-vocab-${depth}-layers`);
    await makeModel(dir, depth);
    const runs: Run[] = [];
    for (let pair = 0; pair < pairs; pair++) {
      for (const variant of pair % 2 === 0 ? all : [...all].reverse()) {
        const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).map(Number);
        const run = { ...runChild(variant, dir), layers: depth, loadavg: load };
        runs.push(run);
        console.log(`  ${depth} layers ${variant.name.padEnd(28)} peak RSS ${(run.peakRssMiB / 1024).toFixed(2)} GiB  backward ${(run.phasePeakRssMiB.backward / 1024).toFixed(2)} GiB  ${run.seconds.toFixed(1)} s  load ${load.join(" ")}`);
      }
    }
    const of = (variant: string) => {
      const mine = runs.filter((r) => r.variant === variant);
      const phases = Object.keys(mine[0].phasePeakRssMiB);
      return { peakRssMiB: median(mine.map((r) => r.peakRssMiB)), seconds: median(mine.map((r) => r.seconds)), phasePeakRssMiB: Object.fromEntries(phases.map((p) => [p, median(mine.map((r) => r.phasePeakRssMiB[p]))])) };
    };
    rows.push({ layers: depth, medians: Object.fromEntries(all.map((v) => [v.name, of(v.name)])), runs });
  }
  const cpu = readFileSync("/proc/cpuinfo", "utf8").match(/model name\s*:\s*(.*)/)?.[1] ?? os.arch();
  const result = {
    date: new Date().toISOString(),
    host: os.hostname(),
    cpu: `${cpu}, ${os.cpus().length} cores`,
    threads: runtimeInfo().numThreads,
    torch: runtimeInfo().torchVersion,
    command: `npx tsx scripts/reference/update-memory.ts ${process.argv.slice(2).join(" ")}`,
    shape: { vocab: VOCAB, hidden: 896, intermediate: 4864, heads: "14 / 2", tiedEmbeddings: true },
    task: { agents: 2, items: 1, numGenerations: GENERATIONS, maxNewTokens: NEW_TOKENS, rolloutBufferSize: GENERATIONS, trainBatchSize: GENERATIONS },
    rows,
  };
  if (values.out) writeFileSync(values.out, JSON.stringify(result, null, 1) + "\n");
  for (const row of rows) {
    for (const [name, m] of Object.entries(row.medians)) console.log(`${row.layers} layers, ${name}: peak RSS ${(m.peakRssMiB / 1024).toFixed(2)} GiB, ${m.seconds.toFixed(1)} s`);
  }
}

if (values.child) {
  if (!values.model || !values.head) throw new Error("--child needs --model and --head");
  await child(values.model, values.head);
} else {
  await drive();
}
