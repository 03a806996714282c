// Throughput and training rows, after the correctness rows: decoding tokens/s (the transformers side of each is
// measured at the end, scripts/gpu-check/late.mjs), a 0.5B-shaped bf16 model's decode and scoring backward, the
// matmul and copy ceilings, a leak run, and one demo epoch of each trainer family, bf16-mixed included.
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { CausalLM, MAACTrainer, MAGRPOTrainer, Optimizer, createTinyModel, memoryWindow, runtimeInfo } from "../../dist/index.js";
import { buildConfigJson } from "../../dist/models/config.js";
import { addon } from "../../dist/native/loader.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../../dist/tasks/cover-vowels.js";
import { root } from "./harness.mjs";

const PROMPT_TOKENS = 16;

/**
 * New tokens for a decode of PROMPT_TOKENS-token prompts: `wanted`, or fewer where the model's positions end first
 * (GPT-2's learned table: the last new token sits at prompt + new − 1 < positionLimit).
 */
export function newTokensFor(config, wanted) {
  return config.positionLimit > 0 ? Math.min(wanted, config.positionLimit - PROMPT_TOKENS - 1) : wanted;
}

/** Runs the decode rows; returns what the transformers comparison at the end measures again. */
export async function throughputRows(h, fx, scratch) {
  const { device } = h;
  // The CPU fallback decodes past GPT-2's 32 positions on purpose: the row must ask only for the positions it has.
  const wanted = h.gpu ? 64 : 24;
  const decodes = [];
  const decodeRow = (dir, batch, sampled) => async () => {
    const lm = await CausalLM.fromDirectory(dir, { device });
    try {
      const newTokens = newTokensFor(lm.config, wanted);
      const rows = Array.from({ length: batch }, (_, i) => Array.from({ length: PROMPT_TOKENS }, (_, j) => 3 + ((i * 31 + j * 7) % 57)));
      const options = { maxNewTokens: newTokens, doSample: sampled, eosTokenIds: [], padTokenId: 0, ...(sampled ? { topK: 50, topP: 0.9, repetitionPenalty: 1.05 } : { topK: 0 }) };
      await lm.generate(rows, options);
      const started = performance.now();
      const out = await lm.generate(rows, options);
      const seconds = (performance.now() - started) / 1000;
      const ours = (batch * newTokens) / seconds;
      const full = out.lengths.every((length) => length === newTokens);
      decodes.push({ dir, batch, sampled, newTokens, ours });
      const limit = newTokens < wanted ? ` (${newTokens} new: the model has ${lm.config.positionLimit} positions)` : "";
      const msPerToken = batch === 1 ? `, ${((1000 * seconds) / newTokens).toFixed(2)} ms/token` : "";
      return { ok: full, detail: `${ours.toFixed(0)} tok/s${msPerToken}, ${full ? newTokens : "FEWER"} new tokens per row${limit}`, ours };
    } finally {
      lm.dispose();
    }
  };
  for (const batch of [1, 8, 32]) {
    for (const sampled of [false, true]) {
      await h.check(`generate b${batch} ${sampled ? "sampled" : "greedy"} tokens/s`, decodeRow(fx.modelDir, batch, sampled), { estimate: { gpu: 4, cpu: 4 } });
    }
  }
  for (const family of ["mixtral", "gpt2"]) {
    await h.check(`generate ${family} b8 sampled tokens/s`, decodeRow(path.join(root, "tests", "golden", family), 8, true), { estimate: { gpu: 4, cpu: 3 } });
  }

  await h.check("ceilings: matmul fp32 / fp32+TF32 / bf16, copy bandwidth", async () => {
    const n = h.gpu ? 8192 : 256;
    const native = addon();
    const fp32 = await native.measureMatmul({ n, dtype: "float32", device, iterations: 3 });
    const bf16 = await native.measureMatmul({ n, dtype: "bfloat16", device, iterations: 3 });
    const tf32Run = h.child(`
      const { addon } = await import(DIST + "/native/loader.js");
      const native = addon();
      const r = await native.measureMatmul({ n: ${n}, dtype: "float32", device: ${JSON.stringify(device)}, iterations: 3 });
      console.log(JSON.stringify({ ...r, numerics: native.numerics() }));
    `, { env: { COMLRL_TF32: "1" } });
    const copy = await native.measureCopy({ bytes: h.gpu ? 2 ** 30 : 2 ** 24, device, iterations: 3 });
    const failure = h.childFailure(tf32Run);
    if (failure) return { ok: false, detail: `the TF32 run failed: ${failure}` };
    const tf32 = tf32Run.result;
    return {
      ok: tf32.numerics.tf32 === h.gpu,
      detail: `n=${n}: fp32 ${fp32.gflops.toFixed(0)} GFLOP/s, TF32 ${tf32.gflops.toFixed(0)} (applied: ${tf32.numerics.tf32}), bf16 ${bf16.gflops.toFixed(0)}; copy ${copy.gbps.toFixed(1)} GB/s`,
      fp32: fp32.gflops, tf32: tf32.gflops, bf16: bf16.gflops, copyGbps: copy.gbps,
    };
  }, { estimate: { gpu: 10, cpu: 6 } });

  await h.check(`no leak over ${h.gpu ? 200 : 40} steps of generate, backward and AdamW`, async () => {
    const steps = h.gpu ? 200 : 40;
    const lm = await CausalLM.load(fx.modelDir, { device, dtype: "float32" });
    const optimizer = new Optimizer(lm, { lr: 1e-4 });
    const rss = [];
    const allocated = [];
    const early = Math.floor(steps / 10);
    for (let step = 0; step < steps; step++) {
      await lm.zeroGrad();
      await lm.generate(fx.prompts.slice(0, 2), { maxNewTokens: 4, doSample: true, eosTokenIds: [] });
      await fx.losses.policyGradient(lm);
      await optimizer.step();
      if (step === early || step === steps - 1) {
        rss.push(process.memoryUsage().rss);
        allocated.push(runtimeInfo().cudaAllocatedBytes ?? 0);
      }
    }
    optimizer.dispose();
    lm.dispose();
    const rssGrowth = (rss[1] - rss[0]) / 2 ** 20;
    const gpuGrowth = (allocated[1] - allocated[0]) / 2 ** 20;
    return { ok: rssGrowth < 64 && gpuGrowth < 16, detail: `RSS +${rssGrowth.toFixed(1)} MiB, CUDA allocated +${gpuGrowth.toFixed(1)} MiB (steps ${early}→${steps})`, rssGrowth, gpuGrowth };
  }, { estimate: { gpu: 15, cpu: 30 } });

  await demoRows(h, scratch);
  return decodes;
}

// One demo epoch of each trainer family on the device, a non-finite loss an error rather than a skipped batch; then
// the bf16-mixed epoch.
async function demoRows(h, scratch) {
  const { device } = h;
  const demoDir = path.join(scratch, "demo-base");
  const demoTokenizer = await createTinyModel(demoDir, { seed: 7, hiddenSize: 64, numLayers: 2 });
  const formatters = coverVowelsFormatters((messages) => demoTokenizer.applyChatTemplate(messages, { addGenerationPrompt: true }));
  const sampling = { numTurns: 1, numTrainEpochs: 1, maxNewTokens: 4, temperature: 1, topP: 1, topK: null, loggingSteps: 1, evalInterval: 0, seed: 1 };
  const magrpo = (name, config, items) => MAGRPOTrainer.create({
    agents: [demoDir, demoDir], rewardFunc: coverVowelsRewardFunc, formatters, trainDataset: coverVowelsDataset(items),
    outputDir: path.join(scratch, name), quiet: true, onNonFinite: "error",
    config: { ...sampling, numAgents: 2, numGenerations: h.gpu ? 8 : 2, agentLearningRate: 2e-3, rolloutBufferSize: 2, trainBatchSize: 2, agentDevices: [device], ...config },
  });

  await h.check(`MAGRPO demo epoch on ${device}`, async () => {
    const trainer = await magrpo("magrpo", {}, h.gpu ? 16 : 4);
    await trainer.train();
    await trainer.close();
    return { ok: trainer.progress.envStep > 0, detail: `${trainer.progress.envStep} env steps` };
  }, { estimate: { gpu: 10, cpu: 8 } });

  const acConfig = (extra) => ({ ...sampling, numGenerations: 2, rolloutBufferSize: 2, agentLearningRate: 1e-3, criticLearningRate: 1e-3, ...extra });
  const maac = (name, items, config) => MAACTrainer.create({
    agentModel: demoDir, criticModel: demoDir, numAgents: 2, rewardFunc: coverVowelsRewardFunc, formatters,
    trainDataset: coverVowelsDataset(items), outputDir: path.join(scratch, name), quiet: true, onNonFinite: "error", config: acConfig(config),
  });
  await h.check(`MAAC demo epoch on ${device}`, async () => {
    const trainer = await maac("maac", h.gpu ? 8 : 2, { agentDevices: [device], criticDevices: [device] });
    await trainer.train();
    await trainer.close();
    return { ok: trainer.progress.envStep > 0, detail: `${trainer.progress.envStep} env steps` };
  }, { estimate: { gpu: 10, cpu: 15 } });

  await h.check("mp: two agents and a critic on two GPUs", async () => {
    const count = runtimeInfo().cudaDeviceCount;
    if (count < 2) return { skip: `needs 2 CUDA devices, this machine has ${count}` };
    const trainer = await maac("mp", 4, { parallelTraining: "mp", agentDevices: ["cuda:0", "cuda:1"], criticDevices: [`cuda:${2 % count}`] });
    await trainer.train();
    await trainer.close();
    return { ok: trainer.progress.envStep > 0, detail: `${trainer.progress.envStep} env steps` };
  }, { gpuOnly: true, estimate: { gpu: 15, cpu: 0 } });

  // bf16 weights with fp32 master weights and moments: the agents must move at a learning rate whose step is under
  // half a bf16 ulp of most weights. Until the trainers take `precision`, the row says so and SKIPs.
  await h.check(`bf16-mixed MAGRPO epoch on ${device} (lr 5e-6: the weights move)`, async () => {
    let trainer;
    try {
      // Four generations a group on the CPU too: with two, a group's rewards are often equal, and a zero advantage moves nothing.
      trainer = await magrpo("bf16-mixed", { dtype: "bfloat16", precision: "bf16-mixed", agentLearningRate: 5e-6, numGenerations: h.gpu ? 8 : 4 }, h.gpu ? 16 : 8);
    } catch (error) {
      if (error?.field === "precision") return { skip: `this build's trainers have no precision option yet (${error.message})` };
      throw error;
    }
    const watched = "model.layers.0.mlp.down_proj.weight";
    const before = trainer.agents.map((agent) => agent.model.native.getParameter(watched));
    await trainer.train();
    const moved = trainer.agents.map((agent, i) => {
      const after = agent.model.native.getParameter(watched);
      return after.filter((x, j) => x !== before[i][j]).length / after.length;
    });
    await trainer.close();
    return {
      ok: trainer.progress.envStep > 0 && moved.every((fraction) => fraction > 0),
      detail: `${trainer.progress.envStep} env steps; ${watched} changed in ${moved.map((f) => `${(100 * f).toFixed(1)}%`).join(" / ")} of its bf16 elements`,
      moved,
    };
  }, { estimate: { gpu: 12, cpu: 10 } });
}

// A model of Qwen2.5-0.5B's shape (151,936-token vocabulary, 24 layers, 14 heads over 2 KV heads, tied head) with
// random bf16 weights: decode at a 1k-token context and one scoring backward at 8 × 1k tokens, with peak memory.
// The transformers side is timed by the comparison at the end. On the CPU fallback a tiny model of the same family
// runs the same code at small lengths (the shape would take minutes there).
export const HALF_B = {
  gpu: { shape: { vocabSize: 151936, hiddenSize: 896, intermediateSize: 4864, numLayers: 24, numHeads: 14, numKvHeads: 2 }, batch: 8, prompt: 1024, newTokens: 64, completion: 512 },
  cpu: { shape: { vocabSize: 4096, hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2 }, batch: 2, prompt: 32, newTokens: 8, completion: 16 },
};

export async function halfBillionRow(h, scratch) {
  const setting = h.gpu ? HALF_B.gpu : HALF_B.cpu;
  const result = {};
  await h.check(`${h.gpu ? "0.5B-shaped" : "tiny (CPU analogue of the 0.5B row)"} qwen2 bf16: decode b${setting.batch} at ${setting.prompt} tokens, scoring backward`, async () => {
    const config = buildConfigJson("qwen2", { ...setting.shape, ropeTheta: 1e6, rmsNormEps: 1e-6, tieWordEmbeddings: true }, { bosTokenId: null, eosTokenId: 151643 % setting.shape.vocabSize });
    result.config = config;
    result.dir = path.join(scratch, "half-b");
    // transformers builds the same shape from config.json alone (its random weights time alike).
    mkdirSync(result.dir, { recursive: true });
    writeFileSync(path.join(result.dir, "config.json"), `${JSON.stringify(config, null, 2)}\n`);
    const lm = CausalLM.create(config, { device: h.device, dtype: "bfloat16", attnImplementation: "sdpa", seed: 1 });
    try {
      const vocab = setting.shape.vocabSize;
      const prompts = Array.from({ length: setting.batch }, (_, i) => Array.from({ length: setting.prompt }, (_, j) => 3 + ((i * 7919 + j * 104729) % (vocab - 3))));
      const options = { maxNewTokens: setting.newTokens, doSample: false, topK: 0, eosTokenIds: [], padTokenId: 0 };
      await lm.generate(prompts.map((p) => p.slice(0, 8)), { ...options, maxNewTokens: 2 });
      let started = performance.now();
      await lm.generate(prompts, options);
      const decodeSeconds = (performance.now() - started) / 1000;
      const completions = prompts.map((p) => p.slice(0, setting.completion).reverse());
      const advantages = prompts.map((_, i) => (i % 2 ? -1 : 1));
      await lm.zeroGrad();
      await lm.policyGradientBackward(prompts, completions, advantages);
      await lm.zeroGrad();
      memoryWindow();
      started = performance.now();
      const { loss } = await lm.policyGradientBackward(prompts, completions, advantages);
      const backwardSeconds = (performance.now() - started) / 1000;
      const window = memoryWindow().cudaMemory.find((m) => m.device === (h.device === "cuda" ? "cuda:0" : h.device));
      Object.assign(result, { decodeTokensPerSecond: (setting.batch * setting.newTokens) / decodeSeconds, backwardSeconds });
      const peak = window ? `, peak allocated ${(window.peakAllocatedBytes / 2 ** 30).toFixed(2)} GiB` : "";
      return {
        ok: Number.isFinite(loss),
        detail: `decode ${result.decodeTokensPerSecond.toFixed(0)} tok/s (${setting.newTokens} new), scoring backward of ${setting.batch} × ${setting.prompt + setting.completion} tokens ${backwardSeconds.toFixed(2)} s${peak}; transformers timed at the end`,
        ...result,
      };
    } finally {
      lm.dispose();
    }
  }, { estimate: { gpu: 25, cpu: 8 } });
  return { ...result, setting };
}
