// Raw worker measurements → the figures of the results file: rates, roofline and ceiling fractions, run by run, so
// that each figure's min / median / max are those of real runs.
import { BENCH_MODELS, kvCacheBytes } from "./models.js";
import { summarize } from "./stats.js";
import {
  ALGORITHM_PHASES,
  DTYPE_BYTES,
  PHASE_PEAK_PREFIX,
  type AlgorithmCase,
  type AlgorithmResult,
  type CopyCeilingCase,
  type CopyCeilingResult,
  type GenerationCase,
  type GenerationResult,
  type MatmulCeilingCase,
  type MatmulCeilingResult,
  type Measured,
  type TrainerCase,
  type TrainerResult,
  type TrainingCase,
  type TrainingResult,
} from "./types.js";

/** The samples phasePeaks recorded, by "stage/phase". */
const phasePeakRssMiB = (m: Measured) =>
  Object.fromEntries(Object.entries(m.samples).flatMap(([key, values]) => (key.startsWith(PHASE_PEAK_PREFIX) ? [[key.slice(PHASE_PEAK_PREFIX.length), summarize(values)]] : [])));

const processFigures = (m: Measured) => ({ peakRssMiB: m.peakRssMiB, peakDeviceMiB: m.peakDeviceMiB, otherCpuShare: m.otherCpuShare });

export function matmulCeilingResult(spec: MatmulCeilingCase, m: Measured): MatmulCeilingResult {
  return { id: spec.id, dtype: spec.dtype, n: m.details.n, iterations: m.details.iterations, gflops: summarize(m.samples.gflops), ...processFigures(m) };
}

export function copyCeilingResult(spec: CopyCeilingCase, m: Measured): CopyCeilingResult {
  return { id: spec.id, bytes: spec.bytes, gbps: summarize(m.samples.gbps), readGbps: summarize(m.samples.readGbps), ...processFigures(m) };
}

/**
 * Decode reads every weight once per step (the tied embedding as the LM head; the input lookup reads only a row
 * per sequence) plus the K and V cached so far. The first new token comes from the prefill's logits, so a call of
 * newTokens makes newTokens − 1 decode steps, at contexts prompt + 1 … prompt + newTokens − 1: mean prompt + newTokens/2.
 */
export function generationResult(spec: GenerationCase, m: Measured, readGBps: number): GenerationResult {
  const { prefillSeconds, parameterBytes, parameterCount } = m.details;
  const decodeSteps = spec.newTokens - 1;
  const kvBytes = kvCacheBytes(BENCH_MODELS[spec.model], spec.batch, spec.promptLength + spec.newTokens / 2, DTYPE_BYTES[spec.dtype]);
  const bytesPerDecodeStep = parameterBytes + kvBytes;
  const decodeSeconds = m.samples.seconds.map((seconds) => seconds - prefillSeconds);
  if (decodeSteps < 1 || decodeSeconds.some((s) => s <= 0)) {
    throw new Error(`generate took no longer than its prefill alone (${prefillSeconds.toFixed(4)} s); timings too noisy to split`);
  }
  const decodeGBps = decodeSeconds.map((s) => (bytesPerDecodeStep * decodeSteps) / s / 1e9);
  return {
    case: spec,
    parameterCount,
    tokensPerSecond: summarize(m.samples.seconds.map((s) => (spec.batch * spec.newTokens) / s)),
    seconds: summarize(m.samples.seconds),
    prefillSeconds,
    decodeTokensPerSecond: summarize(decodeSeconds.map((s) => (spec.batch * decodeSteps) / s)),
    bytesPerDecodeStep,
    decodeGBps: summarize(decodeGBps),
    rooflineFraction: summarize(decodeGBps.map((gbps) => gbps / readGBps)),
    rooflineTokensPerSecond: (spec.batch * readGBps * 1e9) / bytesPerDecodeStep,
    ...processFigures(m),
  };
}

/**
 * Achieved FLOP/s counts 6 × parameters × tokens per step (forward 2, backward 4), attention's own FLOPs aside; for a
 * mixture of experts only the parameters a token uses (its chosen experts).
 */
export function trainingResult(spec: TrainingCase, m: Measured, matmulGflops: number): TrainingResult {
  const { parameterCount } = m.details;
  const tokens = spec.rows * spec.tokensPerRow;
  const used = parameterCount - (BENCH_MODELS[spec.model].idleParameters ?? 0);
  const gflops = m.samples.seconds.map((s) => (6 * used * tokens) / s / 1e9);
  return {
    case: spec,
    parameterCount,
    stepSeconds: summarize(m.samples.seconds),
    backwardSeconds: summarize(m.samples.backward),
    optimizerSeconds: summarize(m.samples.optimizer),
    tokensPerSecond: summarize(m.samples.seconds.map((s) => tokens / s)),
    gflops: summarize(gflops),
    ceilingFraction: summarize(gflops.map((g) => g / matmulGflops)),
    ...processFigures(m),
  };
}

export function algorithmResult(spec: AlgorithmCase, m: Measured): AlgorithmResult {
  const { envSteps } = m.details;
  return {
    case: spec,
    envSteps,
    epochSeconds: summarize(m.samples.seconds),
    envStepsPerSecond: summarize(m.samples.seconds.map((s) => envSteps / s)),
    phases: Object.fromEntries(ALGORITHM_PHASES[spec.algorithm].map((phase) => [phase, summarize(m.samples[phase])])),
    phasePeakRssMiB: phasePeakRssMiB(m),
    ...processFigures(m),
  };
}

export function trainerResult(spec: TrainerCase, m: Measured): TrainerResult {
  const { envSteps } = m.details;
  const phase = (name: string) => summarize(m.samples[name]);
  return {
    case: spec,
    envSteps,
    epochSeconds: phase("seconds"),
    envStepsPerSecond: summarize(m.samples.seconds.map((s) => envSteps / s)),
    phases: { generation: phase("generation"), reward: phase("reward"), scoring: phase("scoring"), update: phase("update"), other: phase("other") },
    communication: m.samples.allReduceSeconds?.length
      ? {
          allReducesPerEpoch: m.details.allReducesPerEpoch,
          bytesPerStep: m.details.allReduceBytesPerStep,
          secondsPerStep: summarize(m.samples.allReduceSeconds.map((s) => s / Math.max(1, m.details.allReducesPerEpoch))),
        }
      : null,
    phasePeakRssMiB: phasePeakRssMiB(m),
    ...processFigures(m),
  };
}

/** How many times longer a per-completion epoch takes than a batched one (medians), when both ran. */
export function trainerSpeedup(results: TrainerResult[]): number | null {
  const epoch = (scoring: TrainerCase["scoring"]) => results.find((r) => r.case.scoring === scoring && !r.case.layout)?.epochSeconds.median;
  const batched = epoch("batched");
  const perCompletion = epoch("perCompletion");
  return batched && perCompletion ? perCompletion / batched : null;
}
