#!/usr/bin/env node
// One rank of gpu-check's DDP row, run by `comlrl launch --nproc 2`: a one-epoch MAGRPO demo with parallelTraining
// "ddp" and automatic placement. Rank 0 writes every rank's placement and weights fingerprint to <out>/ranks.json.
//   node dist/cli/main.js launch --nproc 2 scripts/gpu-check-ddp.mjs <out>
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { ComlrlTokenizer, DistributedContext, MAGRPOTrainer, runtimeInfo } from "../dist/index.js";
import { createDemoBaseModel, demoTrainerOptions } from "../dist/demo/recipes.js";

const out = process.argv[2];
const dist = await DistributedContext.fromEnvironment();
const baseDir = path.join(out, "base-model");
if (dist.isMain) await createDemoBaseModel(baseDir, 7);
await dist.barrier();
const tokenizer = await ComlrlTokenizer.fromDirectory(baseDir);
const options = demoTrainerOptions(baseDir, tokenizer, { outputDir: out, epochs: 1, seed: 7, quiet: true, items: 8 });
const perRank = (n) => Math.max(1, Math.round(n / dist.worldSize));
const config = { ...options.config, rolloutBufferSize: perRank(options.config.rolloutBufferSize), trainBatchSize: perRank(options.config.trainBatchSize) };
const trainer = await MAGRPOTrainer.create({ ...options, config: { ...config, parallelTraining: "ddp" }, onNonFinite: "error" });
try {
  await trainer.train();
  const hash = createHash("sha256");
  for (const agent of trainer.agents) for (const { name } of agent.model.native.parameterNames()) hash.update(agent.model.native.getParameter(name));
  const all = await dist.allGather({
    rank: dist.rank,
    localRank: dist.environment.localRank,
    devices: trainer.agents.map((agent) => agent.model.info().device),
    fingerprint: hash.digest("hex").slice(0, 16),
    cudaDeviceCount: runtimeInfo().cudaDeviceCount,
  });
  if (dist.isMain) writeFileSync(path.join(out, "ranks.json"), `${JSON.stringify(all, null, 2)}\n`);
} finally {
  await trainer.close();
}
