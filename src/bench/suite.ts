// The bench suite: ceilings first, then every planned benchmark in a worker process of its own, then figures,
// targets, an optional comparison with an earlier result, and the results written as JSON and markdown.
import os from "node:os";
import path from "node:path";
import { runtimeInfo } from "../runtime.js";
import { writeFileAtomic } from "../util/atomic.js";
import { compareResults, readBenchResult } from "./compare.js";
import { describeEnvironment } from "./environment.js";
import { algorithmResult, copyCeilingResult, generationResult, matmulCeilingResult, trainerResult, trainerSpeedup, trainingResult } from "./figures.js";
import { planCases, type Mode } from "./plan.js";
import { CONTENTION_FLAG, num, renderMarkdown } from "./report.js";
import { machineBusySeconds, runInWorker } from "./runner.js";
import { secondsSince } from "./stats.js";
import { evaluateTargets } from "./targets.js";
import type { AlgorithmResult, BenchCase, BenchDtype, BenchResult, CeilingCase, Ceilings, CopyCeilingResult, GenerationResult, Measured, TrainerResult, TrainingResult } from "./types.js";
import { makeDirs } from "../util/make-dirs.js";

export interface SuiteOptions {
  /** The smoke run CI executes: tiny model, one repeat, short generations (checks the suite runs, not speed). */
  quick?: boolean;
  /** Only the benchmarks whose id matches this regular expression (case-insensitive); ceilings always run. */
  only?: string | null;
  /** Where the results go (default bench/results under the working directory). */
  outDir?: string;
  /** An earlier result file to print ratios against. */
  compare?: string | null;
  /** "cpu" or "cuda:N" (default: cuda:0 when CUDA is available, else cpu). */
  device?: string;
  /** Progress lines (default: stderr). */
  log?: (line: string) => void;
}

export interface SuiteRun {
  result: BenchResult;
  jsonFile: string;
  markdownFile: string;
  markdown: string;
}

/** A hang guard per worker, far above any case's real time. */
const WORKER_TIMEOUT_SECONDS: Record<Mode, number> = { default: 1800, quick: 120 };

/** The end of a progress line: memory, and a warning when other processes took a share of the machine. */
function processNote(m: Measured): string {
  const others = m.otherCpuShare !== null && m.otherCpuShare > CONTENTION_FLAG ? `; others took ${(100 * m.otherCpuShare).toFixed(0)}% of the CPU` : "";
  return `peak RSS ${m.peakRssMiB.toFixed(0)} MiB${others}`;
}

/** The share of the machine's CPU busy over the next second, before any benchmark starts (null without /proc/stat). */
async function othersCpuShareNow(): Promise<number | null> {
  const before = machineBusySeconds();
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const after = machineBusySeconds();
  return before === null || after === null ? null : (after - before) / os.availableParallelism();
}

/** Tries at a ceiling while other processes take a share of the machine: a low ceiling would skew every fraction. */
const CEILING_TRIES = 3;

async function measureCeiling(spec: CeilingCase, device: string, timeout: number, log: (line: string) => void): Promise<Measured> {
  let best: Measured | undefined;
  for (let attempt = 1; attempt <= CEILING_TRIES; attempt++) {
    const measured = await runInWorker(spec, device, timeout).catch((error: Error) => {
      throw new Error(`${spec.id}: ${error.message}`);
    });
    if (!best || (measured.otherCpuShare ?? 0) < (best.otherCpuShare ?? 0)) best = measured;
    if ((best.otherCpuShare ?? 0) <= CONTENTION_FLAG) break;
    if (attempt < CEILING_TRIES) log(`${spec.id}: others took ${(100 * measured.otherCpuShare!).toFixed(0)}% of the CPU; measuring again`);
  }
  return best!;
}

function onlyFilter(pattern: string | null | undefined): (id: string) => boolean {
  if (!pattern) return () => true;
  try {
    const regex = new RegExp(pattern, "i");
    return (id) => regex.test(id);
  } catch (error) {
    throw new RangeError(`--only: ${JSON.stringify(pattern)} is not a regular expression (${(error as Error).message})`);
  }
}

/** bench/results/2025-06-01-1432-myhost.json (UTC time of the run). */
function resultBaseName(createdAt: string, host: string, mode: Mode): string {
  const stamp = createdAt.slice(0, 16).replace("T", "-").replace(":", "");
  return `${stamp}-${host.replace(/[^A-Za-z0-9._-]/g, "-")}${mode === "quick" ? "-quick" : ""}`;
}

export async function runSuite(options: SuiteOptions = {}): Promise<SuiteRun> {
  const started = performance.now();
  const mode: Mode = options.quick ? "quick" : "default";
  const log = options.log ?? ((line: string) => void process.stderr.write(`${line}\n`));
  // A bad --compare file or --only pattern fails now, not after the long run.
  const previous = options.compare ? await readBenchResult(options.compare) : null;
  const selected = onlyFilter(options.only);
  const plan = planCases(mode);
  const cases = plan.cases.filter((spec) => selected(spec.id));
  if (cases.length === 0) throw new RangeError(`--only ${JSON.stringify(options.only)} matches no benchmark; the ids are:\n  ${plan.cases.map((c) => c.id).join("\n  ")}`);
  const device = options.device ?? (runtimeInfo().cudaAvailable ? "cuda:0" : "cpu");
  const environment = describeEnvironment(device);
  const createdAt = new Date().toISOString();
  const timeout = WORKER_TIMEOUT_SECONDS[mode];
  log(`comlrl bench (${mode}): libtorch ${environment.torchVersion}, ${environment.threads} threads, ${environment.blas.split(" ")[0]}, ${device}`);
  const busy = await othersCpuShareNow();
  if (busy !== null && busy > CONTENTION_FLAG) {
    log(`warning: other processes are using ${(100 * busy).toFixed(0)}% of the machine's CPU right now; figures will be low (see Contention)`);
  }

  // Ceilings first: the fractions below are read against them. A failing ceiling ends the run, since nothing after it
  // could be read.
  const matmul: Ceilings["matmul"] = {};
  let copy: CopyCeilingResult | undefined;
  for (const spec of plan.ceilings) {
    const measured = await measureCeiling(spec, device, timeout, log);
    if (spec.kind === "matmul") {
      const ceiling = (matmul[spec.dtype] = matmulCeilingResult(spec, measured));
      log(`${spec.id}: ${num(ceiling.gflops.median)} GFLOP/s (n = ${ceiling.n}), ${processNote(measured)}`);
    } else {
      copy = copyCeilingResult(spec, measured);
      log(`${spec.id}: ${num(copy.gbps.median)} GB/s copy, ${num(copy.readGbps.median)} GB/s read, ${processNote(measured)}`);
    }
  }
  if (!copy) throw new Error("the plan has no copy ceiling");
  const readGBps = copy.readGbps.median;
  const matmulGflops = Object.fromEntries(Object.entries(matmul).map(([dtype, c]) => [dtype, c.gflops.median])) as Partial<Record<BenchDtype, number>>;

  const generation: GenerationResult[] = [];
  const training: TrainingResult[] = [];
  const trainer: TrainerResult[] = [];
  const algorithms: AlgorithmResult[] = [];
  const failed: BenchResult["failed"] = [];
  const measure = async (spec: BenchCase): Promise<string> => {
    const measured = await runInWorker(spec, device, timeout);
    const rss = processNote(measured);
    switch (spec.kind) {
      case "generate": {
        const g = generationResult(spec, measured, readGBps);
        generation.push(g);
        return `${num(g.tokensPerSecond.median)} tok/s, decode at ${(100 * g.rooflineFraction.median).toFixed(0)}% of the bandwidth roofline, ${rss}`;
      }
      case "train": {
        // A bf16 model on a CPU without bf16 instructions runs its matmuls in fp32 (the addon widens them), so its
        // step is read against the faster of the two ceilings: the rate its matmuls can actually reach.
        const t = trainingResult(spec, measured, Math.max(matmulGflops[spec.dtype]!, matmulGflops.fp32 ?? 0));
        training.push(t);
        return `${num(t.stepSeconds.median)} s/step, ${num(t.tokensPerSecond.median)} tok/s, ${(100 * t.ceilingFraction.median).toFixed(0)}% of the matmul ceiling, ${rss}`;
      }
      case "trainer": {
        const t = trainerResult(spec, measured);
        trainer.push(t);
        return `${num(t.epochSeconds.median)} s/epoch, ${num(t.envStepsPerSecond.median)} env steps/s, ${rss}`;
      }
      case "algorithm": {
        const a = algorithmResult(spec, measured);
        algorithms.push(a);
        return `${num(a.epochSeconds.median)} s/epoch, ${num(a.envStepsPerSecond.median)} env steps/s, ${rss}`;
      }
    }
  };
  for (const [index, spec] of cases.entries()) {
    const position = `[${index + 1}/${cases.length}]`;
    const caseStarted = performance.now();
    try {
      const summary = await measure(spec);
      log(`${position} ${spec.id}: ${summary} (${secondsSince(caseStarted).toFixed(0)} s)`);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      failed.push({ id: spec.id, error: message });
      log(`${position} ${spec.id}: FAILED: ${message}`);
    }
  }

  environment.loadAfter = os.loadavg()[0];
  const speedup = trainerSpeedup(trainer);
  const result: BenchResult = {
    schema: 1,
    createdAt,
    mode,
    only: options.only ?? null,
    wallSeconds: secondsSince(started),
    environment,
    ceilings: { matmul, copy },
    generation,
    training,
    trainer,
    algorithms,
    trainerSpeedup: speedup,
    targets: evaluateTargets({ generation, training, trainerSpeedup: speedup }),
    failed,
  };
  if (previous) result.comparison = { against: options.compare!, rows: compareResults(result, previous) };

  const outDir = options.outDir ?? path.join("bench", "results");
  await makeDirs(outDir);
  const base = path.join(outDir, resultBaseName(createdAt, environment.host, mode));
  const markdown = renderMarkdown(result);
  await writeFileAtomic(`${base}.json`, `${JSON.stringify(result, null, 2)}\n`);
  await writeFileAtomic(`${base}.md`, markdown);
  return { result, jsonFile: `${base}.json`, markdownFile: `${base}.md`, markdown };
}
