// Parity with transformers (llm.c style): every model in transformers446/ (transformers 4.46) and every family in
// tests/golden/<family> (transformers 5.x, made by scripts/golden/make_family_goldens.py) is loaded by our core and
// checked against the reference logits, hidden states, log-probs, loss, every gradient, one AdamW step, greedy
// generation and the bytes of a saved checkpoint. Tolerances are stated beside each check, the same for every family.
import { copyFileSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CausalLM } from "../../src/models/causal-lm.js";
import { addon } from "../../src/native/loader.js";
import { runtimeInfo } from "../../src/runtime.js";
import { maxAbsDiff, norm, readSafetensors, type FixtureTensor } from "../support/safetensors.js";

// The transformers 4.46 reference files are committed beside this file (transformers446/README.md says how they were made).
const GOLDEN = path.resolve(__dirname, "transformers446");
const SHARED = ["qwen2_tiny_untied", "qwen2_tiny_tied", "llama_tiny_untied", "llama_tiny_tied"];
// Committed beside this file; a transformers-5 file for each family the decoder runs.
const FAMILIES = ["qwen2_t5_theta1e6", "llama3", "mistral", "qwen2_sliding", "gemma2", "gemma3_text", "phi3", "olmo2", "smollm3", "qwen3_moe", "mixtral", "gpt2", "gpt2_gelu"];
// attn_implementation "sdpa": libtorch's scaled_dot_product_attention (libtorch ≥ 2.5; ours on older ones) on the
// families whose attention differs most — grouped-query heads, sliding windows, q/k norms, experts — and Gemma 2,
// whose soft-capped scores keep ours. Every check below runs for them too.
const SDPA_FAMILIES = ["llama3", "qwen2_sliding", "gemma2", "gemma3_text", "qwen3_moe"];
const MODELS: [string, string, string | undefined][] = [
  ...SHARED.map((name): [string, string, undefined] => [name, path.join(GOLDEN, name), undefined]),
  ...FAMILIES.map((name): [string, string, undefined] => [name, path.join(__dirname, name), undefined]),
  ...SDPA_FAMILIES.map((name): [string, string, string] => [`${name}+sdpa`, path.join(__dirname, name), "sdpa"]),
];
const [major, minor] = runtimeInfo().torchVersion.split(".").map(Number);
const SDPA_AVAILABLE = major > 2 || (major === 2 && minor >= 5);
// fp32 vs fp64 logits differ by ≈ 5e-6 (golden.json); 1e-4 leaves room for summation order, not for bugs.
const LOGIT_TOL = 1e-4;

/** Every parameter's gradient against transformers': within 1e-4 of that gradient's norm, and its norm too. */
function expectGradients(model: CausalLM, expected: (param: string) => ArrayLike<number>, norms: Record<string, number>) {
  const names = model.native.parameterNames().map((p) => p.name);
  expect(names.sort()).toEqual(Object.keys(norms).sort());
  for (const param of names) {
    const grad = model.native.getGradient(param)!;
    const scale = Math.max(norm(expected(param)), 1e-6);
    expect(maxAbsDiff(grad, expected(param)) / scale, param).toBeLessThan(1e-4);
    expect(Math.abs(norm(grad) - norms[param]) / scale, param).toBeLessThan(1e-4);
  }
}

/** A [batch, length] fixture of token ids (and its mask) as a TokenBatch. */
function tokenBatch(ids: FixtureTensor, mask?: FixtureTensor) {
  return {
    ids: Int32Array.from(ids.data),
    batch: ids.shape[0],
    length: ids.shape[1],
    attentionMask: mask ? Int32Array.from(mask.data) : undefined,
  };
}

function rows(t: FixtureTensor): number[][] {
  const [b, l] = t.shape;
  return Array.from({ length: b }, (_, i) => Array.from(t.data.subarray(i * l, (i + 1) * l)));
}

describe.each(MODELS)("golden parity: %s", (name, dir, attnImplementation) => {
  let model: CausalLM;
  let ref: Map<string, FixtureTensor>;
  let meta: Record<string, any>;
  const t = (key: string) => {
    const tensor = ref.get(key);
    if (!tensor) throw new Error(`golden tensor ${key} missing`);
    return tensor;
  };

  beforeAll(async () => {
    ref = readSafetensors(path.join(dir, "golden.safetensors"));
    meta = JSON.parse(readFileSync(path.join(dir, "golden.json"), "utf8"));
    model = await CausalLM.fromDirectory(dir, { attnImplementation });
  });
  afterAll(() => model?.dispose());

  it("attention runs in the kernel asked for: libtorch's SDPA where it can, ours on a CPU by default", () => {
    const sdpa = attnImplementation === "sdpa" && SDPA_AVAILABLE && model.config.attnSoftcap === 0;
    expect(model.info().attention).toBe(sdpa ? "sdpa" : "eager");
    // A grouped-query model decodes through the grouped matmuls even under SDPA: no K/V expanded per step (the
    // greedy-generation test below holds its step logits to transformers').
    const grouped = model.config.numKvHeads < model.config.numHeads;
    if (sdpa) expect(model.info().attentionKernels.decode === "grouped").toBe(grouped);
  });

  async function forward(ids: string, mask?: string, positions?: string, hiddenStates = false) {
    const input = t(ids);
    const [batch, length] = input.shape;
    return model.native.forward({
      ids: Int32Array.from(input.data),
      batch,
      length,
      attentionMask: mask ? Int32Array.from(t(mask).data) : undefined,
      positionIds: positions ? Int32Array.from(t(positions).data) : undefined,
      hiddenStates,
    });
  }

  it("logits: full, right-padded, left-padded (generation positions and default positions)", async () => {
    const vocab = model.config.vocabSize;
    const full = await forward("input.full_ids");
    expect(maxAbsDiff(full.logits!, t("logits.full").data)).toBeLessThan(LOGIT_TOL);
    for (const [kind, positions, key] of [
      ["right", undefined, "logits.right"],
      ["left", "input.left_position_ids", "logits.left"],
      ["left", undefined, "logits.left_default_pos"],
    ] as const) {
      const mask = t(`input.${kind}_mask`).data;
      const out = await forward(`input.${kind}_ids`, `input.${kind}_mask`, positions);
      const real = (i: number) => mask[Math.floor(i / vocab)] === 1;
      expect(maxAbsDiff(out.logits!, t(key).data, real), key).toBeLessThan(LOGIT_TOL);
    }
  });

  it("hidden states: embeddings, after each layer, after the final norm", async () => {
    const out = await forward("input.full_ids", undefined, undefined, true);
    const expected = [...ref.keys()].filter((k) => k.startsWith("hidden.full.")).sort();
    expect(out.hiddenStates!.length).toBe(expected.length);
    expected.forEach((key, i) => expect(maxAbsDiff(out.hiddenStates![i], t(key).data), key).toBeLessThan(LOGIT_TOL));
  });

  it("completion log-probs and their sums (full and right-padded rows)", async () => {
    for (const kind of ["full", "right"] as const) {
      const ids = rows(t(kind === "full" ? "input.full_ids" : "input.right_ids"));
      const lengths = kind === "full" ? ids.map((r) => r.length) : rows(t("input.right_mask")).map((m) => m.reduce((a, b) => a + b, 0));
      // Score each row as prompt = its first token, completion = the rest: every lp[b, t] of the reference.
      const prompts = ids.map((r) => r.slice(0, 1));
      const completions = ids.map((r, i) => r.slice(1, lengths[i]));
      const scores = await model.score(prompts, completions, { tokenLogprobs: true });
      const expected = rows(t(`logprobs.${kind}`)).flatMap((r, i) => r.slice(0, lengths[i] - 1));
      expect(maxAbsDiff(scores.tokenLogprobs!, expected)).toBeLessThan(LOGIT_TOL);
      expect(maxAbsDiff(scores.sum, meta[`logprob_sum_${kind}`])).toBeLessThan(1e-3);
    }
  });

  it("rows sharing prompts of different lengths score as each row alone (a sliding window reaches as far)", async () => {
    // Rows 0 and 1 share a prompt, which a longer one pads when the shared prompt forward runs them together.
    const prompts = [[5, 6], [5, 6], [9, 10, 11, 12]];
    const completions = [[13, 14, 15, 16, 17, 18, 19], [20, 21], [22, 23, 24]];
    const together = await model.score(prompts, completions, { tokenLogprobs: true });
    let offset = 0;
    for (let r = 0; r < prompts.length; r++) {
      const alone = await model.score([prompts[r]], [completions[r]], { tokenLogprobs: true });
      const rowLogprobs = together.tokenLogprobs!.subarray(offset, offset + completions[r].length);
      expect(maxAbsDiff(rowLogprobs, alone.tokenLogprobs!), `row ${r}`).toBeLessThan(LOGIT_TOL);
      offset += completions[r].length;
    }
  });

  for (const kind of ["full", "right"] as const) {
    it(`training loss and every parameter gradient (${kind}); gradient error < 1e-4 × the gradient's norm`, async () => {
      await model.zeroGrad();
      const { loss, routerAuxLoss } = await model.causalLMLossBackward(tokenBatch(t(`input.${kind}_ids`), kind === "right" ? t("input.right_mask") : undefined));
      expect(Math.abs(loss - meta[`loss_${kind}`])).toBeLessThan(1e-5);
      expect(routerAuxLoss).toBeUndefined(); // output_router_logits is false in these files
      expectGradients(model, (param) => t(`grad.${kind}.${param}`).data, meta[`grad_norm_${kind}`]);
      await model.zeroGrad();
    });
  }

  it("one AdamW step gives transformers' updated weights and loss", async () => {
    const copy = await model.clone();
    const initial = readSafetensors(path.join(dir, "model.safetensors"));
    try {
      const input = t("input.full_ids");
      const batchArgs = { ids: Int32Array.from(input.data), batch: input.shape[0], length: input.shape[1] };
      await copy.causalLMLossBackward(batchArgs);
      const { lr, betas, eps, weight_decay } = meta.adamw;
      const names = copy.native.parameterNames().map((p) => p.name);
      const grads = new Map(names.map((n) => [n, copy.native.getGradient(n)!]));
      const optimizer = new (addon().NativeOptimizer)(copy.native, { lr, betas, eps, weightDecay: weight_decay });
      await optimizer.step();
      for (const param of names) {
        const after = copy.native.getParameter(param);
        const before = (initial.get(param) ?? initial.get("model.embed_tokens.weight")!).data;
        const grad = grads.get(param)!;
        const expected = t(`adamw_step1.${param}`).data;
        // Adam's first step is p·(1 − lr·wd) − lr·g/(|g| + eps): exact from our own gradient...
        const closedForm = Array.from(before, (p0, i) => p0 * (1 - lr * weight_decay) - (lr * grad[i]) / (Math.abs(grad[i]) + eps));
        expect(maxAbsDiff(after, closedForm), param).toBeLessThan(1e-6);
        // ...and transformers' result wherever |g| is far above eps: near g = 0 the step is ±lr·sign(g), so a
        // gradient that agrees to 1e-4 of its norm may still flip tiny components.
        const wellConditioned = (i: number) => Math.abs(grad[i]) > 1e-5;
        expect(maxAbsDiff(after, expected, wellConditioned), param).toBeLessThan(1e-5);
      }
      const after = await copy.causalLMLossBackward(batchArgs, { backward: false });
      expect(Math.abs(after.loss - meta.loss_full_after_adamw_step1)).toBeLessThan(1e-3);
      optimizer.dispose();
    } finally {
      copy.dispose();
    }
  });

  it("greedy generation: single prompts and a left-padded batch give the same tokens; step logits match", async () => {
    const settings = { maxNewTokens: t("gen.prompt0.new_tokens").shape[0], eosTokenIds: [] as number[], padTokenId: 0, returnScores: true };
    const vocab = model.config.vocabSize;
    for (const p of ["prompt0", "prompt1"]) {
      const out = await model.generate([Array.from(t(`gen.${p}`).data)], settings);
      expect(Array.from(out.completions[0])).toEqual(Array.from(t(`gen.${p}.new_tokens`).data));
      expect(maxAbsDiff(out.scores!, t(`gen.${p}.scores`).data)).toBeLessThan(LOGIT_TOL);
    }
    const batch = await model.generate([Array.from(t("gen.prompt0").data), Array.from(t("gen.prompt1").data)], settings);
    expect(batch.completions.map((c) => Array.from(c))).toEqual(rows(t("gen.batch_left.new_tokens")));
    expect(maxAbsDiff(batch.scores!, t("gen.batch_left.scores").data)).toBeLessThan(LOGIT_TOL);
    expect(batch.scores!.length).toBe(2 * t("gen.prompt0.new_tokens").shape[0] * vocab);
  });

  it("saves in f32 byte-identical to transformers' model.safetensors, and reloads bit-identically", async () => {
    const out = path.join(mkdtempSync(path.join(tmpdir(), "comlrl-golden-")), name);
    await model.save(out, { dtype: "float32" });
    expect(readFileSync(path.join(out, "model.safetensors")).equals(readFileSync(path.join(dir, "model.safetensors")))).toBe(true);
    const reloaded = await CausalLM.fromDirectory(out);
    try {
      const input = t("input.full_ids");
      const args = { ids: Int32Array.from(input.data), batch: input.shape[0], length: input.shape[1] };
      const [a, b] = await Promise.all([model.native.forward(args), reloaded.native.forward(args)]);
      expect(Buffer.from(a.logits!.buffer).equals(Buffer.from(b.logits!.buffer))).toBe(true);
    } finally {
      reloaded.dispose();
    }
  });
});

// The hub's own gpt2 checkpoint is stored unlike a transformers 5 save: float16, without the "transformer." prefix,
// with causal-mask buffers, torch_dtype in config.json. The tiny model saved that way (make_family_goldens.py) must
// load into float32 and compute what transformers computes after loading it in float32.
describe("golden parity: gpt2 as the hub stores it", () => {
  const dir = path.join(__dirname, "gpt2_hub");

  it("loads the float16, prefix-less checkpoint into float32: logits and loss as transformers", async () => {
    const ref = readSafetensors(path.join(dir, "golden.safetensors"));
    const meta = JSON.parse(readFileSync(path.join(dir, "golden.json"), "utf8"));
    const model = await CausalLM.fromDirectory(dir);
    try {
      expect(model.config.dtype).toBe("float16");
      expect(model.native.info().dtype).toBe("float32");
      const input = ref.get("input.full_ids")!;
      const args = { ids: Int32Array.from(input.data), batch: input.shape[0], length: input.shape[1] };
      const out = await model.native.forward(args);
      expect(maxAbsDiff(out.logits!, ref.get("logits.full")!.data)).toBeLessThan(LOGIT_TOL);
      const { loss } = await model.causalLMLossBackward(args);
      expect(Math.abs(loss - meta.loss_full)).toBeLessThan(1e-5);
    } finally {
      model.dispose();
    }
  });
});

// longrope below original_max_position_embeddings: phi3's weights with short factors, partial rotary and the
// attention factor, against transformers' logits (make_family_goldens.py writes config and logits only).
describe("golden parity: phi3 with longrope scaling", () => {
  it("logits as transformers below original_max_position_embeddings (16); a position from there on is refused", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "comlrl-longrope-"));
    copyFileSync(path.join(__dirname, "phi3", "model.safetensors"), path.join(dir, "model.safetensors"));
    copyFileSync(path.join(__dirname, "phi3_longrope", "config.json"), path.join(dir, "config.json"));
    const ref = readSafetensors(path.join(__dirname, "phi3_longrope", "golden.safetensors"));
    const model = await CausalLM.fromDirectory(dir);
    try {
      const input = ref.get("input.full_ids")!;
      const args = { ids: Int32Array.from(input.data), batch: input.shape[0], length: input.shape[1] };
      const out = await model.native.forward(args);
      expect(maxAbsDiff(out.logits!, ref.get("logits.full")!.data)).toBeLessThan(LOGIT_TOL);
      const late = { ...args, positionIds: Int32Array.from(input.data, (_, i) => 5 + (i % input.shape[1])) };
      await expect(model.native.forward(late)).rejects.toThrow(/position 16 is past the model's limit of 16 positions: rope_parameters\.rope_type "longrope"/);
    } finally {
      model.dispose();
    }
  });
});

// output_router_logits: transformers' loss of a forward given labels adds router_aux_loss_coef × load_balancing_loss_func
// (softmax over each sparse layer's router logits, top-k counts per expert × mean probability per expert, over the real
// tokens, × num_experts). The base family's weights under the variant's config.json (make_family_goldens.py's
// ROUTER_AUX, coefficient 0.5): loss, aux loss and every gradient of the total, with and without gradient
// checkpointing. The policy losses add the term only when LoadOptions.routerAuxLossCoef asks (CoMLRL never does), over
// the padded batch of prompt ⧺ completion rows, a shared prompt counted once per row: that is checked against our own
// causal-LM path on that padded batch, which the goldens pin.
describe.each([
  ["qwen3_moe_aux", "qwen3_moe"],
  ["mixtral_aux", "mixtral"],
])("golden parity: router auxiliary loss, %s", (name, base) => {
  let dir: string;
  let ref: Map<string, FixtureTensor>;
  let meta: Record<string, any>;
  let model: CausalLM;
  const t = (key: string) => ref.get(key) ?? (() => { throw new Error(`golden tensor ${key} missing`); })();

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), `comlrl-${name}-`));
    copyFileSync(path.join(__dirname, base, "model.safetensors"), path.join(dir, "model.safetensors"));
    copyFileSync(path.join(__dirname, name, "config.json"), path.join(dir, "config.json"));
    ref = readSafetensors(path.join(__dirname, name, "golden.safetensors"));
    meta = JSON.parse(readFileSync(path.join(__dirname, name, "golden.json"), "utf8"));
    model = await CausalLM.fromDirectory(dir);
  });
  afterAll(() => model?.dispose());

  for (const kind of ["full", "right"] as const) {
    for (const checkpointing of [false, true]) {
      it(`loss, aux loss and every gradient of LM + coef × aux (${kind}${checkpointing ? ", gradient checkpointing" : ""})`, async () => {
        model.setGradientCheckpointing(checkpointing);
        await model.zeroGrad();
        try {
          const out = await model.causalLMLossBackward(tokenBatch(t(`input.${kind}_ids`), kind === "right" ? t("input.right_mask") : undefined));
          expect(Math.abs(out.routerAuxLoss! - meta[`aux_loss_${kind}`])).toBeLessThan(1e-6);
          expect(Math.abs(out.loss - meta[`loss_${kind}`])).toBeLessThan(1e-5);
          expectGradients(model, (param) => t(`grad.${kind}.${param}`).data, meta[`grad_norm_${kind}`]);
        } finally {
          model.setGradientCheckpointing(false);
          await model.zeroGrad();
        }
      });
    }
  }

  it("policy losses: no router term unless asked; with routerAuxLossCoef, the padded rows' aux loss and its gradient", async () => {
    const prompts = [[5, 6, 7], [5, 6, 7], [9, 10]];
    const completions = [[11, 12, 13, 14], [15, 16], [17, 18, 19]];
    // As CoMLRL: config.json's output_router_logits does not reach a loss computed from log-probs.
    const plain = await model.policyGradientBackward(prompts, completions, [1, -1, 0.5]);
    expect(plain.routerAuxLoss).toBeUndefined();
    await model.zeroGrad();

    const coef = 0.25;
    const optedIn = await CausalLM.fromDirectory(dir, { routerAuxLossCoef: coef });
    const lmOnly = await CausalLM.fromDirectory(path.join(__dirname, base));
    try {
      // Rows 0 and 1 share a prompt (one prompt forward, its tokens weighed twice); rows 0 and 2 do not.
      for (const picked of [[0, 1, 2], [0, 2]]) {
        const sequences = picked.map((r) => [...prompts[r], ...completions[r]]);
        const width = Math.max(...sequences.map((s) => s.length));
        const padded = {
          ids: Int32Array.from(sequences.flatMap((s) => [...s, ...Array(width - s.length).fill(0)])),
          batch: sequences.length,
          length: width,
          attentionMask: Int32Array.from(sequences.flatMap((s) => [...Array(s.length).fill(1), ...Array(width - s.length).fill(0)])),
        };
        // coef · ∇aux of the padded batch: ∇(LM + coef · aux) − ∇LM.
        await optedIn.zeroGrad();
        await lmOnly.zeroGrad();
        const reference = await optedIn.causalLMLossBackward(padded);
        await lmOnly.causalLMLossBackward(padded);
        const names = optedIn.native.parameterNames().map((p) => p.name);
        const expected = new Map(names.map((n) => [n, Float64Array.from(optedIn.native.getGradient(n)!, (g, i) => g - lmOnly.native.getGradient(n)![i])]));

        // Zero advantages: the loss and gradient are the router term's alone.
        await optedIn.zeroGrad();
        const out = await optedIn.policyGradientBackward(picked.map((r) => prompts[r]), picked.map((r) => completions[r]), picked.map(() => 0));
        expect(Math.abs(out.routerAuxLoss! - reference.routerAuxLoss!), `rows ${picked}`).toBeLessThan(1e-6);
        expect(Math.abs(out.loss - coef * reference.routerAuxLoss!)).toBeLessThan(1e-6);
        for (const param of names) {
          const scale = Math.max(norm(expected.get(param)!), 1e-6);
          expect(maxAbsDiff(optedIn.native.getGradient(param)!, expected.get(param)!) / scale, `${param}, rows ${picked}`).toBeLessThan(1e-4);
        }
      }
    } finally {
      optedIn.dispose();
      lmOnly.dispose();
    }
    await expect(CausalLM.fromDirectory(path.join(__dirname, "llama3"), { routerAuxLossCoef: 0.1 })).rejects.toThrow(/routerAuxLossCoef: .* without mixture-of-experts layers/);
  });
});
