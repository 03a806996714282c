// The model core beyond golden parity: exact completion scoring against a hand computation, generation semantics
// (EOS stop, padding, shared prefill, seeded sampling), gradients, optimizers, sharing, saving and bad input.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CausalLM } from "../../src/models/causal-lm.js";
import { buildConfigJson } from "../../src/models/config.js";
import { createTinyModel } from "../../src/models/tiny-model.js";
import type { ComlrlTokenizer } from "../../src/models/tokenizer.js";
import type { HeldGraph } from "../../src/native/binding.js";
import { addon } from "../../src/native/loader.js";
import { memoryWindow, releaseFreedCpuMemory } from "../../src/runtime.js";
import { maxAbsDiff } from "../support/safetensors.js";
import { batchOf, tinyLM } from "./tiny-lm.js";

const scratch = mkdtempSync(path.join(tmpdir(), "comlrl-model-"));
const dir = path.join(scratch, "tiny");
let tokenizer: ComlrlTokenizer;
let model: CausalLM;

beforeAll(async () => {
  tokenizer = await createTinyModel(dir, { seed: 3, numLayers: 2, hiddenSize: 64 });
  model = await CausalLM.fromDirectory(dir);
});
afterAll(() => model?.dispose());

function logSoftmax(row: ArrayLike<number>): number[] {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) max = Math.max(max, row[i]);
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i] - max);
  return Array.from(row, (x) => x - max - Math.log(sum));
}

/** Σ log p(completion token) from a plain unpadded forward of prompt ⧺ completion, computed here in float64. */
async function handScore(prompt: number[], completion: number[]): Promise<number> {
  const ids = [...prompt, ...completion];
  const { logits } = await model.native.forward({ ids: Int32Array.from(ids), batch: 1, length: ids.length });
  const vocab = model.config.vocabSize;
  let sum = 0;
  completion.forEach((token, i) => {
    const position = prompt.length - 1 + i;
    sum += logSoftmax(logits!.subarray(position * vocab, (position + 1) * vocab))[token];
  });
  return sum;
}

describe("completion scoring", () => {
  it("scores exactly the completion tokens when prompt lengths, EOS and padding differ per row", async () => {
    const eos = tokenizer.eosTokenIds[0];
    const prompts = [tokenizer.encode("The red fox"), tokenizer.encode("Once upon a time there was a cat"), tokenizer.encode("Hi")];
    const completions = [[...tokenizer.encode(" ran away"), eos], tokenizer.encode(" who sang"), [eos]];
    const scores = await model.score(prompts, completions, { entropy: true, tokenLogprobs: true });
    for (let r = 0; r < prompts.length; r++) {
      const expected = await handScore(prompts[r], completions[r]);
      expect(Math.abs(scores.sum[r] - expected), `row ${r}`).toBeLessThan(1e-4);
      expect(Math.abs(scores.mean[r] - expected / completions[r].length)).toBeLessThan(1e-5);
    }
    expect(scores.tokenLogprobs!.length).toBe(completions.flat().length);
    for (const h of scores.entropy!) expect(h).toBeGreaterThan(0);
    // The batch shares one padded forward pass; each row alone gives the same numbers.
    const alone = await model.score([prompts[1]], [completions[1]]);
    expect(Math.abs(alone.sum[0] - scores.sum[1])).toBeLessThan(1e-4);
  });

  it("rows sharing a prompt (run once, keys/values shared) score and backpropagate like rows scored alone", async () => {
    const shared = tokenizer.encode("Once upon a time there was");
    const other = tokenizer.encode("A cat");
    const prompts = [shared, other, shared, shared];
    const completions = [tokenizer.encode(" a king"), tokenizer.encode(" sat"), [tokenizer.eosTokenIds[0]], tokenizer.encode(" a dog who ran")];
    const batched = await model.score(prompts, completions, { entropy: true });
    for (let r = 0; r < prompts.length; r++) {
      const alone = await model.score([prompts[r]], [completions[r]], { entropy: true });
      expect(Math.abs(batched.sum[r] - alone.sum[0]), `row ${r}`).toBeLessThan(1e-4);
      expect(Math.abs(batched.entropy![r] - alone.entropy![0]), `row ${r}`).toBeLessThan(1e-4);
    }
    const probe = "model.layers.0.self_attn.k_proj.weight";
    const advantages = [0.5, -1, 2, -0.25];
    await model.zeroGrad();
    await model.policyGradientBackward(prompts, completions, advantages);
    const together = model.native.getGradient(probe)!;
    await model.zeroGrad();
    for (let r = 0; r < prompts.length; r++) await model.policyGradientBackward([prompts[r]], [completions[r]], [advantages[r]]);
    const separately = model.native.getGradient(probe)!;
    expect(maxAbsDiff(together, separately)).toBeLessThan(1e-5);
    await model.zeroGrad();
  });

  it("k3 KL is zero against an identical copy and positive against a different model", async () => {
    const copy = await model.clone();
    const other = await createTinyModel(path.join(scratch, "other"), { seed: 99 }).then(() => CausalLM.fromDirectory(path.join(scratch, "other")));
    const prompts = [tokenizer.encode("a b c"), tokenizer.encode("d e")];
    const completions = [tokenizer.encode(" x y"), tokenizer.encode(" z")];
    const same = await model.klK3(copy, prompts, completions);
    const different = await model.klK3(other, prompts, completions);
    expect(Array.from(same)).toEqual([0, 0]);
    for (const kl of different) expect(kl).toBeGreaterThan(0);
    // k3 = Σ exp(d) − d − 1 with d = lp_ref − lp_pol, by hand from per-token log-probs.
    const pol = await model.score(prompts, completions, { tokenLogprobs: true });
    const ref = await other.score(prompts, completions, { tokenLogprobs: true });
    const d = Array.from(ref.tokenLogprobs!, (lr, i) => lr - pol.tokenLogprobs![i]);
    const k3 = d.map((x) => Math.exp(x) - x - 1);
    const firstRow = k3.slice(0, completions[0].length).reduce((a, b) => a + b, 0);
    expect(Math.abs(different[0] - firstRow)).toBeLessThan(1e-5);
    copy.dispose();
    other.dispose();
  });
});

describe("policy-gradient backward", () => {
  const prompt = [5, 17, 42, 99];
  const completion = [7, 8, 9, 10, 11];
  const grad = (m: CausalLM, name: string) => m.native.getGradient(name)!;

  it("equals the cross-entropy gradient for A = 1 and scale 1/len, and is linear in A·scale", async () => {
    const probe = "model.layers.1.mlp.down_proj.weight";
    await model.zeroGrad();
    const ids = Int32Array.from([...prompt, ...completion]);
    // Cross-entropy over the full sequence counts prompt targets too: score the same targets with a 1-token prompt.
    await addon().causalLMLossBackward(model.native, { ids, batch: 1, length: ids.length });
    const ce = grad(model, probe);
    await model.zeroGrad();
    const pg = await model.policyGradientBackward([prompt.slice(0, 1)], [[...prompt.slice(1), ...completion]], [1], 1 / (ids.length - 1));
    expect(maxAbsDiff(grad(model, probe), ce)).toBeLessThan(1e-6);
    expect(Math.abs(pg.loss + pg.sum[0] / (ids.length - 1))).toBeLessThan(1e-5);

    await model.zeroGrad();
    await model.policyGradientBackward([prompt], [completion], [1], 1);
    const unit = grad(model, probe);
    await model.zeroGrad();
    await model.policyGradientBackward([prompt, prompt], [completion, completion], [-0.5, 2], 0.5);
    const combined = grad(model, probe);
    expect(maxAbsDiff(combined, Array.from(unit, (g) => g * 0.75))).toBeLessThan(1e-6);
    await model.zeroGrad();
  });

  it("a scoring pass kept for its backward gives score()'s sums and policyGradientBackward's gradient, once", async () => {
    const probe = "model.layers.1.mlp.down_proj.weight";
    const prompts = [prompt, prompt, prompt.slice(1)];
    const completions = [completion, completion.slice(2), completion.slice(1)];
    const advantages = [0.5, -1, 2];
    await model.zeroGrad();
    await model.policyGradientBackward(prompts, completions, advantages, 0.5);
    const twoPasses = Float32Array.from(grad(model, probe));
    await model.zeroGrad();
    const held = await model.scoreForBackward(prompts, completions, true);
    // score() runs the inference kernels, which agree with the autograd path to rounding.
    expect(maxAbsDiff(held.sum, (await model.score(prompts, completions)).sum)).toBeLessThan(1e-5);
    await held.policyGradientBackward(advantages, 0.5);
    expect(maxAbsDiff(grad(model, probe), twoPasses)).toBeLessThan(1e-6);
    await expect(held.policyGradientBackward(advantages)).rejects.toThrow(/used by a backward, or released, already/);
    const graph = (await addon().scoreForBackward(model.native, batchOf(prompts, completions), { keep: true })).graph!;
    const other = tinyLM(3);
    expect(() => addon().heldPolicyGradientBackward(other.native, graph, { advantages: Float32Array.from(advantages) })).toThrow(/scored by another model/);
    other.dispose();
    await model.zeroGrad();
  });

  it("release frees a kept graph whose backward will not run, then and there; its backward is then refused", async () => {
    const shape = { vocabSize: 256, hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2, ropeTheta: 1e4, rmsNormEps: 1e-6, tieWordEmbeddings: false };
    const wide = CausalLM.create(buildConfigJson("qwen2", shape, { bosTokenId: null, eosTokenId: 255 }), { seed: 5, initStd: 0.05 });
    // A graph of ≈ 300 MiB, so that the bar (a quarter of it) stands far above what the process's resident memory
    // drifts by on its own between two readings (the JS heap, malloc's arenas: up to ±25 MiB measured).
    const prompts = Array.from({ length: 64 }, (_, r) => [1 + r, 2, 3]);
    const completions = prompts.map((_, r) => Array.from({ length: 128 }, (_, t) => 4 + ((r * 13 + t * 7) % 250)));
    // A first pass, released, so that what one pass leaves for good (the lane's thread, OpenBLAS's per-thread GEMM
    // buffers, malloc's arena for that thread) is in the baseline: only the graph is measured.
    await (await wide.scoreForBackward(prompts, completions, true)).release();
    releaseFreedCpuMemory();
    const before = memoryWindow().residentBytes;
    const held = await wide.scoreForBackward(prompts, completions, true);
    const holding = memoryWindow().residentBytes;
    await held.release();
    releaseFreedCpuMemory();
    const released = memoryWindow().residentBytes;
    console.log(`a kept scoring graph: ${((holding - before) / 2 ** 20).toFixed(0)} MiB held, ${((released - before) / 2 ** 20).toFixed(0)} MiB left after release`);
    expect(holding - before).toBeGreaterThan(200 * 2 ** 20);
    expect(released - before).toBeLessThan(0.25 * (holding - before));
    await expect(held.policyGradientBackward(prompts.map(() => 1))).rejects.toThrow(/used by a backward, or released, already/);
    await held.release();
    wide.dispose();
  });

  it("a scoring pass not kept holds no graph, and gives the kept pass's sums and gradient to the bit", async () => {
    const probe = "model.layers.1.mlp.down_proj.weight";
    const prompts = [prompt, prompt.slice(2)];
    const completions = [completion, completion.slice(1)];
    const advantages = [-0.25, 1.5];
    await model.zeroGrad();
    const kept = await model.scoreForBackward(prompts, completions, true);
    await kept.policyGradientBackward(advantages, 0.5);
    const keptGrad = Float32Array.from(grad(model, probe));
    await model.zeroGrad();
    const unkept = await model.scoreForBackward(prompts, completions, false);
    await unkept.policyGradientBackward(advantages, 0.5);
    expect(Array.from(unkept.sum)).toEqual(Array.from(kept.sum));
    expect(Array.from(grad(model, probe))).toEqual(Array.from(keptGrad));
    expect((await addon().scoreForBackward(model.native, batchOf(prompts, completions), { keep: false })).graph).toBeUndefined();
    await model.zeroGrad();
  });

  it("a backward refuses as its graph anything scoreForBackward did not return", () => {
    for (const wrong of [{}, model.native, 7]) {
      expect(() => addon().heldPolicyGradientBackward(model.native, wrong as unknown as HeldGraph, { advantages: Float32Array.from([1]) })).toThrow(
        /graph must be what scoreForBackward returned/,
      );
    }
  });

  it("zeroGrad waits on the model's lane, not on the JS thread: issued during a backward, it returns at once and drops the backward's gradients", async () => {
    const probe = "model.layers.1.mlp.down_proj.weight";
    const rows = 48;
    const completions = Array.from({ length: rows }, (_, r) => Array.from({ length: 64 }, (_, t) => 3 + ((r * 31 + t * 7) % 90)));
    const started = performance.now();
    const backward = model.policyGradientBackward(Array(rows).fill(prompt), completions, Array.from({ length: rows }, (_, r) => (r % 2 ? 1 : -1)));
    const issued = performance.now();
    const cleared = model.zeroGrad();
    const issuing = performance.now() - issued;
    await backward;
    const backwardMs = performance.now() - started;
    await cleared;
    // Queued behind the backward, it ran after it; a zeroGrad that took the model's lock on the JS thread would have
    // held this thread for the rest of the backward.
    expect(model.native.getGradient(probe)).toBeNull();
    expect(issuing).toBeLessThan(backwardMs / 4);
  });

  // On a CPU without bf16 instructions the bf16 model's matmuls run widened to fp32; its gradients must still reach
  // the bf16 weights and agree with an fp32 model holding the same (bf16-exact) weights, to bf16 precision.
  it("a bf16 model's loss and gradients match its fp32 twin's to bf16 precision", async () => {
    const bf16 = await model.clone({ dtype: "bfloat16" });
    const twin = await bf16.clone({ dtype: "float32" });
    const norm = (v: ArrayLike<number>) => Math.sqrt(Array.from(v).reduce((s, x) => s + x * x, 0));
    try {
      const step = async (m: CausalLM) => {
        await m.zeroGrad();
        return m.policyGradientBackward([prompt, prompt.slice(1)], [completion, completion.slice(2)], [1, -0.5]);
      };
      const [low, full] = [await step(bf16), await step(twin)];
      expect(Math.abs(low.loss - full.loss)).toBeLessThan(0.02 * Math.abs(full.loss) + 0.01);
      for (const probe of ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.down_proj.weight"]) {
        const [g, reference] = [grad(bf16, probe), grad(twin, probe)];
        expect(norm(reference), probe).toBeGreaterThan(0);
        expect(norm(Array.from(g, (x, i) => x - reference[i])) / norm(reference), probe).toBeLessThan(0.05);
      }
    } finally {
      bf16.dispose();
      twin.dispose();
    }
  });

  it("gradient checkpointing gives the same gradients", async () => {
    const probe = "model.layers.0.self_attn.q_proj.weight";
    await model.zeroGrad();
    await model.policyGradientBackward([prompt], [completion], [1.5], 1);
    const plain = grad(model, probe);
    await model.zeroGrad();
    model.setGradientCheckpointing(true);
    await model.policyGradientBackward([prompt], [completion], [1.5], 1);
    model.setGradientCheckpointing(false);
    expect(maxAbsDiff(grad(model, probe), plain)).toBeLessThan(1e-6);
    await model.zeroGrad();
  });

  it("rejects advantages of the wrong count and token ids outside the vocabulary", async () => {
    await expect(model.policyGradientBackward([prompt], [completion], [1, 2])).rejects.toThrow(/advantages has 2 values for 1 completions/);
    await expect(model.score([prompt], [[100000]])).rejects.toThrow(/token id 100000, outside the vocabulary/);
  });
});

describe("generation", () => {
  const prompt = () => tokenizer.encode("Once upon a time");

  it("shares one prefill across samples: greedy samples equal the single greedy run", async () => {
    const one = await model.generate([prompt()], { maxNewTokens: 12, eosTokenIds: [] });
    const three = await model.generate([prompt()], { maxNewTokens: 12, eosTokenIds: [], numReturnSequences: 3 });
    for (const c of three.completions) expect(Array.from(c)).toEqual(Array.from(one.completions[0]));
  });

  it("stops each row at its own EOS and pads after it", async () => {
    const free = await model.generate([prompt()], { maxNewTokens: 6, eosTokenIds: [] });
    const stopAt = free.completions[0][2];
    const stopped = await model.generate([prompt(), tokenizer.encode("zzz")], { maxNewTokens: 6, eosTokenIds: [stopAt], padTokenId: 0 });
    const first = Array.from(stopped.completions[0]);
    expect(first[first.length - 1]).toBe(stopAt);
    expect(first.length).toBeLessThanOrEqual(3);
    const row = Array.from(stopped.tokens.subarray(0, stopped.width));
    expect(row.slice(first.length).every((t) => t === 0)).toBe(true);
  });

  it("sampling is reproducible for a seed and for a restored generator state", async () => {
    const settings = { maxNewTokens: 10, doSample: true, temperature: 1.0, topP: 0.9, topK: 50, numReturnSequences: 4, eosTokenIds: [] };
    model.native.setSeed(1234);
    const a = await model.generate([prompt()], settings);
    model.native.setSeed(1234);
    const state = model.native.getGeneratorState();
    const b = await model.generate([prompt()], settings);
    const c = await model.generate([prompt()], settings);
    model.native.setGeneratorState(state);
    const d = await model.generate([prompt()], settings);
    expect(b.tokens).toEqual(a.tokens);
    expect(d.tokens).toEqual(a.tokens);
    expect(c.tokens).not.toEqual(a.tokens);
    const distinct = new Set(a.completions.map((x) => x.join(",")));
    expect(distinct.size).toBeGreaterThan(1);
  });

  it("returns each chosen token's log-prob, equal to scoring the completion", async () => {
    const g = await model.generate([prompt()], { maxNewTokens: 8, doSample: true, numReturnSequences: 2, returnLogprobs: true, eosTokenIds: [] });
    const scores = await model.score([prompt(), prompt()], g.completions);
    g.logprobs!.forEach((lp, r) => expect(Math.abs(lp.reduce((x, y) => x + y, 0) - scores.sum[r])).toBeLessThan(1e-4));
  });

  // Decoding projects 1–16 rows (bf16: 1–64) through the addon's small-batch kernel; scoring whole sequences goes
  // through BLAS GEMM. Odd sizes (hidden 36, MLP 70, vocab 514) reach the kernel's tails: K not a multiple of 8, N of 4.
  // Inference (no autograd) also runs RMSNorm and RoPE fused; training runs them as tensor ops.
  it.each([
    ["float32", 1e-4],
    ["bfloat16", 0.15],
  ] as const)("inference kernels agree with GEMM scoring and with the autograd path (%s)", async (dtype, tolerance) => {
    const shape = { vocabSize: 514, hiddenSize: 36, intermediateSize: 70, numLayers: 2, numHeads: 2, numKvHeads: 1, ropeTheta: 1e4, rmsNormEps: 1e-6, tieWordEmbeddings: false };
    const odd = CausalLM.create(buildConfigJson("qwen2", shape, { bosTokenId: null, eosTokenId: 513 }), { dtype, seed: 5, initStd: 0.2 });
    try {
      for (const rows of [1, 3, 12, 16, 40]) {
        const prompts = Array.from({ length: rows }, (_, r) => Int32Array.from({ length: 12 }, (_, i) => (r * 37 + i * 11) % 500));
        const g = await odd.generate(prompts, { maxNewTokens: 6, returnLogprobs: true, eosTokenIds: [] });
        const scored = await odd.score(prompts, g.completions);
        const worst = Math.max(...g.logprobs!.map((lp, r) => Math.abs(lp.reduce((x, y) => x + y, 0) - scored.sum[r])));
        expect(worst, `${rows} rows`).toBeLessThan(tolerance);
        // Without autograd, RMSNorm and RoPE run as fused kernels too; with it, as tensor ops.
        const withGrad = await odd.policyGradientBackward(prompts, g.completions, new Array(rows).fill(0));
        const worstFused = Math.max(...Array.from(scored.sum, (sum, r) => Math.abs(sum - withGrad.sum[r])));
        expect(worstFused, `${rows} rows, fused vs tensor ops`).toBeLessThan(tolerance);
      }
    } finally {
      odd.dispose();
    }
  });

  it("top-k 1 equals greedy decoding", async () => {
    const greedy = await model.generate([prompt()], { maxNewTokens: 8, eosTokenIds: [] });
    const topk = await model.generate([prompt()], { maxNewTokens: 8, doSample: true, topK: 1, eosTokenIds: [] });
    expect(topk.tokens).toEqual(greedy.tokens);
  });
});

describe("optimizer, sharing, cloning", () => {
  it("AdamW state saved and restored continues exactly like an uninterrupted run", async () => {
    const prompt = [3, 4, 5];
    const completion = [6, 7, 8];
    const run = async (m: CausalLM, interrupt: boolean) => {
      const Optimizer = addon().NativeOptimizer;
      let optimizer = new Optimizer(m.native, { lr: 1e-2 });
      for (let step = 0; step < 4; step++) {
        if (interrupt && step === 2) {
          const file = path.join(scratch, "adamw.pt");
          await optimizer.save(file);
          optimizer.dispose();
          optimizer = new Optimizer(m.native, { lr: 1e-2 });
          await optimizer.load(file);
        }
        await m.zeroGrad();
        await m.policyGradientBackward([prompt], [completion], [1]);
        await optimizer.step();
      }
      optimizer.dispose();
      return m.native.getParameter("model.norm.weight");
    };
    const a = await model.clone();
    const b = await model.clone();
    expect(Array.from(await run(a, true))).toEqual(Array.from(await run(b, false)));
    a.dispose();
    b.dispose();
  });

  it("two optimizers on one shared model keep separate state and both move the shared weights; reset() makes one new", async () => {
    const shared = await model.clone();
    const Optimizer = addon().NativeOptimizer;
    const lr = 1e-2;
    const first = new Optimizer(shared.native, { lr, weightDecay: 0 });
    const second = new Optimizer(shared.native, { lr, weightDecay: 0 });
    const name = "model.norm.weight";
    // AdamW's first step from fresh moments is exactly p − lr·g/(|g| + eps); a step that found the other optimizer's
    // moments (step count 2, m and v of two opposite gradients) lands elsewhere.
    const firstStepOf = async (optimizer: InstanceType<typeof Optimizer>, advantage: number) => {
      await shared.zeroGrad();
      await shared.policyGradientBackward([[1, 2]], [[3, 4]], [advantage]);
      const before = shared.native.getParameter(name);
      const grad = shared.native.getGradient(name)!;
      await optimizer.step();
      const after = shared.native.getParameter(name);
      expect(after).not.toEqual(before);
      return Math.max(...Array.from(after, (p, i) => Math.abs(p - (before[i] - (lr * grad[i]) / (Math.abs(grad[i]) + 1e-8)))));
    };
    expect(await firstStepOf(first, 1)).toBeLessThan(1e-6);
    expect(await firstStepOf(second, -1)).toBeLessThan(1e-6);
    // reset() forgets the moments and the step count: the next step is a first step again.
    await first.reset();
    expect(await firstStepOf(first, -1)).toBeLessThan(1e-6);
    first.dispose();
    second.dispose();
    shared.dispose();
  });

  it("a clone is independent and a frozen model refuses an optimizer", async () => {
    const frozen = (await model.clone()).freeze();
    expect(frozen.info().frozen).toBe(true);
    expect(() => new (addon().NativeOptimizer)(frozen.native, { lr: 1 })).toThrow(/no trainable parameters/);
    expect(model.info().frozen).toBe(false);
    expect(model.info().parameterCount).toBe(frozen.info().parameterCount);
    frozen.dispose();
    expect(() => frozen.info()).toThrow(/disposed/);
  });
});

describe("saving and loading", () => {
  it("writes sharded checkpoints with an index above the shard limit and reloads them bit-identically", async () => {
    const out = path.join(scratch, "sharded");
    await model.save(out, { maxShardBytes: 100_000 });
    const index = JSON.parse(readFileSync(path.join(out, "model.safetensors.index.json"), "utf8"));
    const shards = new Set(Object.values(index.weight_map));
    expect(shards.size).toBeGreaterThan(1);
    expect(index.metadata.total_size).toBe(model.info().parameterBytes);
    const reloaded = await CausalLM.fromDirectory(out);
    const args = { ids: Int32Array.from([1, 2, 3, 4]), batch: 1, length: 4 };
    const [a, b] = await Promise.all([model.native.forward(args), reloaded.native.forward(args)]);
    expect(Buffer.from(a.logits!.buffer).equals(Buffer.from(b.logits!.buffer))).toBe(true);
    reloaded.dispose();
  });

  it("every supported architecture round-trips through save and load: same config, bit-identical weights and logits", async () => {
    for (const modelType of ["qwen2", "qwen3", "llama", "mistral", "gemma2", "gemma3_text", "phi3", "olmo2", "smollm3"] as const) {
      const out = path.join(scratch, `arch-${modelType}`);
      await createTinyModel(out, { modelType, tieWordEmbeddings: modelType !== "llama", seed: 5 });
      const m = await CausalLM.fromDirectory(out);
      const g = await m.generate([[1, 2, 3]], { maxNewTokens: 4, eosTokenIds: [] });
      expect(g.completions[0].length).toBe(4);
      const saved = path.join(scratch, `arch-${modelType}-saved`);
      await m.save(saved);
      const reloaded = await CausalLM.fromDirectory(saved);
      expect(reloaded.config.raw, modelType).toEqual({ ...m.config.raw, dtype: "float32" });
      for (const { name } of m.native.parameterNames()) {
        expect(Buffer.from(reloaded.native.getParameter(name).buffer).equals(Buffer.from(m.native.getParameter(name).buffer)), `${modelType} ${name}`).toBe(true);
      }
      const args = { ids: Int32Array.from([1, 2, 3, ...g.completions[0]]), batch: 1, length: 7 };
      const [a, b] = await Promise.all([m.native.forward(args), reloaded.native.forward(args)]);
      expect(Buffer.from(a.logits!.buffer).equals(Buffer.from(b.logits!.buffer)), modelType).toBe(true);
      reloaded.dispose();
      m.dispose();
    }
  });

  function brokenCopy(name: string, mutate: (modelFile: string, configFile: string) => void): string {
    const out = path.join(scratch, name);
    mkdirSync(out, { recursive: true });
    for (const f of ["config.json", "model.safetensors"]) copyFileSync(path.join(dir, f), path.join(out, f));
    mutate(path.join(out, "model.safetensors"), path.join(out, "config.json"));
    return out;
  }

  it("names the file and tensor at fault for broken checkpoints", async () => {
    const size = readFileSync(path.join(dir, "model.safetensors")).length;
    const truncated = brokenCopy("truncated", (f) => truncateSync(f, size - 100));
    await expect(CausalLM.fromDirectory(truncated)).rejects.toThrow(/model\.safetensors: truncated: tensor "[^"]+" ends at byte/);

    const lying = brokenCopy("lying", (f) => {
      const bytes = readFileSync(f);
      const n = Number(bytes.readBigUInt64LE(0));
      const header = bytes.subarray(8, 8 + n).toString().replace(/"data_offsets":\[0,(\d+)\]/, (_, end) => `"data_offsets":[0,${Number(end) - 4}]`);
      writeFileSync(f, Buffer.concat([bytes.subarray(0, 8), Buffer.from(header), bytes.subarray(8 + n)]));
    });
    await expect(CausalLM.fromDirectory(lying)).rejects.toThrow(/do not match its shape and dtype/);

    const headerTooLong = brokenCopy("header-length", (f) => {
      const bytes = readFileSync(f);
      bytes.writeBigUInt64LE(BigInt(bytes.length), 0);
      writeFileSync(f, bytes);
    });
    await expect(CausalLM.fromDirectory(headerTooLong)).rejects.toThrow(/header claims/);

    const wrongShape = brokenCopy("wrong-shape", (_, config) => {
      const c = JSON.parse(readFileSync(config, "utf8"));
      c.intermediate_size = 100;
      writeFileSync(config, JSON.stringify(c));
    });
    await expect(CausalLM.fromDirectory(wrongShape)).rejects.toThrow(/tensor "model\.layers\.0\.mlp\.\w+_proj\.weight" in .* has shape/);

    const missing = brokenCopy("missing-tensor", (_, config) => {
      const c = JSON.parse(readFileSync(config, "utf8"));
      c.tie_word_embeddings = false;
      writeFileSync(config, JSON.stringify(c));
    });
    await expect(CausalLM.fromDirectory(missing)).rejects.toThrow(/tensor "lm_head\.weight" is missing/);

    const extra = brokenCopy("extra-layer", (_, config) => {
      const c = JSON.parse(readFileSync(config, "utf8"));
      c.num_hidden_layers = 1;
      writeFileSync(config, JSON.stringify(c));
    });
    await expect(CausalLM.fromDirectory(extra)).rejects.toThrow(/holds tensor "model\.layers\.1\.[^"]+", which this architecture does not have/);
  });

  it("names the file and field for bad config.json", async () => {
    const malformed = brokenCopy("malformed-config", (_, config) => writeFileSync(config, "{ not json"));
    await expect(CausalLM.fromDirectory(malformed)).rejects.toThrow(/config\.json: malformed JSON/);
    const unsupported = brokenCopy("neox-config", (_, config) => writeFileSync(config, JSON.stringify({ model_type: "gpt_neox" })));
    await expect(CausalLM.fromDirectory(unsupported)).rejects.toThrow(/config\.json: model_type "gpt_neox" is not supported/);
    const noHidden = brokenCopy("no-hidden", (_, config) => {
      const c = JSON.parse(readFileSync(config, "utf8"));
      delete c.hidden_size;
      writeFileSync(config, JSON.stringify(c));
    });
    await expect(CausalLM.fromDirectory(noHidden)).rejects.toThrow(/config\.json: hidden_size is missing/);
    await expect(CausalLM.fromDirectory(path.join(scratch, "nowhere"))).rejects.toThrow(/no such model directory/);
  });

  it("refuses positions past GPT-2's table and from where dynamic / longrope RoPE would rescale, naming why", async () => {
    const gpt2 = await CausalLM.fromDirectory(path.join(__dirname, "..", "golden", "gpt2"));
    const positions = (from: number) => Int32Array.from({ length: 4 }, (_, i) => from + i);
    const args = { ids: Int32Array.from([3, 4, 5, 6]), batch: 1, length: 4 };
    await expect(gpt2.native.forward({ ...args, positionIds: positions(28) })).resolves.toBeDefined();
    await expect(gpt2.native.forward({ ...args, positionIds: positions(29) })).rejects.toThrow(/position 32 is past the model's limit of 32 positions: n_positions/);
    await expect(gpt2.generate([[3, 4, 5, 6]], { maxNewTokens: 40, eosTokenIds: [] })).rejects.toThrow(/limit of 32 positions/);
    gpt2.dispose();
    const shape = { vocabSize: 64, hiddenSize: 32, intermediateSize: 64, numLayers: 1, numHeads: 2, ropeTheta: 1e4, rmsNormEps: 1e-6, tieWordEmbeddings: true };
    const dynamic = CausalLM.create(
      buildConfigJson("llama", shape, { bosTokenId: null, eosTokenId: 63 }, { max_position_embeddings: 8, rope_parameters: { rope_type: "dynamic", rope_theta: 1e4, factor: 2 } }),
    );
    await expect(dynamic.native.forward({ ids: Int32Array.from({ length: 8 }, (_, i) => i), batch: 1, length: 8 })).resolves.toBeDefined();
    await expect(dynamic.native.forward({ ids: Int32Array.from({ length: 9 }, (_, i) => i), batch: 1, length: 9 })).rejects.toThrow(/rope_parameters\.rope_type "dynamic"/);
    dynamic.dispose();
  });

  it("refuses a device that does not exist", async () => {
    if (addon().runtimeInfo().cudaAvailable) return;
    await expect(CausalLM.fromDirectory(dir, { device: "cuda:0" })).rejects.toThrow(/CUDA is not available/);
    await expect(CausalLM.fromDirectory(dir, { device: "tpu" })).rejects.toThrow(/unknown device "tpu"/);
  });
});
