// One benchmark case in a process of its own, so that the process's peak resident set is that benchmark's:
//   node dist/bench/worker.js <device> <case as JSON>
// Prints one line on stdout, WORKER_RESULT_PREFIX + JSON: the result, or { error } with exit code 1.
import { measureAlgorithmEpoch } from "./algorithms.js";
import { measureCopyCeiling, measureMatmulCeiling } from "./ceilings.js";
import { measureGeneration } from "./generation.js";
import { measureTrainerEpoch } from "./trainer.js";
import { measureTraining } from "./training.js";
import { WORKER_RESULT_PREFIX, type AnyCase, type WorkerOutput } from "./types.js";

function run(spec: AnyCase, device: string): Promise<WorkerOutput> {
  switch (spec.kind) {
    case "matmul":
      return measureMatmulCeiling(spec, device);
    case "copy":
      return measureCopyCeiling(spec, device);
    case "generate":
      return measureGeneration(spec, device);
    case "train":
      return measureTraining(spec, device);
    case "trainer":
      return measureTrainerEpoch(spec);
    case "algorithm":
      return measureAlgorithmEpoch(spec);
  }
}

// A worker whose suite has gone (killed, Ctrl-C in another terminal) stops instead of computing for nobody. The
// channel is unreferenced so that it does not keep a finished worker alive.
process.on("disconnect", () => process.exit(2));
process.channel?.unref();

const [device, json] = process.argv.slice(2);
if (!device || !json) {
  console.error("usage: worker.js <device> <benchmark case as JSON> (the bench suite starts this; see `comlrl bench`)");
  process.exit(2);
}
try {
  const output = await run(JSON.parse(json) as AnyCase, device);
  const usage = process.resourceUsage();
  const peakRssMiB = usage.maxRSS / 1024;
  // All threads' CPU time (libtorch's included), so the parent can tell this process's work from others'.
  const cpuSeconds = (usage.userCPUTime + usage.systemCPUTime) / 1e6;
  process.stdout.write(`${WORKER_RESULT_PREFIX}${JSON.stringify({ ...output, peakRssMiB, cpuSeconds })}\n`);
} catch (error) {
  // The message goes back as the result line (the parent names the benchmark with it), the stack to stderr.
  const message = error instanceof Error ? error.message : String(error);
  process.stdout.write(`${WORKER_RESULT_PREFIX}${JSON.stringify({ error: message })}\n`);
  console.error(error instanceof Error ? (error.stack ?? message) : message);
  process.exitCode = 1;
}
