#!/usr/bin/env node
// The GPU checks scripts/gpu-check.sh runs once the addon is built, ordered by what they find per second. Each row is
// PASS, FAIL or SKIP (with the reason), survives the failure of any other, and is written to the JSON file as soon as
// it ends, so that a run killed at its time limit still returns its rows. DEVICE=cpu runs every row that has a CPU
// analogue on the CPU with small shapes (what CI runs: every row must PASS or SKIP there); rows that need a GPU SKIP.
//   node scripts/gpu-check.mjs <device> <out.json>
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  CausalLM, MAACTrainer, MAGRPOTrainer, Optimizer, ValueHead, createTinyModel, memoryWindow, runtimeInfo, setLogitsBlockRows,
} from "../dist/index.js";
import { buildConfigJson } from "../dist/models/config.js";
import { addon } from "../dist/native/loader.js";
import { coverVowelsDataset, coverVowelsFormatters, coverVowelsRewardFunc } from "../dist/tasks/cover-vowels.js";

const [device = "cuda:0", outFile = "gpu-check.json"] = process.argv.slice(2);
const gpu = device.startsWith("cuda");
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-gpu-check-"));
const rows = [];
let runtime = null;
const NEEDS_GPU = "needs a CUDA device (this is the CPU fallback)";

// Tolerances: fp32 on the GPU differs from the CPU by summation order and TF32-free cuBLAS (≈1e-5 relative);
// bf16 weights and activations round to 8 bits of mantissa (≈4e-3 relative per op, a few 1e-2 over a model).
const FP32_TOLERANCE = 1e-4;
const BF16_TOLERANCE = 5e-2;

function save() {
  writeFileSync(outFile, `${JSON.stringify({ device, runtime, rows }, null, 2)}\n`);
}

// fn returns { ok, detail, ...values } or { skip: reason }; a throw is a FAIL with its first line.
async function check(name, fn, { gpuOnly = false } = {}) {
  const started = Date.now();
  let row;
  if (gpuOnly && !gpu) {
    row = { name, status: "SKIP", detail: NEEDS_GPU };
  } else {
    try {
      const { ok, skip, detail, ...values } = await fn();
      row = skip ? { name, status: "SKIP", detail: skip, ...values } : { name, status: ok ? "PASS" : "FAIL", detail, ...values };
    } catch (error) {
      row = { name, status: "FAIL", detail: `threw: ${String(error?.message ?? error).split("\n")[0]}` };
    }
  }
  row.seconds = (Date.now() - started) / 1000;
  rows.push(row);
  save();
  console.log(`gpu-check: ${row.status} ${name}: ${row.detail} (${row.seconds.toFixed(1)} s)`);
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

function maxAbsDiff(a, b, keep = () => true) {
  let worst = 0;
  for (let i = 0; i < a.length; i++) if (keep(i)) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}

const hasNaN = (a) => a.some((x) => Number.isNaN(x));

// A script run in a fresh Node process (ES module, dist/ importable as DIST); its last stdout line parsed as JSON.
function child(script, { env = {}, timeoutMs = 120_000 } = {}) {
  const code = `const DIST = ${JSON.stringify(path.join(root, "dist"))};\n${script}`;
  const run = spawnSync(process.execPath, ["--input-type=module", "-e", code], {
    encoding: "utf8", timeout: timeoutMs, env: { ...process.env, ...env }, maxBuffer: 64 * 2 ** 20,
  });
  const last = run.stdout.trim().split("\n").at(-1) ?? "";
  let result = null;
  try {
    result = JSON.parse(last);
  } catch {
    // not JSON: the caller reads status and stderr
  }
  return { status: run.status, signal: run.signal, result, stderr: run.stderr ?? "" };
}

// A small pure-JS safetensors reader for the golden fixtures (F32/F64/I64/I32), independent of the addon's reader.
function readSafetensors(file) {
  const bytes = readFileSync(file);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8"));
  const out = new Map();
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const [begin, end] = entry.data_offsets;
    const view = new DataView(bytes.buffer, bytes.byteOffset + 8 + headerLength + begin, end - begin);
    const count = entry.shape.reduce((a, b) => a * b, 1);
    const data = new Float64Array(count);
    const read = { F32: (i) => view.getFloat32(i * 4, true), F64: (i) => view.getFloat64(i * 8, true),
      I64: (i) => Number(view.getBigInt64(i * 8, true)), I32: (i) => view.getInt32(i * 4, true) }[entry.dtype];
    if (!read) throw new Error(`${file}: dtype ${entry.dtype} not handled`);
    for (let i = 0; i < count; i++) data[i] = read(i);
    out.set(name, { shape: entry.shape, data });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Build and runtime. runtimeInfo() must work before any CUDA tensor exists (a fresh process), and again after one.

await check("runtimeInfo before any CUDA tensor (fresh process)", async () => {
  const run = child(`const { runtimeInfo } = await import(DIST + "/index.js"); console.log(JSON.stringify(runtimeInfo()));`);
  if (run.status !== 0) return { ok: false, detail: `exit ${run.status ?? run.signal}: ${run.stderr.trim().split("\n").at(-1)}` };
  return { ok: true, detail: `libtorch ${run.result.torchVersion}, ${run.result.cudaDeviceCount} CUDA devices` };
});

// Shapes: a model big enough that a GPU step is not all launch overhead; on the CPU fallback a small one.
const SHAPE = gpu
  ? { hiddenSize: 512, numLayers: 8, numHeads: 8, numKvHeads: 4, vocabSize: 1000 }
  : { hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, vocabSize: 1000 };
const modelDir = path.join(scratch, "model");
const tokenizer = await createTinyModel(modelDir, { seed: 1, ...SHAPE });
const prompts = Array.from({ length: 8 }, (_, i) => tokenizer.encode(`the quick brown fox number ${i} jumps over`));
const completions = prompts.map((p) => p.slice().reverse());

await check("runtime after a model on the device", async () => {
  const lm = await CausalLM.load(modelDir, { device });
  runtime = runtimeInfo();
  lm.dispose();
  const cuda = Object.fromEntries(Object.entries(runtime).filter(([key]) => key.startsWith("cuda")));
  return { ok: !gpu || runtime.cudaAvailable, detail: `libtorch ${runtime.torchVersion}, ${JSON.stringify(cuda)}` };
});

// ---------------------------------------------------------------------------------------------------------------
// Data-parallel on one machine: two ranks under comlrl launch with automatic placement, killed after 90 s. Each
// rank must land on its own device (cuda:LOCAL_RANK where it exists) and both end with the same weights.

await check("DDP: 2 ranks under comlrl launch (60 s collective timeout)", async () => {
  const out = path.join(scratch, "ddp");
  const run = spawnSync(process.execPath, [path.join(root, "dist", "cli", "main.js"), "launch", "--nproc", "2", path.join(root, "scripts", "gpu-check-ddp.mjs"), out], {
    encoding: "utf8", timeout: 90_000, env: { ...process.env, COMLRL_DIST_TIMEOUT: "60", COMLRL_NUM_THREADS: "1" },
  });
  if (run.status !== 0) return { ok: false, detail: `exit ${run.status ?? run.signal}: ${(run.stderr ?? "").trim().split("\n").slice(-2).join(" | ")}` };
  const ranks = JSON.parse(readFileSync(path.join(out, "ranks.json"), "utf8"));
  const same = ranks.every((r) => r.fingerprint === ranks[0].fingerprint);
  const own = ranks.every((r) => !gpu || r.localRank >= r.cudaDeviceCount || r.devices.every((d) => d === `cuda:${r.localRank}`));
  return { ok: same && own, detail: ranks.map((r) => `rank ${r.rank} on ${[...new Set(r.devices)].join(",")} ${r.fingerprint}`).join("; "), ranks };
});

// ---------------------------------------------------------------------------------------------------------------
// Every family's golden fixture on the device, eager and SDPA: full, right- and left-padded logits against
// transformers' at real positions, and no NaN at any position.

const FAMILIES = ["llama3", "qwen2_sliding", "gemma2", "gemma3_text", "gpt2", "mixtral", "qwen3_moe", "phi3", "olmo2"];
for (const family of FAMILIES) {
  await check(`golden ${family}: full / right / left-padded logits, eager and sdpa`, async () => {
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
          const error = maxAbsDiff(out.logits, t(logits).data, (i) => !mask || mask[Math.floor(i / vocab)] === 1);
          worst = Math.max(worst, error);
          nan ||= hasNaN(out.logits);
        }
        parts.push(`${attnImplementation}→${lm.info().attention}`);
      } finally {
        lm.dispose();
      }
    }
    return { ok: worst < FP32_TOLERANCE && !nan, detail: `${parts.join(", ")}: max |Δlogit| ${worst.toExponential(2)} at real positions${nan ? ", NaN at some position" : ""}`, worst, nan };
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Which SDPA kernel each kind of forward runs, for grouped-query and multi-head models in fp32 and bf16.

await check("SDPA kernel chosen (training / masked / decode)", async () => {
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
  return { ok: !(gpu && mathOnBf16Training), detail: found.join("; ") };
});

// ---------------------------------------------------------------------------------------------------------------
// The model core and every training loss on the device against the CPU in fp32: log-probs, gradients of a few
// tensors (with gradient checkpointing off and on), then one optimizer step's parameter change.

for (const [dtype, tolerance] of [["float32", FP32_TOLERANCE], ["bfloat16", BF16_TOLERANCE]]) {
  await check(`model core ${dtype} vs CPU fp32 (log-probs)`, async () => {
    const cpu = await CausalLM.load(modelDir, { device: "cpu", dtype: "float32" });
    const dev = await CausalLM.load(modelDir, { device, dtype });
    const error = relativeError((await dev.score(prompts, completions)).sum, (await cpu.score(prompts, completions)).sum);
    cpu.dispose();
    dev.dispose();
    return { ok: error < tolerance, detail: `relative error ${error.toExponential(2)} (tolerance ${tolerance})`, error };
  });
}

const GRADIENT_PARAMS = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.down_proj.weight"];
const LOSSES = {
  policyGradient: (lm) => lm.policyGradientBackward(prompts.slice(0, 4), completions.slice(0, 4), [1, -1, 0.5, -0.5]),
  causalLM: (lm) => lm.causalLMLossBackward({ ids: Int32Array.from(prompts.slice(0, 4).flatMap((p) => p.slice(0, 6))), batch: 4, length: 6 }),
  valueLoss: (lm, head) => head.valueLossBackward(prompts.slice(0, 4), completions.slice(0, 4), { readout: "v", targets: [0.5, -0.5, 1, 0] }),
  actorCritic: (lm, head) => head.actorCriticBackward(prompts.slice(0, 4), completions.slice(0, 4), { readout: "v", targets: [0.5, -0.5, 1, 0], advantages: [1, -1, 0.5, -0.5], valueLossCoef: 0.5 }),
  bradleyTerry: (lm, head) => head.bradleyTerryBackward({ ids: Int32Array.from(prompts.slice(0, 4).flatMap((p) => p.slice(0, 6))), batch: 4, length: 6, chosen: [0, 2], rejected: [1, 3] }),
};

async function gradients(where, dtype, loss, checkpointing) {
  const lm = await CausalLM.load(modelDir, { device: where, dtype });
  lm.setGradientCheckpointing(checkpointing);
  const head = ValueHead.create(lm, { seed: 3 });
  try {
    await LOSSES[loss](lm, head);
    return GRADIENT_PARAMS.map((name) => lm.native.getGradient(name));
  } finally {
    head.dispose();
    lm.dispose();
  }
}

for (const [dtype, tolerance] of [["float32", FP32_TOLERANCE], ["bfloat16", BF16_TOLERANCE]]) {
  await check(`gradients of every loss on ${device} ${dtype} vs CPU fp32, checkpointing off and on`, async () => {
    let worst = 0;
    const worstOf = [];
    for (const loss of Object.keys(LOSSES)) {
      const reference = await gradients("cpu", "float32", loss, false);
      for (const checkpointing of [false, true]) {
        const got = await gradients(device, dtype, loss, checkpointing);
        const error = Math.max(...got.map((g, i) => relativeError(g, reference[i])));
        // Bradley-Terry's gradient is that of s_chosen − s_rejected: two near-equal gradients of an untrained head
        // cancel, which bf16 cannot resolve (relative error ≈ 1 on the CPU too). Reported, judged in fp32 only.
        if (!(loss === "bradleyTerry" && dtype === "bfloat16")) worst = Math.max(worst, error);
        worstOf.push(`${loss}${checkpointing ? "+ckpt" : ""} ${error.toExponential(1)}`);
      }
    }
    return { ok: worst < tolerance, detail: `worst relative error ${worst.toExponential(2)} (tolerance ${tolerance}${dtype === "bfloat16" ? ", bradleyTerry not judged" : ""}): ${worstOf.join(", ")}`, worst };
  });
}

await check(`one AdamW step on ${device} vs CPU (fp32 parameter change)`, async () => {
  const deltas = [];
  for (const where of ["cpu", device]) {
    const lm = await CausalLM.load(modelDir, { device: where });
    const optimizer = new Optimizer(lm, { lr: 1e-3 });
    const before = lm.native.getParameter(GRADIENT_PARAMS[1]);
    await LOSSES.policyGradient(lm);
    await optimizer.step({ maxGradNorm: 1 });
    deltas.push(lm.native.getParameter(GRADIENT_PARAMS[1]).map((x, i) => x - before[i]));
    optimizer.dispose();
    lm.dispose();
  }
  const error = relativeError(deltas[1], deltas[0]);
  return { ok: error < 1e-3, detail: `relative error of the update ${error.toExponential(2)} (tolerance 1e-3: AdamW's first step is lr · sign-like, so tiny gradients amplify rounding)`, error };
});

// Dropout on the device, eager and SDPA (SDPA takes dropout_p and borrows the default generator with the dropout
// stream's state): the same stream state gives the same masks, eval mode none, and a checkpointed layer's recompute
// replays its forward's masks. The keep rate and the 1/(1 − p) scale have CPU tests (tests/native/dropout.test.ts).

const DROPOUT_PARAM = GRADIENT_PARAMS[1];
await check(`dropout on ${device}, eager and sdpa: seeded repeat, eval, checkpointing replay`, async () => {
  const config = { ...JSON.parse(readFileSync(path.join(modelDir, "config.json"), "utf8")), attention_dropout: 0.3 };
  const found = [];
  let ok = true;
  for (const attnImplementation of ["eager", "sdpa"]) {
    const lm = CausalLM.create(config, { device, seed: 4, attnImplementation }).train();
    const dropped = async (checkpointing) => {
      lm.setGradientCheckpointing(checkpointing);
      lm.setSeed(11, "dropout");
      lm.zeroGrad();
      await LOSSES.policyGradient(lm);
      return lm.native.getGradient(DROPOUT_PARAM);
    };
    const first = await dropped(false);
    const again = await dropped(false);
    const replayed = await dropped(true);
    lm.eval();
    const undropped = await dropped(false);
    lm.dispose();
    const repeat = maxAbsDiff(again, first);
    const replay = relativeError(replayed, first);
    const fromEval = relativeError(undropped, first);
    ok &&= repeat === 0 && replay < FP32_TOLERANCE && fromEval > 1e-3 && !hasNaN(first);
    found.push(`${attnImplementation}: repeat ${repeat}, checkpointed ${replay.toExponential(1)}, eval differs by ${fromEval.toExponential(1)}`);
  }
  return { ok, detail: found.join("; ") };
});

// The LM head scored in blocks of 2 rows against one block of every row, on the device: log-prob gradients alike.
await check(`LM head in blocks of rows on ${device} vs whole (policy-gradient gradients)`, async () => {
  const lm = await CausalLM.load(modelDir, { device });
  const grads = [];
  for (const rows of [1e6, 2]) {
    setLogitsBlockRows(rows);
    lm.zeroGrad();
    await LOSSES.policyGradient(lm);
    grads.push(GRADIENT_PARAMS.map((name) => lm.native.getGradient(name)));
  }
  setLogitsBlockRows(0);
  lm.dispose();
  const error = Math.max(...grads[1].map((g, i) => relativeError(g, grads[0][i])));
  return { ok: error < FP32_TOLERANCE, detail: `worst relative error ${error.toExponential(2)} (tolerance ${FP32_TOLERANCE})`, error };
});

// A step taken inside the backward against the step after it, on twins, LM head whole and in blocks: on CUDA the
// gradient accumulators' hooks that step each parameter run on autograd's device thread, on the stream it set.
// Parameters and norm alike to the bit; no gradient left after the backward but a blocked untied head's.
await check(`step in backward on ${device} vs the step after it (AdamW on twins, head whole and blocked)`, async () => {
  const found = [];
  let ok = true;
  for (const rows of [0, 2]) {
    setLogitsBlockRows(rows);
    const twins = [await CausalLM.load(modelDir, { device }), await CausalLM.load(modelDir, { device })];
    const [after, within] = twins.map((lm) => new Optimizer(lm, { lr: 1e-3 }));
    let worst = 0;
    let left = 0;
    let normsAlike = true;
    for (let step = 0; step < 3; step++) {
      await twins[0].zeroGrad();
      await LOSSES.policyGradient(twins[0]);
      const expected = await after.step();
      await twins[1].zeroGrad();
      await within.armStepInBackward();
      await LOSSES.policyGradient(twins[1]);
      left = Math.max(left, twins[1].native.parameterNames().filter(({ name }) => twins[1].native.getGradient(name) !== null).length);
      normsAlike &&= (await within.step()).gradNorm === expected.gradNorm;
      for (const { name } of twins[0].native.parameterNames()) worst = Math.max(worst, maxAbsDiff(twins[1].native.getParameter(name), twins[0].native.getParameter(name)));
    }
    [after, within, ...twins].forEach((o) => o.dispose());
    ok &&= worst === 0 && normsAlike && left <= 1;
    found.push(`${rows ? "blocked" : "whole"} head: largest parameter difference ${worst}, norms alike ${normsAlike}, gradients left ${left}`);
  }
  setLogitsBlockRows(0);
  return { ok, detail: found.join("; ") };
});

// ---------------------------------------------------------------------------------------------------------------
// Ragged batches: prompts of different lengths (left-padded generation, right-padded scoring) and shared prompts
// (one prefill for K samples), on the device against the CPU.

await check("ragged and shared-prompt batches vs CPU (greedy tokens, scores)", async () => {
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
});

// ---------------------------------------------------------------------------------------------------------------
// Decoding throughput: greedy and sampled (top-k 50, top-p 0.9, repetition penalty 1.05) at b1/b8/b32 with b1's
// ms/token, then a tiny MoE and GPT-2, each beside transformers' generate on the same device where it is installed
// (GPU only: the CPU fallback skips the comparison to stay small).

const NEW_TOKENS = gpu ? 64 : 8;
function hfTokensPerSecond(dir, batch, sampled) {
  const script = `
import sys, time, torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).to(sys.argv[2]).eval()
ids = torch.randint(3, min(60, model.config.vocab_size - 1), (int(sys.argv[3]), 16), device=sys.argv[2])
sampled = sys.argv[4] == "1"
def run():
    with torch.no_grad():
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=${NEW_TOKENS}, min_new_tokens=${NEW_TOKENS}, do_sample=sampled,
                       top_k=50 if sampled else None, top_p=0.9 if sampled else None, repetition_penalty=1.05 if sampled else None, pad_token_id=0)
    if sys.argv[2].startswith("cuda"): torch.cuda.synchronize()
run()
start = time.perf_counter(); run(); seconds = time.perf_counter() - start
print(int(sys.argv[3]) * ${NEW_TOKENS} / seconds)
`;
  const run = spawnSync(process.env.PYTHON ?? "python3", ["-c", script, dir, device, String(batch), sampled ? "1" : "0"], { encoding: "utf8", timeout: 120_000 });
  if (run.status !== 0) throw new Error((run.stderr ?? "").trim().split("\n").at(-1) ?? `exit ${run.status}`);
  return Number(run.stdout.trim().split("\n").at(-1));
}

async function decodeRow(dir, batch, sampled) {
  const lm = await CausalLM.fromDirectory(dir, { device });
  try {
    const rows16 = Array.from({ length: batch }, (_, i) => Array.from({ length: 16 }, (_, j) => 3 + ((i * 31 + j * 7) % 57)));
    const options = { maxNewTokens: NEW_TOKENS, doSample: sampled, eosTokenIds: [], padTokenId: 0, ...(sampled ? { topK: 50, topP: 0.9, repetitionPenalty: 1.05 } : { topK: 0 }) };
    await lm.generate(rows16, options);
    const started = performance.now();
    await lm.generate(rows16, options);
    const seconds = (performance.now() - started) / 1000;
    const ours = (batch * NEW_TOKENS) / seconds;
    const msPerToken = batch === 1 ? ` (${((1000 * seconds) / NEW_TOKENS).toFixed(2)} ms/token)` : "";
    if (!gpu) return { ok: true, detail: `${ours.toFixed(0)} tok/s${msPerToken}; transformers not compared on the CPU fallback`, ours };
    try {
      const peer = hfTokensPerSecond(dir, batch, sampled);
      return { ok: true, detail: `${ours.toFixed(0)} tok/s${msPerToken}, transformers ${peer.toFixed(0)} tok/s (${(ours / peer).toFixed(2)}×)`, ours, peer };
    } catch (error) {
      return { ok: true, detail: `${ours.toFixed(0)} tok/s${msPerToken}; transformers not run (${error.message})`, ours };
    }
  } finally {
    lm.dispose();
  }
}

for (const batch of [1, 8, 32]) {
  for (const sampled of [false, true]) {
    await check(`generate b${batch} ${sampled ? "sampled" : "greedy"} tokens/s`, () => decodeRow(modelDir, batch, sampled));
  }
}
for (const family of ["mixtral", "gpt2"]) {
  await check(`generate ${family} b8 sampled tokens/s`, () => decodeRow(path.join(root, "tests", "golden", family), 8, true));
}

// ---------------------------------------------------------------------------------------------------------------
// Load cost in a fresh process: create a random model (~1B-shaped on a GPU, small on the CPU fallback), save it, load
// it onto the device, clone it there. Peak RSS, wall time, the event loop's longest gap on a 10 ms timer, and the
// CPU cache left after the load.

await check("load cost: create → save → load → clone (fresh process)", async () => {
  const shape = gpu
    ? { vocabSize: 32000, hiddenSize: 2048, intermediateSize: 5632, numLayers: 16, numHeads: 16, numKvHeads: 8 }
    : { vocabSize: 4096, hiddenSize: 256, intermediateSize: 512, numLayers: 4, numHeads: 4, numKvHeads: 2 };
  const config = buildConfigJson("llama", { ...shape, ropeTheta: 1e4, rmsNormEps: 1e-6, tieWordEmbeddings: false }, { bosTokenId: 1, eosTokenId: 2 });
  const dir = path.join(scratch, "load-cost");
  const run = child(`
    const { CausalLM, runtimeInfo } = await import(DIST + "/index.js");
    const { statSync, readdirSync } = await import("node:fs");
    const made = CausalLM.create(${JSON.stringify(config)}, { seed: 1 });
    await made.save(${JSON.stringify(dir)});
    made.dispose();
    const bytes = readdirSync(${JSON.stringify(dir)}).filter((f) => f.endsWith(".safetensors")).reduce((s, f) => s + statSync(${JSON.stringify(dir)} + "/" + f).size, 0);
    const rssBefore = process.resourceUsage().maxRSS * 1024;
    let gap = 0, last = performance.now();
    const timer = setInterval(() => { const now = performance.now(); gap = Math.max(gap, now - last - 10); last = now; }, 10);
    const started = performance.now();
    const lm = await CausalLM.load(${JSON.stringify(dir)}, { device: ${JSON.stringify(device)} });
    const loadSeconds = (performance.now() - started) / 1000;
    const cloneStarted = performance.now();
    const copy = await lm.clone({ device: ${JSON.stringify(device)} });
    const cloneSeconds = (performance.now() - cloneStarted) / 1000;
    clearInterval(timer);
    const info = runtimeInfo();
    console.log(JSON.stringify({ bytes, rssBefore, maxRss: process.resourceUsage().maxRSS * 1024, loadSeconds, cloneSeconds, gap, cpuCacheBytes: info.cpuCacheBytes }));
    copy.dispose(); lm.dispose();
  `, { timeoutMs: 300_000 });
  if (run.status !== 0 || !run.result) return { ok: false, detail: `exit ${run.status ?? run.signal}: ${run.stderr.trim().split("\n").at(-1)}` };
  const r = run.result;
  const gib = (b) => (b / 2 ** 30).toFixed(2);
  // Peak RSS is the process's lifetime peak, creation and saving included: reported, not judged, here. The event
  // loop must stay free during the load (no gap over 100 ms).
  return {
    ok: r.gap < 100,
    detail: `${gib(r.bytes)} GiB of safetensors: load ${r.loadSeconds.toFixed(1)} s, clone ${r.cloneSeconds.toFixed(1)} s, peak RSS ${gib(r.maxRss)} GiB (${gib(r.rssBefore)} before the load), longest event-loop gap ${r.gap.toFixed(0)} ms, CPU cache ${gib(r.cpuCacheBytes)} GiB after`,
    ...r,
  };
});

// ---------------------------------------------------------------------------------------------------------------
// Device memory after each phase, and two lanes on one GPU ("cuda" and "cuda:0" modules side by side).

await check("device memory after load, generate, train step, dispose; a step's memoryWindow() peaks", async () => {
  const phases = [];
  const snapshot = (phase) => phases.push({ phase, ...Object.fromEntries(Object.entries(runtimeInfo()).filter(([key]) => key.startsWith("cuda") && key !== "cudaCompiled")) });
  const lm = await CausalLM.load(modelDir, { device });
  snapshot("load");
  await lm.generate(prompts, { maxNewTokens: 16, eosTokenIds: [] });
  snapshot("generate");
  const optimizer = new Optimizer(lm, { lr: 1e-4 });
  memoryWindow();
  await LOSSES.policyGradient(lm);
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
}, { gpuOnly: true });

await check("two lanes on one GPU: cuda and cuda:0 modules, klK3, clone, getParameter after a step", async () => {
  const policy = await CausalLM.load(modelDir, { device: "cuda" });
  const reference = await CausalLM.load(modelDir, { device: "cuda:0" });
  try {
    const copy = await policy.clone({ device: "cuda:0" });
    const kl = await policy.klK3(reference, prompts, completions);
    const optimizer = new Optimizer(policy, { lr: 1e-3 });
    await LOSSES.policyGradient(policy);
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
}, { gpuOnly: true });

// Seeded training twice in fresh processes (once with CUDA_LAUNCH_BLOCKING=1, once with deterministic algorithms):
// losses must agree to atomics noise, and exactly under COMLRL_DETERMINISTIC=1.
const REPEAT_SCRIPT = `
  const { CausalLM, Optimizer } = await import(DIST + "/index.js");
  const lm = await CausalLM.load(${JSON.stringify(modelDir)}, { device: ${JSON.stringify(device)} });
  const optimizer = new Optimizer(lm, { lr: 1e-3 });
  const losses = [];
  for (let i = 0; i < 5; i++) {
    const { loss } = await lm.policyGradientBackward(${JSON.stringify(prompts.slice(0, 4))}, ${JSON.stringify(completions.slice(0, 4))}, [1, -1, 0.5, -0.5]);
    await optimizer.step({ maxGradNorm: 1 });
    await lm.zeroGrad();
    losses.push(loss);
  }
  console.log(JSON.stringify(losses));
`;
await check("seeded training repeats (fresh processes; CUDA_LAUNCH_BLOCKING=1; COMLRL_DETERMINISTIC=1)", async () => {
  const runs = [{}, { CUDA_LAUNCH_BLOCKING: "1" }, { COMLRL_DETERMINISTIC: "1" }, { COMLRL_DETERMINISTIC: "1" }].map((env) => child(REPEAT_SCRIPT, { env }));
  const failed = runs.find((r) => r.status !== 0 || !r.result);
  if (failed) return { ok: false, detail: `a run failed: ${failed.stderr.trim().split("\n").at(-1)}` };
  const spread = Math.max(...runs[1].result.map((x, i) => Math.abs(x - runs[0].result[i]) / Math.max(Math.abs(runs[0].result[i]), 1e-12)));
  const exact = runs[2].result.every((x, i) => x === runs[3].result[i]);
  return { ok: spread < 1e-5 && exact, detail: `relative spread ${spread.toExponential(1)} between plain and CUDA_LAUNCH_BLOCKING runs; deterministic runs ${exact ? "identical" : "DIFFER"}`, spread };
});

// ---------------------------------------------------------------------------------------------------------------
// One demo epoch of each trainer family on the device, a non-finite loss an error rather than a skipped batch.

const demoDir = path.join(scratch, "demo-base");
const demoTokenizer = await createTinyModel(demoDir, { seed: 7, hiddenSize: 64, numLayers: 2 });
const formatters = coverVowelsFormatters((messages) => demoTokenizer.applyChatTemplate(messages, { addGenerationPrompt: true }));
const sampling = { numTurns: 1, numTrainEpochs: 1, maxNewTokens: 4, temperature: 1, topP: 1, topK: null, loggingSteps: 1, evalInterval: 0, seed: 1 };

await check(`MAGRPO demo epoch on ${device}`, async () => {
  const trainer = await MAGRPOTrainer.create({
    agents: [demoDir, demoDir], rewardFunc: coverVowelsRewardFunc, formatters, trainDataset: coverVowelsDataset(gpu ? 16 : 4),
    outputDir: path.join(scratch, "magrpo"), quiet: true, onNonFinite: "error",
    config: { ...sampling, numAgents: 2, numGenerations: gpu ? 8 : 2, agentLearningRate: 2e-3, rolloutBufferSize: 2, trainBatchSize: 2, agentDevices: [device] },
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
    trainDataset: coverVowelsDataset(gpu ? 8 : 2), outputDir: path.join(scratch, "maac"), quiet: true, onNonFinite: "error",
    config: acConfig({ agentDevices: [device], criticDevices: [device] }),
  });
  await trainer.train();
  await trainer.close();
  return { ok: trainer.progress.envStep > 0, detail: `${trainer.progress.envStep} env steps` };
});

await check("mp: two agents and a critic on two GPUs", async () => {
  const count = runtimeInfo().cudaDeviceCount;
  if (count < 2) return { skip: `needs 2 CUDA devices, this machine has ${count}` };
  const trainer = await MAACTrainer.create({
    agentModel: demoDir, criticModel: demoDir, numAgents: 2, rewardFunc: coverVowelsRewardFunc, formatters,
    trainDataset: coverVowelsDataset(4), outputDir: path.join(scratch, "mp"), quiet: true, onNonFinite: "error",
    config: acConfig({ parallelTraining: "mp", agentDevices: ["cuda:0", "cuda:1"], criticDevices: [`cuda:${2 % count}`] }),
  });
  await trainer.train();
  await trainer.close();
  return { ok: trainer.progress.envStep > 0, detail: `${trainer.progress.envStep} env steps` };
}, { gpuOnly: true });

await check("1-rank process group all-reduce (NCCL on GPU tensors)", async () => {
  const native = addon();
  if (gpu && !native.NativeProcessGroup.ncclAvailable()) return { ok: false, detail: "this build has no NCCL" };
  const group = await native.NativeProcessGroup.create({
    rank: 0, worldSize: 1, masterAddr: "127.0.0.1", masterPort: 29500 + (process.pid % 1000), timeoutMs: 60_000,
    ...(gpu ? { ncclDevice: Number(device.split(":")[1] ?? 0) } : {}),
  });
  const lm = await CausalLM.load(modelDir, { device, dtype: "float32" });
  const before = await lm.policyGradientBackward(prompts.slice(0, 2), completions.slice(0, 2), [1, -1]);
  const traffic = await group.allReduceGradients([lm.native], { weight: 2 });
  const values = await group.allReduce(new Float64Array([1, 2, 3]), "sum");
  group.dispose();
  lm.dispose();
  const ok = traffic.totalWeight === 2 && values.join(",") === "1,2,3" && Number.isFinite(before.loss);
  return { ok, detail: `${traffic.bytes} bytes of gradients in ${(traffic.seconds * 1000).toFixed(1)} ms, total weight ${traffic.totalWeight}` };
});

// ---------------------------------------------------------------------------------------------------------------
// Round trips on the device: optimizer state, weights, a head's state dict, the generator's state (same device
// exactly; a CPU state on a GPU refused by name).

await check(`round trips on ${device}: optimizer, weights, head, generator state`, async () => {
  const lm = await CausalLM.load(modelDir, { device });
  const head = ValueHead.create(lm, { seed: 3 });
  const optimizer = new Optimizer(lm, { lr: 1e-3 });
  try {
    await LOSSES.policyGradient(lm);
    await optimizer.step();
    const optimizerFile = path.join(scratch, "adamw.pt");
    await optimizer.save(optimizerFile);
    await optimizer.load(optimizerFile);
    const weightsDir = path.join(scratch, "saved");
    await lm.save(weightsDir);
    const before = lm.native.getParameter(GRADIENT_PARAMS[1]);
    await lm.loadWeights(weightsDir);
    const weightsSame = maxAbsDiff(lm.native.getParameter(GRADIENT_PARAMS[1]), before) === 0;
    const dict = head.stateDict();
    head.loadStateDict(dict);
    lm.setSeed(5);
    const state = lm.generatorState();
    const a = await lm.generate(prompts.slice(0, 2), { maxNewTokens: 8, doSample: true, eosTokenIds: [] });
    lm.setGeneratorState(state);
    const b = await lm.generate(prompts.slice(0, 2), { maxNewTokens: 8, doSample: true, eosTokenIds: [] });
    const samplesSame = a.tokens.join() === b.tokens.join();
    let crossDevice = "not tried on the CPU fallback";
    if (gpu) {
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
});

await check(`no leak over ${gpu ? 200 : 40} steps of generate, backward and AdamW`, async () => {
  const steps = gpu ? 200 : 40;
  const lm = await CausalLM.load(modelDir, { device, dtype: "float32" });
  const optimizer = new Optimizer(lm, { lr: 1e-4 });
  const rss = [];
  const allocated = [];
  const early = Math.floor(steps / 10);
  for (let step = 0; step < steps; step++) {
    await lm.zeroGrad();
    await lm.generate(prompts.slice(0, 2), { maxNewTokens: 4, doSample: true, eosTokenIds: [] });
    await lm.policyGradientBackward(prompts.slice(0, 4), completions.slice(0, 4), [1, -1, 0.5, -0.5]);
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
});

// ---------------------------------------------------------------------------------------------------------------
// Ceilings: matmul rates in fp32 (TF32 off, then on in a fresh process with COMLRL_TF32=1) and bf16; copy bandwidth.

await check("ceilings: matmul fp32 / fp32+TF32 / bf16, copy bandwidth", async () => {
  const n = gpu ? 8192 : 256;
  const native = addon();
  const fp32 = await native.measureMatmul({ n, dtype: "float32", device, iterations: 3 });
  const bf16 = await native.measureMatmul({ n, dtype: "bfloat16", device, iterations: 3 });
  const tf32Run = child(`
    const { addon } = await import(DIST + "/native/loader.js");
    const native = addon();
    const r = await native.measureMatmul({ n: ${n}, dtype: "float32", device: ${JSON.stringify(device)}, iterations: 3 });
    console.log(JSON.stringify({ ...r, numerics: native.numerics() }));
  `, { env: { COMLRL_TF32: "1" } });
  const copy = await native.measureCopy({ bytes: gpu ? 2 ** 30 : 2 ** 24, device, iterations: 3 });
  if (tf32Run.status !== 0) return { ok: false, detail: `the TF32 run failed: ${tf32Run.stderr.trim().split("\n").at(-1)}` };
  const tf32 = tf32Run.result;
  return {
    ok: tf32.numerics.tf32 === gpu,
    detail: `n=${n}: fp32 ${fp32.gflops.toFixed(0)} GFLOP/s, TF32 ${tf32.gflops.toFixed(0)} (applied: ${tf32.numerics.tf32}), bf16 ${bf16.gflops.toFixed(0)}; copy ${copy.gbps.toFixed(1)} GB/s`,
    fp32: fp32.gflops, tf32: tf32.gflops, bf16: bf16.gflops, copyGbps: copy.gbps,
  };
});

// ---------------------------------------------------------------------------------------------------------------
// Negative cases, last and in fresh processes (a device-side assert would poison the CUDA context for good): a pad
// id past the vocabulary must be a readable error and leave the device usable; float16 training must be refused.

await check("negative: padTokenId past the vocabulary is an error, the device still usable", async () => {
  const run = child(`
    const { CausalLM } = await import(DIST + "/index.js");
    const lm = await CausalLM.load(${JSON.stringify(modelDir)}, { device: ${JSON.stringify(device)} });
    let message = null;
    try {
      await lm.generate([[5, 6], [7]], { maxNewTokens: 2, eosTokenIds: [], padTokenId: lm.config.vocabSize + 5 });
    } catch (error) { message = error.message.split("\\n")[0]; }
    const after = await lm.score([[5, 6]], [[7, 8]]);
    console.log(JSON.stringify({ message, finite: Number.isFinite(after.sum[0]) }));
  `);
  if (run.status !== 0 || !run.result) return { ok: false, detail: `exit ${run.status ?? run.signal}: ${run.stderr.trim().split("\n").at(-1)}` };
  return { ok: run.result.message !== null && run.result.finite, detail: `${run.result.message ?? "NO ERROR"}; scoring after it ${run.result.finite ? "works" : "FAILS"}` };
});

await check("negative: float16 training refused by name", async () => {
  const run = child(`
    const { CausalLM, Optimizer } = await import(DIST + "/index.js");
    const lm = await CausalLM.load(${JSON.stringify(modelDir)}, { device: ${JSON.stringify(device)}, dtype: "float16" });
    let message = null;
    try { new Optimizer(lm, { lr: 1e-3 }); } catch (error) { message = error.message; }
    console.log(JSON.stringify({ message }));
  `);
  if (run.status !== 0 || !run.result) return { ok: false, detail: `exit ${run.status ?? run.signal}: ${run.stderr.trim().split("\n").at(-1)}` };
  return { ok: /float16/.test(run.result.message ?? ""), detail: run.result.message ?? "float16 training was NOT refused" };
});

const width = Math.max(...rows.map((r) => r.name.length));
console.log(`\n${"check".padEnd(width)}  result  seconds  detail`);
for (const r of rows) console.log(`${r.name.padEnd(width)}  ${r.status.padEnd(6)}  ${r.seconds.toFixed(1).padStart(7)}  ${r.detail}`);
save();
console.log(`gpu-check: wrote ${outFile}`);
process.exit(rows.some((r) => r.status === "FAIL") ? 1 : 0);
