// The README demo trained data-parallel: each rank rolls out its share of the items, gradients are averaged over
// the ranks before every optimizer step, and every rank ends with the same weights, bit for bit.
//   npx comlrl launch --nproc 2 examples/ddp-demo.ts [--epochs 40] [--out runs/ddp-demo]
// Run without comlrl launch it is the same training in one process.
import { createHash } from "node:crypto";
import path from "node:path";
import { parseArgs } from "node:util";
import { createDemoBaseModel, demoTrainerOptions } from "../src/demo/recipes.js";
import { ComlrlTokenizer, DistributedContext, MAGRPOTrainer, readJsonlMetrics } from "../src/index.js";

const { values } = parseArgs({ options: { epochs: { type: "string", default: "40" }, out: { type: "string", default: path.join("runs", "ddp-demo") } } });
const out = values.out!;
const dist = process.env.WORLD_SIZE ? await DistributedContext.fromEnvironment() : null;
const main = dist?.isMain ?? true;

// One rank writes the base model; the others read it once it is there.
const baseDir = path.join(out, "base-model");
if (main) await createDemoBaseModel(baseDir, 7);
await dist?.barrier();
const tokenizer = await ComlrlTokenizer.fromDirectory(baseDir);

// Buffer and minibatch sizes are per rank: dividing the demo's by the world size keeps one process's schedule (the
// same samples per optimizer step, the same number of steps per epoch).
const options = demoTrainerOptions(baseDir, tokenizer, { outputDir: out, epochs: Number(values.epochs), seed: 7, quiet: !main });
const perRank = (n: number) => Math.max(1, Math.round(n / (dist?.worldSize ?? 1)));
const config = { ...options.config, rolloutBufferSize: perRank(options.config!.rolloutBufferSize!), trainBatchSize: perRank(options.config!.trainBatchSize!) };
const trainer = await MAGRPOTrainer.create({ ...options, config: { ...config, parallelTraining: dist ? "ddp" : "none" } });
try {
  const started = Date.now();
  await trainer.train();
  const seconds = (Date.now() - started) / 1000;

  const hash = createHash("sha256");
  for (const agent of trainer.agents) for (const { name } of agent.model.native.parameterNames()) hash.update(agent.model.native.getParameter(name));
  const fingerprint = hash.digest("hex").slice(0, 16);
  const fingerprints = dist ? await dist.allGather(fingerprint) : [fingerprint];
  await trainer.saveModel(path.join(out, "agents"));

  if (main) {
    const rewards = readJsonlMetrics(path.join(out, "metrics.jsonl"))
      .filter((r) => r.kind === "train" && typeof r["turn_1/reward_mean"] === "number")
      .map((r) => r["turn_1/reward_mean"] as number);
    const meanOf = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
    const window = Math.max(1, Math.floor(rewards.length / 10));
    console.log(`${dist ? `${dist.worldSize} ranks` : "1 process"}: reward ${meanOf(rewards.slice(0, window)).toFixed(2)} -> ${meanOf(rewards.slice(-window)).toFixed(2)} in ${seconds.toFixed(1)} s`);
    if (dist) {
      const { gradientReductions, gradientBytes, gradientSeconds } = dist.stats;
      console.log(`gradient all-reduces: ${gradientReductions}, ${(gradientBytes / gradientReductions / 2 ** 20).toFixed(2)} MiB and ${((1000 * gradientSeconds) / gradientReductions).toFixed(1)} ms each`);
    }
    const same = fingerprints.every((f) => f === fingerprints[0]);
    console.log(`weights per rank: ${fingerprints.join(" ")} (${same ? "identical" : "DIFFERENT"}); agents saved in ${path.join(out, "agents")}`);
    if (!same) process.exitCode = 1;
  }
} finally {
  await trainer.close();
}
