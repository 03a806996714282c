// The markdown report of a bench result: environment, ceilings, generation (own protocol and the peer's), training,
// the whole trainer, targets, and whatever failed. Figures are min / median / max over the runs.
import { BENCH_MODELS } from "./models.js";
import { PEER, peerGeneration, peerTrainingStep } from "./targets.js";
import { ALGORITHM_PHASES, type BenchResult, type ComparisonRow, type Summary, type Target } from "./types.js";

/** Three significant figures or so, without exponent noise for the magnitudes the suite produces. */
export function num(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  return a >= 100 ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : a >= 1 ? x.toFixed(2) : a >= 0.001 ? x.toFixed(3) : x.toExponential(1);
}

const percent = (x: number) => `${(100 * x).toFixed(x < 0.1 ? 1 : 0)}%`;
const spread = (s: Summary, format: (x: number) => string = num) => (s.runs === 1 ? format(s.median) : `${format(s.min)} / ${format(s.median)} / ${format(s.max)}`);
const mib = (x: number | null) => (x === null ? "–" : x.toFixed(0));
const memory = (r: { peakRssMiB: number; peakDeviceMiB: number | null }) => (r.peakDeviceMiB === null ? mib(r.peakRssMiB) : `${mib(r.peakRssMiB)} (GPU ${mib(r.peakDeviceMiB)})`);
const params = (count: number) => (count >= 1e9 ? `${(count / 1e9).toFixed(2)}B` : count >= 1e6 ? `${(count / 1e6).toFixed(1)}M` : `${(count / 1e3).toFixed(0)}k`);

function table(header: string[], rows: string[][], align: string[] = header.map((_, i) => (i === 0 ? "---" : "---:"))): string[] {
  return [`| ${header.join(" | ")} |`, `|${align.join("|")}|`, ...rows.map((row) => `| ${row.join(" | ")} |`)];
}

function environment(r: BenchResult): string[] {
  const e = r.environment;
  return table(
    ["", ""],
    [
      ["libtorch", e.torchVersion],
      ["BLAS", e.blas],
      ["threads", String(e.threads)],
      ["CPU", `${e.cpu}, ${e.cores} cores, ${e.memoryGiB.toFixed(0)} GiB`],
      ["GPU", e.gpu ?? "none"],
      ["device", e.device],
      ["platform", `${e.platform}, Node ${e.node}`],
      ["commit", e.commit ?? "unknown"],
      ["load average (1 min)", `${e.loadBefore.toFixed(2)} before, ${e.loadAfter.toFixed(2)} after (on ${e.cores} cores)`],
      ["suite wall time", `${r.wallSeconds.toFixed(0)} s`],
    ],
    ["---", "---"],
  );
}

function ceilings(r: BenchResult): string[] {
  const rows = Object.values(r.ceilings.matmul).map((m) => [`matmul ${m.dtype}`, `${spread(m.gflops)} GFLOP/s`, `n = ${m.n}, ${m.iterations} products per run`, memory(m)]);
  const c = r.ceilings.copy;
  rows.push(["copy bandwidth", `${spread(c.gbps)} GB/s`, `${(c.bytes / 2 ** 20).toFixed(0)} MiB buffers, read + write counted`, memory(c)]);
  rows.push(["read bandwidth", `${spread(c.readGbps)} GB/s`, `a sum over the same ${(c.bytes / 2 ** 20).toFixed(0)} MiB buffer`, memory(c)]);
  return table(["ceiling", "min / median / max", "measured with", "peak RSS MiB"], rows);
}

function generation(r: BenchResult): string[] {
  const rows = r.generation
    .filter((g) => g.case.protocol === "suite")
    .map((g) => [
      g.case.model,
      g.case.dtype,
      String(g.case.batch),
      `${g.case.promptLength}+${g.case.newTokens}`,
      spread(g.tokensPerSecond),
      num(g.decodeTokensPerSecond.median),
      num(g.decodeGBps.median),
      spread(g.rooflineFraction, percent),
      num(g.rooflineTokensPerSecond),
      num(g.prefillSeconds),
      memory(g),
    ]);
  return table(["model", "dtype", "batch", "prompt+new", "tok/s", "decode tok/s", "decode GB/s", "of bandwidth roofline", "roofline decode tok/s", "prefill s", "peak RSS MiB"], rows);
}

function generationVsPeer(r: BenchResult): string[] {
  const rows = r.generation.flatMap((g) => {
    const peer = peerGeneration(g);
    if (peer === null) return [];
    return [[g.case.model, g.case.dtype, String(g.case.batch), spread(g.tokensPerSecond), String(peer), `${(g.tokensPerSecond.median / peer).toFixed(2)}×`, memory(g)]];
  });
  return table(["model", "dtype", "batch", "comlrl tok/s", "peer tok/s", "comlrl / peer", "peak RSS MiB"], rows);
}

function training(r: BenchResult): string[] {
  const rows = r.training.map((t) => {
    const peer = peerTrainingStep(t);
    return [
      t.case.model,
      params(t.parameterCount),
      t.case.dtype,
      spread(t.stepSeconds),
      num(t.backwardSeconds.median),
      num(t.optimizerSeconds.median),
      num(t.tokensPerSecond.median),
      spread(t.gflops),
      spread(t.ceilingFraction, percent),
      peer === null ? "–" : String(peer),
      peer === null ? "–" : `${(peer / t.stepSeconds.median).toFixed(2)}×`,
      memory(t),
    ];
  });
  return table(["model", "params", "dtype", "step s", "fwd+bwd s", "AdamW s", "tok/s", "GFLOP/s", "of matmul ceiling", "peer step s", "peer / comlrl", "peak RSS MiB"], rows);
}

/** "train/generation 250, train/backward 262, …": each phase's median peak resident MiB. */
function phasePeaks(peaks: Record<string, Summary>): string {
  return Object.entries(peaks).map(([phase, s]) => `${phase} ${mib(s.median)}`).join(", ");
}

function trainer(r: BenchResult): string[] {
  const rows = r.trainer.map((t) => [
    t.case.layout ? `${t.case.scoring}, ${t.case.layout.ranks} proc × ${t.case.layout.threads} thr` : t.case.scoring,
    `${t.case.items} items, ${t.envSteps} env steps`,
    spread(t.epochSeconds),
    spread(t.envStepsPerSecond),
    ...(["generation", "reward", "scoring", "update", "other"] as const).map((phase) => num(t.phases[phase].median)),
    memory(t),
  ]);
  const lines = table(["scoring", "epoch", "epoch s", "env steps/s", "generation s", "reward s", "scoring s", "update s", "other s", "peak RSS MiB"], rows);
  for (const t of r.trainer.filter((x) => x.phasePeakRssMiB && Object.keys(x.phasePeakRssMiB).length > 0)) {
    lines.push("", `Peak RSS by phase, ${t.case.scoring}${t.case.layout ? `, ${t.case.layout.ranks} proc` : ""} (MiB, medians): ${phasePeaks(t.phasePeakRssMiB!)}.`);
  }
  if (r.trainerSpeedup !== null) lines.push("", `A batched epoch is ${r.trainerSpeedup.toFixed(2)}× faster than a per-completion one (median epoch times).`);
  for (const t of r.trainer.filter((x) => x.communication)) {
    const c = t.communication!;
    lines.push("", `${t.case.layout!.ranks} ranks: ${c.allReducesPerEpoch} gradient all-reduces per epoch (one per optimizer step), ${(c.bytesPerStep / 2 ** 20).toFixed(2)} MiB and ${spread(c.secondsPerStep)} s each.`);
  }
  return lines;
}

function algorithms(r: BenchResult): string[] {
  const results = r.algorithms ?? [];
  if (results.length === 0) return ["(not run)"];
  return results.map((a) => {
    const phases = ALGORITHM_PHASES[a.case.algorithm].map((phase) => `${phase} ${num(a.phases[phase].median)} s`).join(", ");
    const peaks = a.phasePeakRssMiB && Object.keys(a.phasePeakRssMiB).length > 0 ? ` (by phase: ${phasePeaks(a.phasePeakRssMiB)})` : "";
    return `- **${a.case.algorithm}**: ${a.case.items} items, ${a.envSteps} env steps; ${spread(a.epochSeconds)} s/epoch, ${spread(a.envStepsPerSecond)} env steps/s; ${phases}; peak RSS ${memory(a)} MiB${peaks}`;
  });
}

/** A benchmark whose machine others used more than this share of is flagged. */
export const CONTENTION_FLAG = 0.1;

function contention(r: BenchResult): string[] {
  const all = [...Object.values(r.ceilings.matmul), r.ceilings.copy, ...r.generation, ...r.training, ...r.trainer, ...(r.algorithms ?? [])].map((x) => ({
    id: "case" in x ? x.case.id : x.id,
    share: x.otherCpuShare,
  }));
  if (all.every((x) => x.share === null)) return ["Not measured (no /proc/stat on this system)."];
  const flagged = all.filter((x) => x.share !== null && x.share > CONTENTION_FLAG);
  if (flagged.length === 0) return [`No benchmark shared the machine: other processes took under ${percent(CONTENTION_FLAG)} of its CPU time during each.`];
  return [
    `Other processes (and the hypervisor's steal) took more than ${percent(CONTENTION_FLAG)} of the machine's CPU time while these`,
    "ran; their figures are low, small models' most of all (OpenMP's BLAS threads stall on a shared core). Rerun them with `--only`.",
    "",
    ...table(["benchmark", "others' share of the CPU"], flagged.map((x) => [`\`${x.id}\``, percent(x.share!)])),
  ];
}

function targets(list: Target[]): string[] {
  const value = (t: Target, x: number) => (t.unit === "fraction" ? percent(x) : `${x.toFixed(2)}×`);
  const rows = list.map((t) => [t.name, t.value === null ? "–" : value(t, t.value), `≥ ${value(t, t.goal)}`, t.met === null ? "not measured" : t.met ? "met" : "missed", t.detail]);
  return table(["target", "measured (median)", "goal", "", "detail"], rows, ["---", "---:", "---:", "---", "---"]);
}

/** A comparison is flagged where a figure got worse by more than this. */
const REGRESSION_FLAG = 0.05;

function comparison(rows: ComparisonRow[], against: string): string[] {
  const worse = (row: ComparisonRow) => (row.better === "higher" ? row.ratio < 1 - REGRESSION_FLAG : row.ratio > 1 + REGRESSION_FLAG);
  return [
    `Against ${against}: ratio = this run / that run (medians). Above 1 is faster for rates, below 1 is leaner for peak`,
    `RSS; ⚠ marks a figure more than ${percent(REGRESSION_FLAG)} worse.`,
    "",
    ...table(
      ["figure", "previous", "this run", "ratio"],
      rows.map((row) => [row.figure, num(row.previous), num(row.current), `${row.ratio.toFixed(2)}×${worse(row) ? " ⚠" : ""}`]),
    ),
    ...(rows.length === 0 ? ["", "No figures in common."] : []),
  ];
}

export function renderMarkdown(r: BenchResult): string {
  const title = `# comlrl bench: ${r.createdAt} on ${r.environment.host}${r.mode === "quick" ? " (quick smoke run: not for speed)" : ""}`;
  const shapes = Object.entries(BENCH_MODELS).map(([name, m]) => `${name}: ${m.label}`).join("; ");
  const lines = [
    title,
    "",
    ...environment(r),
    "",
    "Every figure is min / median / max over the runs of its benchmark (one value when it ran once). Each benchmark runs in",
    "its own process after a warm-up; peak RSS is that process's maximum resident set, Node and libtorch (~200 MiB) included.",
    `Models, random weights, tied embeddings, Qwen2 layout unless named: ${shapes}.`,
    "",
    "## Ceilings",
    "",
    ...ceilings(r),
    "",
    "## Generation",
    "",
    "Greedy decoding with the KV cache and no stop ids. tok/s = new tokens of all rows / wall time of one generate() call,",
    "prefill included. Decode = the steps after the prefill (timed alone in each run); decode GB/s = bytes a step must read (every",
    "weight once + the KV cache at the mean context) × steps / decode time, and the roofline is the measured read bandwidth.",
    "",
    ...generation(r),
    "",
    `## Generation vs the peer (prompt 32, 64 new tokens)`,
    "",
    `Peer: ${PEER.name}.`,
    "",
    ...generationVsPeer(r),
    "",
    "## Training",
    "",
    "One step = zero the gradients + one policy-gradient forward/backward over all rows (each a 1-token prompt and a",
    "completion whose every token is scored) + one AdamW step. GFLOP/s = 6 × parameters × tokens / step time, read against",
    "the matmul ceiling of the same dtype, or fp32's where that is higher (a CPU without bf16 instructions runs a bf16",
    "model's matmuls in fp32). fwd+bwd and AdamW (medians) are the step's two parts. The peer's step is fp32, 8 × 128 tokens.",
    "",
    ...training(r),
    "",
    "## Whole trainer: one MAGRPO epoch of the demo",
    "",
    "Two tiny agents on cover-the-vowels, as `comlrl demo` trains them. Phases (medians) are the trainer's own timings:",
    "generation, reward, scoring (reference-model KL; the demo has none), update (fwd + bwd + AdamW); other = the rest.",
    "",
    ...trainer(r),
    "",
    "## Other trainers: one epoch of the demo each",
    "",
    "By the trainer's own stage timings, stage/phase (medians): IAC and MAAC (critics from the base model, 4 completions per",
    "node) in their train stage: generation, reward, critic (the critics' old-value readouts), update (actors and critics).",
    "MADPO: pair collection (8 candidates per item: generation, reward), DPO updates. MARLHF: pair collection, its reward",
    "model's epoch, one RL epoch against it (rl/reward = the reward model's scoring). other = the rest of the epoch.",
    "",
    ...algorithms(r),
    "",
    "## Targets",
    "",
    ...targets(r.targets),
    "",
    "## Contention",
    "",
    ...contention(r),
  ];
  // The first line is the error; the JSON keeps the worker's stderr tail after it.
  if (r.failed.length) lines.push("", "## Failed", "", ...r.failed.map((f) => `- \`${f.id}\`: ${f.error.split("\n")[0]}`));
  if (r.comparison) lines.push("", "## Comparison", "", ...comparison(r.comparison.rows, r.comparison.against));
  return `${lines.join("\n")}\n`;
}
