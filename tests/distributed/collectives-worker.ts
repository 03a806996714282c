// One rank of the collective tests, as a child process: node --import tsx collectives-worker.ts <scenario> <outFile>
// with the torchrun variables set by the test. Writes what it observed as JSON to outFile.
import { writeFileSync } from "node:fs";
import { DistributedContext } from "../../src/distributed/context.js";
import { readDistributedEnvironment } from "../../src/distributed/environment.js";
import { addon } from "../../src/native/loader.js";
import { tinyLM, batchOf } from "../native/tiny-lm.js";

const [scenario, outFile] = process.argv.slice(2);
const write = (value: unknown) => writeFileSync(outFile, JSON.stringify(value));
const environment = readDistributedEnvironment()!;

if (scenario === "never-joined") {
  // Only this rank of two is started: joining must fail within the timeout.
  const started = Date.now();
  try {
    await DistributedContext.connect(environment);
    write({ joined: true });
  } catch (error) {
    write({ error: (error as Error).message, name: (error as Error).name, seconds: (Date.now() - started) / 1000 });
  }
  process.exit(0);
}

const dist = await DistributedContext.connect(environment);
const rank = dist.rank;

if (scenario === "collectives") {
  const sum = await dist.allReduce([rank + 1, 10 * rank, 0.5], "sum");
  const mean = await dist.allReduce([rank + 1], "mean");
  const max = await dist.allReduce([rank, -rank], "max");
  const min = await dist.allReduce([rank, -rank], "min");
  // Payloads of different lengths on each rank, one of them empty.
  const gathered = await dist.allGather(rank === 0 ? { rank, text: "x".repeat(1000) } : { rank, list: [1, 2, 3] });
  const empty = await dist.allGather(rank === 0 ? "" : "abc");
  const broadcast = await dist.broadcast(rank === 1 ? { from: 1, values: [3, 1, 4] } : null, 1);
  await dist.barrier();

  // Gradients: each rank's own model (different seeds) after the broadcast holds rank 0's weights; then a
  // backward over rank-specific rows, reduced with weights 1 and 3.
  const model = tinyLM(rank === 0 ? 5 : 99);
  await dist.broadcastParameters([model.native]);
  const names = model.native.parameterNames().map((p) => p.name);
  const weights = names.map((name) => [...model.native.getParameter(name)]);
  const rows = rank === 0 ? batchOf([[1, 2, 3]], [[4, 5]]) : batchOf([[6, 7], [8]], [[9], [10, 11, 12]]);
  await addon().policyGradientBackward(model.native, { ...rows, advantages: Float32Array.from(rank === 0 ? [1] : [0.5, -1]) });
  const localGradients = names.map((name) => [...(model.native.getGradient(name) ?? [])]);
  const reduced = await dist.allReduceGradients([model.native], rank === 0 ? 1 : 3, [rank === 0 ? 2 : 5]);
  const gradients = names.map((name) => [...(model.native.getGradient(name) ?? [])]);
  write({ sum, mean, max, min, gathered, empty, broadcast, weights, localGradients, gradients, totalWeight: reduced.totalWeight, values: reduced.values, bytes: reduced.bytes });
  process.exit(0);
}

if (scenario === "dead-peer") {
  await dist.barrier();
  if (rank === 1) process.exit(7);  // dies without a word, as a killed rank does
  const started = Date.now();
  try {
    await dist.allReduce([1], "sum");
    write({ completed: true });
  } catch (error) {
    let again = "";
    try {
      await dist.barrier();
    } catch (second) {
      again = (second as Error).message;
    }
    write({ error: (error as Error).message, name: (error as Error).name, seconds: (Date.now() - started) / 1000, again });
  }
  process.exit(0);
}
throw new Error(`unknown scenario ${scenario}`);
