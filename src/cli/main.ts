#!/usr/bin/env node
// The `comlrl` command: info, demo, bench.
import { parseArgs } from "node:util";
import { runtimeInfo } from "../runtime.js";
import { runDemo } from "./demo.js";

const USAGE = `usage: comlrl <command> [options]
  info                         libtorch, devices, threads and BLAS in use
  demo [--out DIR] [--epochs N] [--seed N] [--quiet]
                               train two tiny agents with MAGRPO on a cooperative task (CPU, a few minutes)
  bench [--quick] [--compare FILE] [--only PATTERN] [--out DIR] [--device DEV]
                               measure ceilings, generation, training and a whole trainer epoch; writes
                               DIR/<date>-<host>.json and .md (DIR: bench/results). --quick: a smoke run (< 1 min);
                               --compare: ratios against an earlier result; --only: benchmark ids matching a regex`;

async function main(): Promise<void> {
  const [command = "info", ...rest] = process.argv.slice(2);
  switch (command) {
    case "info":
      console.log(JSON.stringify(runtimeInfo(), null, 2));
      return;
    case "demo": {
      const { values } = parseArgs({
        args: rest,
        options: { out: { type: "string", default: "runs/demo" }, epochs: { type: "string", default: "60" }, seed: { type: "string", default: "7" }, quiet: { type: "boolean", default: false } },
      });
      await runDemo({ outputDir: values.out!, epochs: Number(values.epochs), seed: Number(values.seed), quiet: values.quiet! });
      return;
    }
    case "bench": {
      const { values } = parseArgs({
        args: rest,
        options: {
          quick: { type: "boolean", default: false },
          compare: { type: "string" },
          only: { type: "string" },
          out: { type: "string", default: "bench/results" },
          device: { type: "string" },
        },
      });
      const { runSuite } = await import("../bench/suite.js");
      const run = await runSuite({ quick: values.quick, compare: values.compare, only: values.only, outDir: values.out, device: values.device });
      console.log(run.markdown);
      console.error(`results: ${run.jsonFile}\nreport:  ${run.markdownFile}`);
      if (run.result.failed.length > 0) process.exitCode = 1;
      return;
    }
    case "help":
    case "--help":
      console.log(USAGE);
      return;
    default:
      console.error(`comlrl: unknown command "${command}"\n${USAGE}`);
      process.exit(2);
  }
}

main().catch((error) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exit(1);
});
