// One benchmark case in a process of its own, so that the process's peak resident set is that benchmark's:
//   node dist/bench/worker.js <device> <case as JSON>
// Prints one line on stdout, WORKER_RESULT_PREFIX + JSON; a failure goes to stderr with exit code 1.
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
  }
}

const [device, json] = process.argv.slice(2);
if (!device || !json) {
  console.error("usage: worker.js <device> <benchmark case as JSON> (the bench suite starts this; see `comlrl bench`)");
  process.exit(2);
}
try {
  const output = await run(JSON.parse(json) as AnyCase, device);
  const peakRssMiB = process.resourceUsage().maxRSS / 1024;
  process.stdout.write(`${WORKER_RESULT_PREFIX}${JSON.stringify({ ...output, peakRssMiB })}\n`);
} catch (error) {
  console.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
  process.exitCode = 1;
}
