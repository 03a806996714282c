#!/usr/bin/env node
// The `comlrl` command: info, demo, train, export, bench. Every command validates its whole command line before it does any
// work; a bad command line prints the usage and exits with 2, a failed run prints its error (no stack) and exits with 1.
import { describeError, integerOption, parseCommandArgs, splitPassthrough, stringOption, UsageError, type Command, type OptionValues } from "./args.js";

const info: Command = {
  name: "info",
  usage: "usage: comlrl info\n  libtorch, devices, threads, BLAS and numerics (TF32, determinism) in use; on a GPU without TF32, what it would buy",
  options: {},
  async run() {
    const { numerics, runtimeInfo, tf32Hint } = await import("../runtime.js");
    const facts = runtimeInfo();
    const hint = tf32Hint(numerics(), facts.cudaDeviceCount);
    console.log(JSON.stringify({ ...facts, numerics: numerics(), ...(hint === null ? {} : { tf32Hint: hint }) }, null, 2));
  },
};

const demo: Command = {
  name: "demo",
  usage: `usage: comlrl demo [--out DIR] [--epochs N] [--seed N] [--quiet]
  train two tiny agents with MAGRPO on a cooperative task (CPU, about 20 s)
  --out DIR     where the model, metrics, plot and agents go (default runs/demo)
  --epochs N    passes over the 16 items, N ≥ 1 (default 60)
  --seed N      seed of the model and of sampling, N ≥ 0 (default 7)
  --quiet       no progress bar`,
  options: { out: { type: "string" }, epochs: { type: "string" }, seed: { type: "string" }, quiet: { type: "boolean" } },
  async run(values) {
    const options = {
      outputDir: stringOption(values, "out") ?? "runs/demo",
      epochs: integerOption(values, "epochs", 1) ?? 60,
      seed: integerOption(values, "seed", 0) ?? 7,
      quiet: values.quiet === true,
    };
    const { runDemo } = await import("./demo.js");
    await runDemo(options);
  },
};

const train: Command = {
  name: "train",
  usage: `usage: comlrl train --config FILE [--resume latest|DIR] [--allow-config-change FIELDS] [--output DIR] [--gguf f16|bf16|q8_0] [--no-wandb] [--quiet]
  train with the trainer, task, model and data a CoMLRL-style YAML or JSON config names
  --config FILE   the config file (.yaml, .yml or .json)
  --resume X      continue from the newest checkpoint ("latest") or from a checkpoint directory
  --allow-config-change FIELDS
                  resume although these config fields (comma-separated, e.g. numGenerations,seed) differ from the checkpoint's
  --output DIR    replaces output.base_dir (metrics, checkpoints, the final model)
  --gguf T        save the final model as agent_i/model.gguf of type T (f16, bf16, q8_0) for llama.cpp
  --no-wandb      no W&B run, even when the file has a wandb section
  --quiet         no progress bar or console lines`,
  options: {
    config: { type: "string" },
    resume: { type: "string" },
    "allow-config-change": { type: "string" },
    output: { type: "string" },
    gguf: { type: "string" },
    "no-wandb": { type: "boolean" },
    quiet: { type: "boolean" },
  },
  async run(values) {
    const config = stringOption(values, "config");
    if (config === undefined) throw new UsageError("--config FILE is required");
    const allowConfigChanges = (stringOption(values, "allow-config-change") ?? "").split(",").map((field) => field.trim()).filter(Boolean);
    const options = {
      config,
      resume: stringOption(values, "resume"),
      allowConfigChanges,
      output: stringOption(values, "output"),
      gguf: ggufDtypeOption(values, "gguf"),
      wandb: values["no-wandb"] !== true,
      quiet: values.quiet === true,
    };
    const { runTrain } = await import("./train.js");
    await runTrain(options);
  },
};

const GGUF_DTYPES = ["f16", "bf16", "q8_0"] as const;

/** --dtype / --gguf: one of the GGUF weight types, or undefined when absent. */
function ggufDtypeOption(values: OptionValues, name: string): (typeof GGUF_DTYPES)[number] | undefined {
  const raw = stringOption(values, name);
  if (raw === undefined) return undefined;
  const dtype = GGUF_DTYPES.find((d) => d === raw);
  if (dtype === undefined) throw new UsageError(`--${name} must be one of ${GGUF_DTYPES.join(", ")}, got ${JSON.stringify(raw)}`);
  return dtype;
}

const exportCommand: Command = {
  name: "export",
  usage: `usage: comlrl export --model DIR --out FILE.gguf [--dtype f16|bf16|q8_0] [--name NAME]
  write a Hugging Face model directory (a trained agent) as one GGUF file that llama.cpp, node-llama-cpp and Ollama run
  --model DIR   the model directory (config.json, safetensors, tokenizer.json)
  --out FILE    the .gguf file to write (atomically)
  --dtype T     the 2-D weights' type: f16 (default), bf16 or q8_0; norms stay f32
  --name NAME   general.name in the file (default: the file's name)`,
  options: { model: { type: "string" }, out: { type: "string" }, dtype: { type: "string" }, name: { type: "string" } },
  async run(values) {
    const model = stringOption(values, "model");
    const out = stringOption(values, "out");
    if (model === undefined || out === undefined) throw new UsageError("--model DIR and --out FILE are required");
    const options = { dtype: ggufDtypeOption(values, "dtype"), name: stringOption(values, "name") };
    const { exportGguf } = await import("../models/gguf/export.js");
    const summary = await exportGguf(model, out, options);
    console.error(`comlrl export: ${summary.file} (${summary.architecture}, ${summary.tensors.length} tensors)`);
  },
};

const bench: Command = {
  name: "bench",
  usage: `usage: comlrl bench [--quick] [--compare FILE] [--only PATTERN] [--out DIR] [--device DEV]
  measure ceilings, generation, training and a whole trainer epoch; writes DIR/<date>-<host>.json and .md
  --quick           a smoke run (< 1 min)
  --compare FILE    ratios against an earlier result
  --only PATTERN    benchmark ids matching a regex
  --out DIR         where results go (default bench/results)
  --device DEV      the device to measure (default: the best available)`,
  options: { quick: { type: "boolean" }, compare: { type: "string" }, only: { type: "string" }, out: { type: "string" }, device: { type: "string" } },
  async run(values) {
    const options = {
      quick: values.quick === true,
      compare: stringOption(values, "compare"),
      only: stringOption(values, "only"),
      outDir: stringOption(values, "out") ?? "bench/results",
      device: stringOption(values, "device"),
    };
    const { runSuite } = await import("../bench/suite.js");
    const run = await runSuite(options);
    console.log(run.markdown);
    console.error(`results: ${run.jsonFile}\nreport:  ${run.markdownFile}`);
    return run.result.failed.length > 0 ? 1 : 0;
  },
};

const launch: Command = {
  name: "launch",
  usage: `usage: comlrl launch --nproc N [--nnodes M --node-rank R --master ADDR:PORT] SCRIPT|train [ARGS...]
  run SCRIPT (.ts through tsx, .js with node) or comlrl train as N data-parallel ranks on this node, with the
  torchrun environment (the trainer's parallelTraining must be "ddp")
  --nproc N          ranks on this node, 1 ≤ N ≤ 8 per core; the cores are split among them (COMLRL_NUM_THREADS overrides)
  --nnodes M         nodes in the job, M ≥ 1 (default 1)
  --node-rank R      this node's index, 0 ≤ R < M (default 0; rank = R·N + local rank)
  --master ADDR:PORT rank 0's rendezvous (required with M > 1; default 127.0.0.1 and a free port)
  A rank that fails stops the others; SIGINT and SIGTERM are passed to every rank.`,
  options: { nproc: { type: "string" }, nnodes: { type: "string" }, "node-rank": { type: "string" }, master: { type: "string" } },
  passthrough: true,
  async run(values, rest) {
    const nproc = integerOption(values, "nproc", 1);
    if (nproc === undefined) throw new UsageError("--nproc N is required");
    const options = {
      nproc,
      nnodes: integerOption(values, "nnodes", 1) ?? 1,
      nodeRank: integerOption(values, "node-rank", 0) ?? 0,
      master: stringOption(values, "master") ?? null,
      command: rest,
    };
    const { checkLaunchOptions, runLaunch } = await import("./launch.js");
    checkLaunchOptions(options);
    return runLaunch(options);
  },
};

const COMMANDS = new Map([info, demo, train, exportCommand, bench, launch].map((command) => [command.name, command]));

const USAGE = `usage: comlrl <command> [options]   (comlrl <command> --help for its options)
  info     libtorch, devices, threads and BLAS in use
  demo     train two tiny agents with MAGRPO on a cooperative task (CPU, about 20 s)
  train    train from a CoMLRL-style config file: comlrl train --config FILE [--resume latest] [--output DIR]
  export   write a model directory as a GGUF file for llama.cpp: comlrl export --model DIR --out FILE.gguf
  bench    measure ceilings, generation, training and a whole trainer epoch
  launch   run a script as data-parallel ranks: comlrl launch --nproc N script.ts [args...]`;

async function main(argv: string[]): Promise<number> {
  const [name = "info", ...rest] = argv;
  if (name === "help" || name === "--help" || name === "-h") {
    console.log(USAGE);
    return 0;
  }
  const command = COMMANDS.get(name);
  if (command === undefined) {
    console.error(`comlrl: unknown command "${name}"\n${USAGE}`);
    return 2;
  }
  try {
    const [own, passthrough] = splitPassthrough(command, rest);
    const values = parseCommandArgs(command, own);
    if (values === null) {
      console.log(command.usage);
      return 0;
    }
    return (await command.run(values, passthrough)) ?? 0;
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`comlrl ${name}: ${error.message}\n${command.usage.split("\n")[0]}\n(comlrl ${name} --help describes the options)`);
      return 2;
    }
    console.error(`comlrl ${name}: ${describeError(error)}`);
    return 1;
  }
}

// A failed run may leave handles open (a W&B connection, a native lane); its status is final, so exit now.
const status = await main(process.argv.slice(2));
if (status !== 0) process.exit(status);
