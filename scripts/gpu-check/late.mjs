// The long rows, last in the run so that a slow machine loses them first: transformers on the same device (one
// Python process for every decode row and the 0.5B row), data-parallel training under comlrl launch, the load cost of
// a 1B-shaped model, and seeded training repeated in fresh processes.
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { runtimeInfo } from "../../dist/index.js";
import { buildConfigJson } from "../../dist/models/config.js";
import { root } from "./harness.mjs";

// transformers' side of the decode rows (fp32 fixtures, 16-token prompts) and of the 0.5B row (bf16, SDPA): tokens/s
// of generate, and the time of one policy-gradient backward over the completion's log-probs.
const TRANSFORMERS = `
import json, sys, time, torch
from transformers import AutoConfig, AutoModelForCausalLM
spec = json.loads(sys.argv[1])
device = spec["device"]
def timed(run):
    run()
    if device.startswith("cuda"): torch.cuda.synchronize()
    start = time.perf_counter(); run()
    if device.startswith("cuda"): torch.cuda.synchronize()
    return time.perf_counter() - start
def generate(model, ids, new, sampled):
    with torch.no_grad():
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new, do_sample=sampled,
                       top_k=50 if sampled else None, top_p=0.9 if sampled else None, repetition_penalty=1.05 if sampled else None, pad_token_id=0)
out = {"decodes": [], "halfB": None}
models = {}
for d in spec["decodes"]:
    if d["dir"] not in models:
        models[d["dir"]] = AutoModelForCausalLM.from_pretrained(d["dir"], dtype=torch.float32).to(device).eval()
    model = models[d["dir"]]
    ids = torch.randint(3, min(60, model.config.vocab_size - 1), (d["batch"], 16), device=device)
    out["decodes"].append(d["batch"] * d["newTokens"] / timed(lambda: generate(model, ids, d["newTokens"], d["sampled"])))
models.clear()
h = spec["halfB"]
if h:
    config = AutoConfig.from_pretrained(h["dir"])
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa").to(device)
    vocab = config.vocab_size
    prompts = torch.randint(3, vocab, (h["batch"], h["prompt"]), device=device)
    decode = timed(lambda: generate(model.eval(), prompts, h["newTokens"], False))
    ids = torch.cat([prompts, prompts[:, : h["completion"]].flip(1)], dim=1)
    advantages = torch.tensor([-1.0 if i % 2 else 1.0 for i in range(h["batch"])], device=device)
    model.train()
    def backward():
        model.zero_grad(set_to_none=True)
        logits = model(input_ids=ids, logits_to_keep=h["completion"] + 1).logits[:, :-1].float()
        logprobs = torch.log_softmax(logits, -1).gather(-1, ids[:, -h["completion"]:, None]).squeeze(-1)
        (-(advantages * logprobs.sum(-1)).mean()).backward()
    out["halfB"] = {"decodeTokensPerSecond": h["batch"] * h["newTokens"] / decode, "backwardSeconds": timed(backward)}
print(json.dumps(out))
`;

export async function lateRows(h, fx, scratch, { decodes, halfB }) {
  const { device } = h;

  await h.check("transformers on the same device: the decode rows and the 0.5B row", async () => {
    if (!h.gpu) return { skip: "transformers is compared on a GPU only (the CPU fallback stays small and CI installs no Python packages)" };
    const { batch, prompt, newTokens, completion } = halfB.setting;
    const halfBSpec = halfB.decodeTokensPerSecond ? { dir: halfB.dir, batch, prompt, newTokens, completion } : null;
    let peer;
    try {
      peer = h.python(TRANSFORMERS, [JSON.stringify({ device, decodes, halfB: halfBSpec })]);
    } catch (error) {
      return { skip: `transformers did not run: ${error.message}` };
    }
    const parts = decodes.map((d, i) => `${path.basename(d.dir)} b${d.batch}${d.sampled ? " sampled" : ""} ${(d.ours / peer.decodes[i]).toFixed(2)}×`);
    if (peer.halfB) {
      parts.push(`0.5B decode ${halfB.decodeTokensPerSecond.toFixed(0)} vs ${peer.halfB.decodeTokensPerSecond.toFixed(0)} tok/s (${(halfB.decodeTokensPerSecond / peer.halfB.decodeTokensPerSecond).toFixed(2)}×)`);
      parts.push(`0.5B scoring backward ${halfB.backwardSeconds.toFixed(2)} vs ${peer.halfB.backwardSeconds.toFixed(2)} s (${(peer.halfB.backwardSeconds / halfB.backwardSeconds).toFixed(2)}× as fast)`);
    }
    return { ok: true, detail: `ours / transformers: ${parts.join("; ")}`, peer };
  }, { estimate: { gpu: 60, cpu: 0 } });

  // Data-parallel on one machine: two ranks under comlrl launch with automatic placement. Each rank must land on its
  // own device (cuda:LOCAL_RANK where it exists) and both end with the same weights.
  await h.check("DDP: 2 ranks under comlrl launch (60 s collective timeout)", async () => {
    const out = path.join(scratch, "ddp");
    const run = spawnSync(process.execPath, [path.join(root, "dist", "cli", "main.js"), "launch", "--nproc", "2", path.join(root, "scripts", "gpu-check-ddp.mjs"), out], {
      encoding: "utf8", timeout: h.rowMsLeft(), env: { ...process.env, COMLRL_DIST_TIMEOUT: "60", COMLRL_NUM_THREADS: "1" },
    });
    if (run.status !== 0) return { ok: false, detail: `exit ${run.status ?? run.signal}: ${(run.stderr ?? "").trim().split("\n").slice(-2).join(" | ")}` };
    const ranks = JSON.parse(readFileSync(path.join(out, "ranks.json"), "utf8"));
    const same = ranks.every((r) => r.fingerprint === ranks[0].fingerprint);
    const own = ranks.every((r) => !h.gpu || r.localRank >= r.cudaDeviceCount || r.devices.every((d) => d === `cuda:${r.localRank}`));
    return { ok: same && own, detail: ranks.map((r) => `rank ${r.rank} on ${[...new Set(r.devices)].join(",")} ${r.fingerprint}`).join("; "), ranks };
  }, { estimate: { gpu: 40, cpu: 40 } });

  await deadPeerRow(h, fx);
  await loadCostRow(h, scratch);

  // Seeded training twice in fresh processes (once with CUDA_LAUNCH_BLOCKING=1, once with deterministic algorithms):
  // losses must agree to atomics noise, and exactly under COMLRL_DETERMINISTIC=1.
  const repeatScript = `
    const { CausalLM, Optimizer } = await import(DIST + "/index.js");
    const lm = await CausalLM.load(${JSON.stringify(fx.modelDir)}, { device: ${JSON.stringify(device)} });
    const optimizer = new Optimizer(lm, { lr: 1e-3 });
    const losses = [];
    for (let i = 0; i < 5; i++) {
      const { loss } = await lm.policyGradientBackward(${JSON.stringify(fx.prompts.slice(0, 4))}, ${JSON.stringify(fx.completions.slice(0, 4))}, [1, -1, 0.5, -0.5]);
      await optimizer.step({ maxGradNorm: 1 });
      await lm.zeroGrad();
      losses.push(loss);
    }
    console.log(JSON.stringify(losses));
  `;
  await h.check("seeded training repeats (fresh processes; CUDA_LAUNCH_BLOCKING=1; COMLRL_DETERMINISTIC=1)", async () => {
    const runs = [{}, { CUDA_LAUNCH_BLOCKING: "1" }, { COMLRL_DETERMINISTIC: "1" }, { COMLRL_DETERMINISTIC: "1" }].map((env) => h.child(repeatScript, { env }));
    const failure = runs.map((run) => h.childFailure(run)).find(Boolean);
    if (failure) return { ok: false, detail: `a run failed: ${failure}` };
    const spread = Math.max(...runs[1].result.map((x, i) => Math.abs(x - runs[0].result[i]) / Math.max(Math.abs(runs[0].result[i]), 1e-12)));
    const exact = runs[2].result.every((x, i) => x === runs[3].result[i]);
    return { ok: spread < 1e-5 && exact, detail: `relative spread ${spread.toExponential(1)} between plain and CUDA_LAUNCH_BLOCKING runs; deterministic runs ${exact ? "identical" : "DIFFER"}`, spread };
  }, { estimate: { gpu: 30, cpu: 40 } });
}

// Load cost in a fresh process: create a random model (~1B-shaped on a GPU, small on the CPU fallback), save it, load
// it onto the device, clone it there. Peak RSS, wall time, the event loop's longest gap on a 10 ms timer, and the
// CPU cache left after the load.
async function loadCostRow(h, scratch) {
  const { device } = h;
  await h.check("load cost: create → save → load → clone (fresh process)", async () => {
    const shape = h.gpu
      ? { vocabSize: 32000, hiddenSize: 2048, intermediateSize: 5632, numLayers: 16, numHeads: 16, numKvHeads: 8 }
      : { vocabSize: 4096, hiddenSize: 256, intermediateSize: 512, numLayers: 4, numHeads: 4, numKvHeads: 2 };
    const config = buildConfigJson("llama", { ...shape, ropeTheta: 1e4, rmsNormEps: 1e-6, tieWordEmbeddings: false }, { bosTokenId: 1, eosTokenId: 2 });
    const dir = path.join(scratch, "load-cost");
    const run = h.child(`
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
    `);
    const failure = h.childFailure(run);
    if (failure) return { ok: false, detail: failure };
    const r = run.result;
    const gib = (b) => (b / 2 ** 30).toFixed(2);
    // Peak RSS is the process's lifetime peak, creation and saving included: reported, not judged, here. The event
    // loop must stay free during the load (no gap over 100 ms).
    return {
      ok: r.gap < 100,
      detail: `${gib(r.bytes)} GiB of safetensors: load ${r.loadSeconds.toFixed(1)} s, clone ${r.cloneSeconds.toFixed(1)} s, peak RSS ${gib(r.maxRss)} GiB (${gib(r.rssBefore)} before the load), longest event-loop gap ${r.gap.toFixed(0)} ms, CPU cache ${gib(r.cpuCacheBytes)} GiB after`,
      ...r,
    };
  }, { estimate: { gpu: 30, cpu: 10 } });
}

// G22: a rank whose peer dies between two gradient reductions gets an error within the job's timeout and lives on
// (no NCCL watchdog ending the process). Two ranks on two GPUs, started by hand (comlrl launch would kill the
// survivor when the other exits).
async function deadPeerRow(h, fx) {
  await h.check("a dead peer: the surviving rank's gradient all-reduce fails within the 20 s timeout, the process lives", async () => {
    const count = runtimeInfo().cudaDeviceCount;
    if (count < 2) return { skip: `needs 2 CUDA devices (NCCL refuses two ranks on one GPU), this machine has ${count}` };
    const rankScript = (rank) => `
      const DIST = ${JSON.stringify(path.join(root, "dist"))};
      const { CausalLM, DistributedContext, runtimeInfo } = await import(DIST + "/index.js");
      const dist = await DistributedContext.fromEnvironment();
      const lm = await CausalLM.load(${JSON.stringify(fx.modelDir)}, { device: "cuda:" + dist.localRank });
      const step = () => lm.policyGradientBackward(${JSON.stringify(fx.prompts.slice(0, 2))}, ${JSON.stringify(fx.completions.slice(0, 2))}, [1, -1]);
      await step();
      await dist.allReduceGradients([lm.native], 2);
      if (${rank} === 1) process.exit(0);
      await step();
      const started = performance.now();
      let message = null;
      try { await dist.allReduceGradients([lm.native], 2); } catch (error) { message = error.message.split("\\n")[0]; }
      console.log(JSON.stringify({ message, seconds: (performance.now() - started) / 1000, alive: runtimeInfo().cudaAvailable }));
    `;
    const port = String(29600 + (process.pid % 300));
    const ranks = [0, 1].map((rank) => new Promise((resolve) => {
      const child = spawn(process.execPath, ["--input-type=module", "-e", rankScript(rank)], {
        env: { ...process.env, RANK: String(rank), LOCAL_RANK: String(rank), WORLD_SIZE: "2", MASTER_ADDR: "127.0.0.1", MASTER_PORT: port, COMLRL_DIST_TIMEOUT: "20" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (data) => (stdout += data));
      child.stderr.on("data", (data) => (stderr += data));
      const timer = setTimeout(() => child.kill("SIGKILL"), h.rowMsLeft());
      child.on("close", (status, signal) => {
        clearTimeout(timer);
        resolve({ status, signal, stdout, stderr });
      });
    }));
    const [survivor] = await Promise.all(ranks);
    if (survivor.status !== 0) return { ok: false, detail: `rank 0 exit ${survivor.status ?? survivor.signal}: ${survivor.stderr.trim().split("\n").at(-1)}` };
    const result = JSON.parse(survivor.stdout.trim().split("\n").at(-1));
    return {
      ok: result.message !== null && result.seconds < 60 && result.alive,
      detail: `${result.message ?? "NO ERROR"} after ${result.seconds.toFixed(1)} s; rank 0 ${result.alive ? "still runs CUDA" : "lost CUDA"}`,
    };
  }, { gpuOnly: true, estimate: { gpu: 45, cpu: 0 } });
}
