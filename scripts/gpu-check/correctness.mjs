// The cheap correctness rows, first in the run: the runtime, every golden family, the SDPA kernels, the model core
// and every loss's gradients against the CPU, AdamW, dropout, the blocked LM head, the step in backward, ragged
// batches, device memory, two lanes, round trips, a 1-rank process group and the negative cases.
import { readFileSync } from "node:fs";
import path from "node:path";
import { CausalLM, Optimizer, ValueHead, memoryWindow, runtimeInfo, setLogitsBlockRows } from "../../dist/index.js";
import { buildConfigJson } from "../../dist/models/config.js";
import { addon } from "../../dist/native/loader.js";
import { BF16_TOLERANCE, FP32_TOLERANCE, GRADIENT_PARAMS } from "./fixtures.mjs";
import { hasNaN, maxAbsDiff, readSafetensors, relativeError, root } from "./harness.mjs";

const FAMILIES = ["llama3", "qwen2_sliding", "gemma2", "gemma3_text", "gpt2", "mixtral", "qwen3_moe", "phi3", "olmo2"];

export async function correctnessRows(h, fx, scratch) {
  const { device } = h;
  const { modelDir, prompts, completions, losses } = fx;

  await h.check("runtimeInfo before any CUDA tensor (fresh process)", async () => {
    const run = h.child(`const { runtimeInfo } = await import(DIST + "/index.js"); console.log(JSON.stringify(runtimeInfo()));`);
    const failure = h.childFailure(run);
    if (failure) return { ok: false, detail: failure };
    return { ok: true, detail: `libtorch ${run.result.torchVersion}, ${run.result.cudaDeviceCount} CUDA devices` };
  }, { estimate: { gpu: 5, cpu: 5 } });

  await h.check("runtime after a model on the device", async () => {
    const lm = await CausalLM.load(modelDir, { device });
    h.runtime = runtimeInfo();
    lm.dispose();
    const cuda = Object.fromEntries(Object.entries(h.runtime).filter(([key]) => key.startsWith("cuda")));
    return { ok: !h.gpu || h.runtime.cudaAvailable, detail: `libtorch ${h.runtime.torchVersion}, ${JSON.stringify(cuda)}` };
  }, { estimate: { gpu: 5, cpu: 2 } });

  // Every family's golden fixture on the device, eager and SDPA: full, right- and left-padded logits against
  // transformers' at real positions, and no NaN at any position.
  for (const family of FAMILIES) {
    await h.check(`golden ${family}: full / right / left-padded logits, eager and sdpa`, () => goldenRow(device, family), { estimate: { gpu: 3, cpu: 3 } });
  }

  // Which SDPA kernel each kind of forward runs, for grouped-query and multi-head models in fp32 and bf16.
  await h.check("SDPA kernel chosen (training / masked / decode)", async () => {
    const found = [];
    let mathOnBf16Training = false;
    for (const [label, numKvHeads] of [["GQA", 2], ["MHA", 8]]) {
      const config = buildConfigJson("qwen2", { vocabSize: 256, hiddenSize: 512, intermediateSize: 1024, numLayers: 1, numHeads: 8, numKvHeads, ropeTheta: 1e4, rmsNormEps: 1e-6, tieWordEmbeddings: false }, { bosTokenId: null, eosTokenId: 255 });
      for (const dtype of ["float32", "bfloat16"]) {
        const lm = CausalLM.create(config, { device, dtype, attnImplementation: "sdpa" });
        const kernels = lm.info().attentionKernels;
        lm.dispose();
        found.push(`${label} ${dtype}: ${kernels.training}/${kernels.masked}/${kernels.decode}`);
        if (dtype === "bfloat16" && kernels.training === "math") mathOnBf16Training = true;
      }
    }
    return { ok: !(h.gpu && mathOnBf16Training), detail: found.join("; ") };
  }, { estimate: { gpu: 3, cpu: 3 } });

  // The model core and every training loss on the device against the CPU: log-probs, then the gradients of a few
  // tensors (gradient checkpointing off and on). bf16 is judged against the same bf16 model on the CPU, tensor by
  // tensor (its error against fp32 is reported: cancellation in a random model's mixed-sign advantages can make it
  // large without a bug).
  for (const [dtype, tolerance] of [["float32", FP32_TOLERANCE], ["bfloat16", BF16_TOLERANCE]]) {
    await h.check(`model core ${dtype} vs CPU ${dtype} (log-probs)`, async () => {
      const cpu = await CausalLM.load(modelDir, { device: "cpu", dtype });
      const dev = await CausalLM.load(modelDir, { device, dtype });
      const error = relativeError((await dev.score(prompts, completions)).sum, (await cpu.score(prompts, completions)).sum);
      cpu.dispose();
      dev.dispose();
      return { ok: error < tolerance, detail: `relative error ${error.toExponential(2)} (tolerance ${tolerance})`, error };
    }, { estimate: { gpu: 4, cpu: 3 } });
  }

  for (const [dtype, tolerance] of [["float32", FP32_TOLERANCE], ["bfloat16", BF16_TOLERANCE]]) {
    await h.check(`gradients of every loss on ${device} ${dtype} vs CPU ${dtype}, per tensor, checkpointing off and on`, async () => {
      let worst = 0;
      const worstOf = [];
      for (const loss of Object.keys(losses)) {
        const reference = await fx.gradients("cpu", dtype, loss, false);
        const fp32 = dtype === "float32" ? reference : await fx.gradients("cpu", "float32", loss, false);
        for (const checkpointing of [false, true]) {
          const got = await fx.gradients(device, dtype, loss, checkpointing);
          const perTensor = got.map((g, i) => relativeError(g, reference[i]));
          // Bradley-Terry's gradient is that of s_chosen − s_rejected: two near-equal gradients of an untrained head
          // cancel, which bf16 cannot resolve (relative error ≈ 1 between two CPUs' kernels too). Reported only.
          if (!(loss === "bradleyTerry" && dtype === "bfloat16")) worst = Math.max(worst, ...perTensor);
          const againstFp32 = dtype === "float32" ? "" : ` (vs fp32 ${Math.max(...got.map((g, i) => relativeError(g, fp32[i]))).toExponential(1)})`;
          worstOf.push(`${loss}${checkpointing ? "+ckpt" : ""} [${perTensor.map((e) => e.toExponential(1)).join(" ")}]${againstFp32}`);
        }
      }
      const judged = dtype === "bfloat16" ? ", bradleyTerry not judged" : "";
      return { ok: worst < tolerance, detail: `worst per-tensor relative error ${worst.toExponential(2)} (tolerance ${tolerance}${judged}): ${worstOf.join(", ")}`, worst };
    }, { estimate: { gpu: 15, cpu: dtype === "bfloat16" ? 25 : 15 } });
  }

  await h.check(`one AdamW step on ${device} vs CPU (fp32 parameter change)`, async () => {
    const deltas = [];
    for (const where of ["cpu", device]) {
      const lm = await CausalLM.load(modelDir, { device: where });
      const optimizer = new Optimizer(lm, { lr: 1e-3 });
      const before = lm.native.getParameter(GRADIENT_PARAMS[1]);
      await losses.policyGradient(lm);
      await optimizer.step({ maxGradNorm: 1 });
      deltas.push(lm.native.getParameter(GRADIENT_PARAMS[1]).map((x, i) => x - before[i]));
      optimizer.dispose();
      lm.dispose();
    }
    const error = relativeError(deltas[1], deltas[0]);
    return { ok: error < 1e-3, detail: `relative error of the update ${error.toExponential(2)} (tolerance 1e-3: AdamW's first step is lr · sign-like, so tiny gradients amplify rounding)`, error };
  }, { estimate: { gpu: 3, cpu: 2 } });

  // Dropout on the device, eager and SDPA (SDPA takes dropout_p and borrows the default generator with the dropout
  // stream's state): the same stream state gives the same masks, eval mode none, and a checkpointed layer's recompute
  // replays its forward's masks. The keep rate and the 1/(1 − p) scale have CPU tests (tests/native/dropout.test.ts).
  const equalBits = fx.bitwise ? "equal bits" : `within ${FP32_TOLERANCE} (${fx.keys} keys: SDPA's backward adds with atomics)`;
  await h.check(`dropout on ${device}, eager and sdpa: seeded repeat (${equalBits}), eval, checkpointing replay`, async () => {
    const config = { ...JSON.parse(readFileSync(path.join(modelDir, "config.json"), "utf8")), attention_dropout: 0.3 };
    const found = [];
    let ok = true;
    for (const attnImplementation of ["eager", "sdpa"]) {
      const lm = CausalLM.create(config, { device, seed: 4, attnImplementation }).train();
      const dropped = async (checkpointing) => {
        lm.setGradientCheckpointing(checkpointing);
        lm.setSeed(11, "dropout");
        await lm.zeroGrad();
        await losses.policyGradient(lm);
        return lm.native.getGradient(GRADIENT_PARAMS[1]);
      };
      const first = await dropped(false);
      const again = await dropped(false);
      const replayed = await dropped(true);
      lm.eval();
      const undropped = await dropped(false);
      lm.dispose();
      const repeat = fx.bitwise ? maxAbsDiff(again, first) : relativeError(again, first);
      const replay = relativeError(replayed, first);
      const fromEval = relativeError(undropped, first);
      ok &&= (fx.bitwise ? repeat === 0 : repeat < FP32_TOLERANCE) && replay < FP32_TOLERANCE && fromEval > 1e-3 && !hasNaN(first);
      found.push(`${attnImplementation}: repeat ${repeat}, checkpointed ${replay.toExponential(1)}, eval differs by ${fromEval.toExponential(1)}`);
    }
    return { ok, detail: found.join("; ") };
  }, { estimate: { gpu: 4, cpu: 8 } });

  // The LM head scored in blocks of 2 rows against one block of every row, on the device: log-prob gradients alike.
  await h.check(`LM head in blocks of rows on ${device} vs whole (policy-gradient gradients)`, async () => {
    const lm = await CausalLM.load(modelDir, { device });
    const grads = [];
    try {
      for (const rows of [1e6, 2]) {
        setLogitsBlockRows(rows);
        await lm.zeroGrad();
        await losses.policyGradient(lm);
        grads.push(GRADIENT_PARAMS.map((name) => lm.native.getGradient(name)));
      }
    } finally {
      setLogitsBlockRows(0);
      lm.dispose();
    }
    const error = Math.max(...grads[1].map((g, i) => relativeError(g, grads[0][i])));
    return { ok: error < FP32_TOLERANCE, detail: `worst relative error ${error.toExponential(2)} (tolerance ${FP32_TOLERANCE})`, error };
  }, { estimate: { gpu: 3, cpu: 2 } });

  // A step taken inside the backward against the step after it, on twins, LM head whole and in blocks: on CUDA the
  // gradient accumulators' hooks that step each parameter run on autograd's device thread, on the stream it set.
  // Parameters and norm alike (to the bit at these lengths); no gradient left after the backward but a blocked untied
  // head's.
  await h.check(`step in backward on ${device} vs the step after it (AdamW on twins, head whole and blocked; ${equalBits})`, async () => {
    const found = [];
    let ok = true;
    try {
      for (const rows of [0, 2]) {
        setLogitsBlockRows(rows);
        const twins = [await CausalLM.load(modelDir, { device }), await CausalLM.load(modelDir, { device })];
        const [after, within] = twins.map((lm) => new Optimizer(lm, { lr: 1e-3 }));
        let worst = 0;
        let left = 0;
        let normsAlike = true;
        for (let step = 0; step < 3; step++) {
          await twins[0].zeroGrad();
          await losses.policyGradient(twins[0]);
          const expected = await after.step();
          await twins[1].zeroGrad();
          await within.armStepInBackward();
          await losses.policyGradient(twins[1]);
          left = Math.max(left, twins[1].native.parameterNames().filter(({ name }) => twins[1].native.getGradient(name) !== null).length);
          const norm = (await within.step()).gradNorm;
          normsAlike &&= fx.bitwise ? norm === expected.gradNorm : Math.abs(norm - expected.gradNorm) <= FP32_TOLERANCE * expected.gradNorm;
          for (const { name } of twins[0].native.parameterNames()) worst = Math.max(worst, maxAbsDiff(twins[1].native.getParameter(name), twins[0].native.getParameter(name)));
        }
        [after, within, ...twins].forEach((o) => o.dispose());
        ok &&= (fx.bitwise ? worst === 0 : worst < 1e-6) && normsAlike && left <= 1;
        found.push(`${rows ? "blocked" : "whole"} head: largest parameter difference ${worst}, norms alike ${normsAlike}, gradients left ${left}`);
      }
    } finally {
      setLogitsBlockRows(0);
    }
    return { ok, detail: found.join("; ") };
  }, { estimate: { gpu: 6, cpu: 20 } });

  // Ragged batches: prompts of different lengths (left-padded generation, right-padded scoring) and shared prompts
  // (one prefill for K samples), on the device against the CPU.
  await h.check("ragged and shared-prompt batches vs CPU (greedy tokens, scores)", async () => {
    const ragged = [prompts[0].slice(0, 3), prompts[1], prompts[2].slice(0, 5), prompts[3].slice(0, 1)];
    const results = [];
    for (const where of ["cpu", device]) {
      const lm = await CausalLM.load(modelDir, { device: where });
      const greedy = await lm.generate(ragged, { maxNewTokens: 12, eosTokenIds: [], padTokenId: 0, numReturnSequences: 2 });
      const shared = await lm.score([ragged[0], ragged[0], ragged[1], ragged[1]], [completions[0], completions[1].slice(0, 2), completions[2], completions[3].slice(0, 7)]);
      const plain = await lm.score(ragged, completions.slice(0, 4));
      results.push({ tokens: Array.from(greedy.tokens), shared: shared.sum, plain: plain.sum });
      lm.dispose();
    }
    const sameTokens = results[0].tokens.join() === results[1].tokens.join();
    const error = Math.max(relativeError(results[1].shared, results[0].shared), relativeError(results[1].plain, results[0].plain));
    return { ok: sameTokens && error < FP32_TOLERANCE, detail: `greedy tokens ${sameTokens ? "equal" : "DIFFER"}, score relative error ${error.toExponential(2)}`, error };
  }, { estimate: { gpu: 4, cpu: 3 } });

  await memoryRows(h, fx);
  await roundTripRow(h, fx, scratch);

  await h.check("1-rank process group all-reduce (NCCL on GPU tensors)", async () => {
    const native = addon();
    if (h.gpu && !native.NativeProcessGroup.ncclAvailable()) return { skip: "this build has no NCCL (see build-gpu.log: the NCCL compile failed or nccl.h was missing)" };
    const group = await native.NativeProcessGroup.create({
      rank: 0, worldSize: 1, masterAddr: "127.0.0.1", masterPort: 29500 + (process.pid % 1000), timeoutMs: 60_000,
      ...(h.gpu ? { ncclDevice: Number(device.split(":")[1] ?? 0) } : {}),
    });
    const lm = await CausalLM.load(modelDir, { device, dtype: "float32" });
    try {
      const before = await lm.policyGradientBackward(prompts.slice(0, 2), completions.slice(0, 2), [1, -1]);
      const traffic = await group.allReduceGradients([lm.native], { weight: 2 });
      const values = await group.allReduce(new Float64Array([1, 2, 3]), "sum");
      const ok = traffic.totalWeight === 2 && values.join(",") === "1,2,3" && Number.isFinite(before.loss);
      return { ok, detail: `${traffic.bytes} bytes of gradients in ${(traffic.seconds * 1000).toFixed(1)} ms, total weight ${traffic.totalWeight}` };
    } finally {
      group.dispose();
      lm.dispose();
    }
  }, { estimate: { gpu: 8, cpu: 3 } });

  await negativeRows(h, fx);
}

async function goldenRow(device, family) {
  const dir = path.join(root, "tests", "golden", family);
  const ref = readSafetensors(path.join(dir, "golden.safetensors"));
  const t = (key) => {
    if (!ref.has(key)) throw new Error(`${family}: golden tensor ${key} missing`);
    return ref.get(key);
  };
  const parts = [];
  let worst = 0;
  let nan = false;
  for (const attnImplementation of ["eager", "sdpa"]) {
    const lm = await CausalLM.fromDirectory(dir, { device, attnImplementation });
    const vocab = lm.config.vocabSize;
    try {
      for (const [kind, logits, positions] of [["full", "logits.full"], ["right", "logits.right"], ["left", "logits.left", "input.left_position_ids"]]) {
        const ids = t(`input.${kind}_ids`);
        const mask = kind === "full" ? null : t(`input.${kind}_mask`).data;
        const out = await lm.native.forward({
          ids: Int32Array.from(ids.data), batch: ids.shape[0], length: ids.shape[1],
          attentionMask: mask ? Int32Array.from(mask) : undefined,
          positionIds: positions ? Int32Array.from(t(positions).data) : undefined,
        });
        worst = Math.max(worst, maxAbsDiff(out.logits, t(logits).data, (i) => !mask || mask[Math.floor(i / vocab)] === 1));
        nan ||= hasNaN(out.logits);
      }
      parts.push(`${attnImplementation}→${lm.info().attention}`);
    } finally {
      lm.dispose();
    }
  }
  return { ok: worst < FP32_TOLERANCE && !nan, detail: `${parts.join(", ")}: max |Δlogit| ${worst.toExponential(2)} at real positions${nan ? ", NaN at some position" : ""}`, worst, nan };
}

// Device memory after each phase, and two lanes on one GPU ("cuda" and "cuda:0" modules side by side).
async function memoryRows(h, fx) {
  const { device } = h;
  const { modelDir, prompts, completions, losses } = fx;
  await h.check("device memory after load, generate, train step, dispose; a step's memoryWindow() peaks", async () => {
    const phases = [];
    const snapshot = (phase) => phases.push({ phase, ...Object.fromEntries(Object.entries(runtimeInfo()).filter(([key]) => key.startsWith("cuda") && key !== "cudaCompiled")) });
    const lm = await CausalLM.load(modelDir, { device });
    snapshot("load");
    await lm.generate(prompts, { maxNewTokens: 16, eosTokenIds: [] });
    snapshot("generate");
    const optimizer = new Optimizer(lm, { lr: 1e-4 });
    memoryWindow();
    await losses.policyGradient(lm);
    await optimizer.step();
    const step = memoryWindow().cudaMemory.find((m) => m.device === (device === "cuda" ? "cuda:0" : device));
    snapshot("train step");
    optimizer.dispose();
    lm.dispose();
    snapshot("dispose");
    // The step's memory window (what metrics.jsonl's cuda:N/peak_* records report): its peaks are the step's own.
    const windowOk = step !== undefined && step.peakAllocatedBytes > 0 && step.peakReservedBytes >= step.peakAllocatedBytes;
    const stepPeaks = step ? `step window peak allocated ${step.peakAllocatedBytes} B, reserved ${step.peakReservedBytes} B` : `no memoryWindow() entry for ${device}`;
    return { ok: windowOk, detail: `${stepPeaks}; ${phases.map((p) => `${p.phase}: ${JSON.stringify(Object.fromEntries(Object.entries(p).filter(([k]) => k !== "phase")))}`).join("; ")}`, phases };
  }, { gpuOnly: true, estimate: { gpu: 4, cpu: 0 } });

  await h.check("two lanes on one GPU: cuda and cuda:0 modules, klK3, clone, getParameter after a step", async () => {
    const policy = await CausalLM.load(modelDir, { device: "cuda" });
    const reference = await CausalLM.load(modelDir, { device: "cuda:0" });
    try {
      const copy = await policy.clone({ device: "cuda:0" });
      const kl = await policy.klK3(reference, prompts, completions);
      const optimizer = new Optimizer(policy, { lr: 1e-3 });
      await losses.policyGradient(policy);
      const step = optimizer.step();
      const during = policy.native.getParameter(GRADIENT_PARAMS[1]);
      await step;
      const after = policy.native.getParameter(GRADIENT_PARAMS[1]);
      optimizer.dispose();
      copy.dispose();
      const moved = relativeError(after, during);
      return { ok: kl.every((x) => Number.isFinite(x) && Math.abs(x) < 1e-4), detail: `klK3 of equal weights max ${Math.max(...kl.map(Math.abs)).toExponential(1)}; a getParameter during the step read ${moved === 0 ? "the stepped values" : `values ${moved.toExponential(1)} from the stepped ones`}` };
    } finally {
      policy.dispose();
      reference.dispose();
    }
  }, { gpuOnly: true, estimate: { gpu: 5, cpu: 0 } });
}

// Round trips on the device: optimizer state, weights, a head's state dict, the generator's state (same device
// exactly; a CPU state on a GPU refused by name).
async function roundTripRow(h, fx, scratch) {
  const { device } = h;
  const { modelDir, prompts, losses } = fx;
  await h.check(`round trips on ${device}: optimizer, weights, head, generator state`, async () => {
    const lm = await CausalLM.load(modelDir, { device });
    const head = ValueHead.create(lm, { seed: 3 });
    const optimizer = new Optimizer(lm, { lr: 1e-3 });
    try {
      await losses.policyGradient(lm);
      await optimizer.step();
      const optimizerFile = path.join(scratch, "adamw.pt");
      await optimizer.save(optimizerFile);
      await optimizer.load(optimizerFile);
      const weightsDir = path.join(scratch, "saved");
      await lm.save(weightsDir);
      const before = lm.native.getParameter(GRADIENT_PARAMS[1]);
      await lm.loadWeights(weightsDir);
      const weightsSame = maxAbsDiff(lm.native.getParameter(GRADIENT_PARAMS[1]), before) === 0;
      head.loadStateDict(head.stateDict());
      lm.setSeed(5);
      const state = lm.generatorState();
      const a = await lm.generate(prompts.slice(0, 2), { maxNewTokens: 8, doSample: true, eosTokenIds: [] });
      lm.setGeneratorState(state);
      const b = await lm.generate(prompts.slice(0, 2), { maxNewTokens: 8, doSample: true, eosTokenIds: [] });
      const samplesSame = a.tokens.join() === b.tokens.join();
      let crossDevice = "not tried on the CPU fallback";
      if (h.gpu) {
        const cpu = await CausalLM.load(modelDir, { device: "cpu" });
        try {
          lm.setGeneratorState(cpu.generatorState());
          crossDevice = "a CPU generator state was ACCEPTED on the GPU";
        } catch (error) {
          crossDevice = `a CPU generator state refused: ${error.message.split("\n")[0]}`;
        } finally {
          cpu.dispose();
        }
      }
      return { ok: weightsSame && samplesSame && !crossDevice.includes("ACCEPTED"), detail: `weights ${weightsSame ? "equal" : "DIFFER"}, resampled tokens ${samplesSame ? "equal" : "DIFFER"}; ${crossDevice}` };
    } finally {
      optimizer.dispose();
      head.dispose();
      lm.dispose();
    }
  }, { estimate: { gpu: 4, cpu: 3 } });
}

// Negative cases in fresh processes (a device-side assert would poison the CUDA context for good): a pad id past
// the vocabulary must be a readable error and leave the device usable; float16 training must be refused.
async function negativeRows(h, fx) {
  const { device } = h;
  await h.check("negative: padTokenId past the vocabulary is an error, the device still usable", async () => {
    const run = h.child(`
      const { CausalLM } = await import(DIST + "/index.js");
      const lm = await CausalLM.load(${JSON.stringify(fx.modelDir)}, { device: ${JSON.stringify(device)} });
      let message = null;
      try {
        await lm.generate([[5, 6], [7]], { maxNewTokens: 2, eosTokenIds: [], padTokenId: lm.config.vocabSize + 5 });
      } catch (error) { message = error.message.split("\\n")[0]; }
      const after = await lm.score([[5, 6]], [[7, 8]]);
      console.log(JSON.stringify({ message, finite: Number.isFinite(after.sum[0]) }));
    `);
    const failure = h.childFailure(run);
    if (failure) return { ok: false, detail: failure };
    return { ok: run.result.message !== null && run.result.finite, detail: `${run.result.message ?? "NO ERROR"}; scoring after it ${run.result.finite ? "works" : "FAILS"}` };
  }, { estimate: { gpu: 6, cpu: 4 } });

  await h.check("negative: float16 training refused by name", async () => {
    const run = h.child(`
      const { CausalLM, Optimizer } = await import(DIST + "/index.js");
      const lm = await CausalLM.load(${JSON.stringify(fx.modelDir)}, { device: ${JSON.stringify(device)}, dtype: "float16" });
      let message = null;
      try { new Optimizer(lm, { lr: 1e-3 }); } catch (error) { message = error.message; }
      console.log(JSON.stringify({ message }));
    `);
    const failure = h.childFailure(run);
    if (failure) return { ok: false, detail: failure };
    return { ok: /float16/.test(run.result.message ?? ""), detail: run.result.message ?? "float16 training was NOT refused" };
  }, { estimate: { gpu: 6, cpu: 4 } });
}
