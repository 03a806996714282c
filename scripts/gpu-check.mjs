#!/usr/bin/env node
// The GPU checks scripts/gpu-check.sh runs once the addon is built: each prints one row of the summary table and
// all of them land in one JSON file. DEVICE=cpu runs the same checks on the CPU (the fallback that CPU machines
// test); the HF comparison then runs on the CPU too.
//   node scripts/gpu-check.mjs <device> <out.json>
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import {
  CausalLM, MAACTrainer, MAGRPOTrainer, createTinyModel, runtimeInfo,
} from "../dist/index.js";
import { addon } from "../dist/native/loader.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../dist/tasks/cover-vowels.js";

const [device = "cuda:0", outFile = "gpu-check.json"] = process.argv.slice(2);
const gpu = device.startsWith("cuda");
const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-gpu-check-"));
const rows = [];

// Tolerances: fp32 on the GPU differs from the CPU by summation order and TF32-free cuBLAS (≈1e-5 relative);
// bf16 weights and activations round to 8 bits of mantissa (≈4e-3 relative per op, a few 1e-2 over a model).
const FP32_TOLERANCE = 1e-4;
const BF16_TOLERANCE = 5e-2;

async function check(name, fn) {
  const started = Date.now();
  try {
    const { ok, detail, ...values } = await fn();
    rows.push({ name, ok, detail, seconds: (Date.now() - started) / 1000, ...values });
  } catch (error) {
    rows.push({ name, ok: false, detail: `threw: ${String(error.message ?? error).split("\n")[0]}`, seconds: (Date.now() - started) / 1000 });
  }
  const row = rows.at(-1);
  console.log(`gpu-check: ${row.ok ? "PASS" : "FAIL"} ${name}: ${row.detail} (${row.seconds.toFixed(1)} s)`);
}

function relativeError(a, b) {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    num += (a[i] - b[i]) ** 2;
    den += b[i] ** 2;
  }
  return Math.sqrt(num / Math.max(den, 1e-30));
}

const info = runtimeInfo();
console.log(`gpu-check: libtorch ${info.torchVersion}, cuda compiled ${info.cudaCompiled}, ${info.cudaDeviceCount} CUDA devices, device ${device}`);

// A model big enough that a GPU step is not all launch overhead: 8 layers of 512, vocabulary 1000.
const modelDir = path.join(scratch, "model");
const tokenizer = await createTinyModel(modelDir, { seed: 1, hiddenSize: 512, numLayers: 8, numHeads: 8, numKvHeads: 4, vocabSize: 1000 });
const prompts = Array.from({ length: 8 }, (_, i) => tokenizer.encode(`the quick brown fox number ${i} jumps over`));
const completions = prompts.map((p) => p.slice().reverse());

// The model core on the device in `dtype` against the CPU in fp32: relative error of the completions' log-probs.
async function coreError(dtype) {
  const cpu = await CausalLM.load(modelDir, { device: "cpu", dtype: "float32" });
  const dev = await CausalLM.load(modelDir, { device, dtype });
  const error = relativeError((await dev.score(prompts, completions)).sum, (await cpu.score(prompts, completions)).sum);
  cpu.dispose();
  dev.dispose();
  return error;
}
for (const [dtype, tolerance] of [["float32", FP32_TOLERANCE], ["bfloat16", BF16_TOLERANCE]]) {
  await check(`model core ${dtype} vs CPU fp32 (log-probs)`, async () => {
    const error = await coreError(dtype);
    return { ok: error < tolerance, detail: `relative error ${error.toExponential(2)} (tolerance ${tolerance})`, error };
  });
}

// Attention on the device: libtorch's scaled_dot_product_attention (what a GPU runs unless told otherwise, from
// libtorch 2.5) against ours, both fp32.
await check("attention: SDPA vs ours on the device (fp32 log-probs)", async () => {
  const [major, minor] = info.torchVersion.split(".").map(Number);
  const expected = major > 2 || (major === 2 && minor >= 5) ? "sdpa" : "eager";
  const sdpa = await CausalLM.load(modelDir, { device, attnImplementation: "sdpa" });
  const eager = await CausalLM.load(modelDir, { device, attnImplementation: "eager" });
  const error = relativeError((await sdpa.score(prompts, completions)).sum, (await eager.score(prompts, completions)).sum);
  const kernel = sdpa.info().attention;
  sdpa.dispose();
  eager.dispose();
  return { ok: kernel === expected && error < FP32_TOLERANCE, detail: `${kernel} (expected ${expected}), relative error ${error.toExponential(2)}`, error };
});

// Generation throughput, greedy, 64 new tokens after a 16-token prompt, against HF generate on the same device.
const NEW_TOKENS = 64;
function hfTokensPerSecond(batch) {
  const script = `
import sys, time, torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).to(sys.argv[2]).eval()
ids = torch.randint(10, 990, (int(sys.argv[3]), 16), device=sys.argv[2])
def run():
    with torch.no_grad():
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=${NEW_TOKENS}, min_new_tokens=${NEW_TOKENS}, do_sample=False, pad_token_id=0)
    if sys.argv[2].startswith("cuda"): torch.cuda.synchronize()
run()
start = time.perf_counter(); run(); seconds = time.perf_counter() - start
print(int(sys.argv[3]) * ${NEW_TOKENS} / seconds)
`;
  const out = execFileSync(process.env.PYTHON ?? "python3", ["-c", script, modelDir, device, String(batch)], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  return Number(out.trim().split("\n").at(-1));
}

const model = await CausalLM.load(modelDir, { device, dtype: "float32" });
for (const batch of [1, 8, 32]) {
  await check(`generate b${batch} tokens/s vs HF generate`, async () => {
    const rows16 = Array.from({ length: batch }, (_, i) => Array.from({ length: 16 }, (_, j) => 10 + ((i * 31 + j * 7) % 980)));
    const options = { maxNewTokens: NEW_TOKENS, doSample: false, eosTokenIds: [-1], padTokenId: 0 };
    await model.generate(rows16, options);
    const started = performance.now();
    await model.generate(rows16, options);
    const ours = (batch * NEW_TOKENS) / ((performance.now() - started) / 1000);
    let peer = null;
    try {
      peer = hfTokensPerSecond(batch);
    } catch (error) {
      return { ok: true, detail: `${ours.toFixed(0)} tok/s; HF generate not run (${String(error.stderr ?? error.message).trim().split("\n").at(-1)})`, ours, peer };
    }
    return { ok: true, detail: `${ours.toFixed(0)} tok/s, HF ${peer.toFixed(0)} tok/s (${(ours / peer).toFixed(2)}×)`, ours, peer };
  });
}
model.dispose();

// One demo epoch of each trainer family on the device: the demo's MAGRPO, and MAAC with its critic beside them.
const demoDir = path.join(scratch, "demo-base");
const demoTokenizer = await createTinyModel(demoDir, { seed: 7, hiddenSize: 64, numLayers: 2 });
const formatters = coverVowelsFormatters((messages) => demoTokenizer.applyChatTemplate(messages, { addGenerationPrompt: true }));
const sampling = { numTurns: 1, numTrainEpochs: 1, maxNewTokens: 4, temperature: 1, topP: 1, topK: null, loggingSteps: 1, evalInterval: 0, seed: 1 };

await check(`MAGRPO demo epoch on ${device}`, async () => {
  const trainer = await MAGRPOTrainer.create({
    agents: [demoDir, demoDir], rewardFunc: coverVowelsRewardFunc, formatters, trainDataset: coverVowelsDataset(16),
    outputDir: path.join(scratch, "magrpo"), quiet: true,
    config: { ...sampling, numAgents: 2, numGenerations: 8, agentLearningRate: 2e-3, rolloutBufferSize: 2, trainBatchSize: 2, agentDevices: [device] },
  });
  await trainer.train();
  await trainer.close();
  return { ok: trainer.progress.envStep > 0, detail: `${trainer.progress.envStep} env steps` };
});

const acConfig = (extra) => ({
  ...sampling, numGenerations: 2, rolloutBufferSize: 2, agentLearningRate: 1e-3, criticLearningRate: 1e-3, ...extra,
});
await check(`MAAC demo epoch on ${device}`, async () => {
  const trainer = await MAACTrainer.create({
    agentModel: demoDir, criticModel: demoDir, numAgents: 2, rewardFunc: coverVowelsRewardFunc, formatters,
    trainDataset: coverVowelsDataset(8), outputDir: path.join(scratch, "maac"), quiet: true,
    config: acConfig({ agentDevices: [device], criticDevices: [device] }),
  });
  await trainer.train();
  await trainer.close();
  return { ok: trainer.progress.envStep > 0, detail: `${trainer.progress.envStep} env steps` };
});

await check(`mp: two agents and a critic placed on ${gpu ? "cuda:N" : "cpu"} devices`, async () => {
  const count = gpu ? info.cudaDeviceCount : 1;
  const devices = gpu ? [0, 1].map((i) => `cuda:${i % count}`) : ["cpu", "cpu"];
  const critic = gpu ? `cuda:${(2 % count)}` : "cpu";
  const trainer = await MAACTrainer.create({
    agentModel: demoDir, criticModel: demoDir, numAgents: 2, rewardFunc: coverVowelsRewardFunc, formatters,
    trainDataset: coverVowelsDataset(4), outputDir: path.join(scratch, "mp"), quiet: true,
    config: acConfig({ parallelTraining: "mp", agentDevices: devices, criticDevices: [critic] }),
  });
  await trainer.train();
  await trainer.close();
  return { ok: trainer.progress.envStep > 0, detail: `agents on ${devices.join(", ")}, critic on ${critic}, ${trainer.progress.envStep} env steps` };
});

await check("1-rank process group all-reduce (NCCL on GPU tensors)", async () => {
  const native = addon();
  if (gpu && !native.NativeProcessGroup.ncclAvailable()) return { ok: false, detail: "this build has no NCCL" };
  const group = await native.NativeProcessGroup.create({
    rank: 0, worldSize: 1, masterAddr: "127.0.0.1", masterPort: 29500 + (process.pid % 1000), timeoutMs: 60_000,
    ...(gpu ? { ncclDevice: Number(device.split(":")[1] ?? 0) } : {}),
  });
  const lm = await CausalLM.load(demoDir, { device, dtype: "float32" });
  const before = await lm.policyGradientBackward(prompts.slice(0, 2), completions.slice(0, 2), [1, -1]);
  const traffic = await group.allReduceGradients([lm.native], { weight: 2 });
  const values = await group.allReduce(new Float64Array([1, 2, 3]), "sum");
  group.dispose();
  lm.dispose();
  const ok = traffic.totalWeight === 2 && values.join(",") === "1,2,3" && Number.isFinite(before.loss);
  return { ok, detail: `${traffic.bytes} bytes of gradients in ${(traffic.seconds * 1000).toFixed(1)} ms, total weight ${traffic.totalWeight}` };
});

await check("no leak over 200 train steps", async () => {
  const lm = await CausalLM.load(demoDir, { device, dtype: "float32" });
  const rss = [];
  const allocated = [];
  for (let step = 0; step < 200; step++) {
    lm.zeroGrad();
    await lm.policyGradientBackward(prompts.slice(0, 4), completions.slice(0, 4), [1, -1, 0.5, -0.5]);
    if (step === 20 || step === 199) {
      rss.push(process.memoryUsage().rss);
      allocated.push(runtimeInfo().cudaAllocatedBytes ?? 0);
    }
  }
  lm.dispose();
  const rssGrowth = (rss[1] - rss[0]) / 2 ** 20;
  const gpuGrowth = (allocated[1] - allocated[0]) / 2 ** 20;
  return { ok: rssGrowth < 64 && gpuGrowth < 16, detail: `RSS +${rssGrowth.toFixed(1)} MiB, CUDA allocated +${gpuGrowth.toFixed(1)} MiB (steps 20→200)`, rssGrowth, gpuGrowth };
});

const width = Math.max(...rows.map((r) => r.name.length));
console.log(`\n${"check".padEnd(width)}  result  seconds  detail`);
for (const r of rows) console.log(`${r.name.padEnd(width)}  ${r.ok ? "PASS  " : "FAIL  "}  ${r.seconds.toFixed(1).padStart(7)}  ${r.detail}`);
writeFileSync(outFile, `${JSON.stringify({ device, runtime: info, rows }, null, 2)}\n`);
console.log(`gpu-check: wrote ${outFile}`);
process.exit(rows.every((r) => r.ok) ? 0 : 1);
