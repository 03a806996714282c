#!/usr/bin/env node
// The `comlrl` command: info, demo.
import { parseArgs } from "node:util";
import { runtimeInfo } from "../runtime.js";
import { runDemo } from "./demo.js";

const USAGE = `usage: comlrl <command> [options]
  info                         libtorch, devices, threads and BLAS in use
  demo [--out DIR] [--epochs N] [--seed N] [--quiet]
                               train two tiny agents with MAGRPO on a cooperative task (CPU, a few minutes)`;

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
