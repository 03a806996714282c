// The bench suite: ceilings first, then every planned benchmark in a worker process of its own, then figures,
// targets, an optional comparison with an earlier result, and the results written as JSON and markdown.
import { mkdir } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { runtimeInfo } from "../runtime.js";
import { writeFileAtomic } from "../util/atomic.js";
import { compareResults, readBenchResult } from "./compare.js";
import { describeEnvironment } from "./environment.js";
import { copyCeilingResult, generationResult, matmulCeilingResult, trainerResult, trainerSpeedup, trainingResult } from "./figures.js";
import { planCases, skipReason, type Mode } from "./plan.js";
import { num, renderMarkdown } from "./report.js";
import { runInWorker } from "./runner.js";
import { secondsSince } from "./stats.js";
import { evaluateTargets } from "./targets.js";
import type { BenchCase, BenchDtype, BenchResult, Ceilings, CopyCeilingResult, GenerationResult, TrainerResult, TrainingResult } from "./types.js";

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
  if (environment.loadBefore > environment.cores / 2) {
    log(`warning: the machine is busy (load ${environment.loadBefore.toFixed(1)} on ${environment.cores} cores); every figure will be low`);
  }

  // Ceilings first: the fractions below are read against them, and the skip rule needs each dtype's matmul rate.
  // A failing ceiling ends the run, since nothing after it could be read.
  const matmul: Ceilings["matmul"] = {};
  let copy: CopyCeilingResult | undefined;
  for (const spec of plan.ceilings) {
    const measured = await runInWorker(spec, device, timeout);
    if (spec.kind === "matmul") {
      const ceiling = (matmul[spec.dtype] = matmulCeilingResult(spec, measured));
      log(`${spec.id}: ${num(ceiling.gflops.median)} GFLOP/s (n = ${ceiling.n})`);
    } else {
      copy = copyCeilingResult(spec, measured);
      log(`${spec.id}: ${num(copy.gbps.median)} GB/s`);
    }
  }
  if (!copy) throw new Error("the plan has no copy ceiling");
  const copyGBps = copy.gbps.median;
  const matmulGflops = Object.fromEntries(Object.entries(matmul).map(([dtype, c]) => [dtype, c.gflops.median])) as Partial<Record<BenchDtype, number>>;

  const generation: GenerationResult[] = [];
  const training: TrainingResult[] = [];
  const trainer: TrainerResult[] = [];
  const skipped: BenchResult["skipped"] = [];
  const failed: BenchResult["failed"] = [];
  const measure = async (spec: BenchCase): Promise<string> => {
    const measured = await runInWorker(spec, device, timeout);
    const rss = `peak RSS ${measured.peakRssMiB.toFixed(0)} MiB`;
    switch (spec.kind) {
      case "generate": {
        const g = generationResult(spec, measured, copyGBps);
        generation.push(g);
        return `${num(g.tokensPerSecond.median)} tok/s, decode at ${(100 * g.rooflineFraction.median).toFixed(0)}% of the bandwidth roofline, ${rss}`;
      }
      case "train": {
        const t = trainingResult(spec, measured, matmulGflops[spec.dtype]!);
        training.push(t);
        return `${num(t.stepSeconds.median)} s/step, ${num(t.tokensPerSecond.median)} tok/s, ${(100 * t.ceilingFraction.median).toFixed(0)}% of the matmul ceiling, ${rss}`;
      }
      case "trainer": {
        const t = trainerResult(spec, measured);
        trainer.push(t);
        return `${num(t.epochSeconds.median)} s/epoch, ${num(t.envStepsPerSecond.median)} env steps/s, ${rss}`;
      }
    }
  };
  for (const [index, spec] of cases.entries()) {
    const position = `[${index + 1}/${cases.length}]`;
    const reason = skipReason(spec, matmulGflops, plan.slowCaseBudgetSeconds);
    if (reason) {
      skipped.push({ id: spec.id, reason });
      log(`${position} ${spec.id}: skipped: ${reason}`);
      continue;
    }
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
    trainerSpeedup: speedup,
    targets: evaluateTargets({ generation, training, trainerSpeedup: speedup }),
    skipped,
    failed,
  };
  if (previous) result.comparison = { against: options.compare!, rows: compareResults(result, previous) };

  const outDir = options.outDir ?? path.join("bench", "results");
  await mkdir(outDir, { recursive: true });
  const base = path.join(outDir, resultBaseName(createdAt, environment.host, mode));
  const markdown = renderMarkdown(result);
  await writeFileAtomic(`${base}.json`, `${JSON.stringify(result, null, 2)}\n`);
  await writeFileAtomic(`${base}.md`, markdown);
  return { result, jsonFile: `${base}.json`, markdownFile: `${base}.md`, markdown };
}
