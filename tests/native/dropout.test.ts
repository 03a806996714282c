// Dropout as transformers applies it: only in training mode and only in forwards that compute gradients, each
// element kept with probability 1 − p and scaled by 1 / (1 − p), its masks drawn from the model's seeded "dropout"
// stream (restorable, and replayed by gradient checkpointing's recompute); a rate of 0 changes nothing.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CausalLM } from "../../src/models/causal-lm.js";
import type { TokenBatch } from "../../src/models/causal-lm.js";
import { buildConfigJson } from "../../src/models/config.js";
import { hubGpt2Config } from "../support/hub-gpt2.js";

const VOCAB = 64;
const POSITIONS = 128;
const gpt2 = (dropout: { attn_pdrop: number; resid_pdrop: number; embd_pdrop: number }, seed = 5) =>
  CausalLM.create(hubGpt2Config(VOCAB, VOCAB - 1, dropout), { seed, initStd: 0.2 });
const models: CausalLM[] = [];
const keep = (model: CausalLM) => (models.push(model), model);
afterAll(() => models.forEach((m) => m.dispose()));

// One row of every position, so that wpe's gradient has one entry per (position, feature) of the embedding output.
const fullRow: TokenBatch = { ids: Int32Array.from({ length: POSITIONS }, (_, i) => (i * 7 + 3) % VOCAB), batch: 1, length: POSITIONS };
const prompts = [[1, 2, 3, 4], [5, 6, 7]];
const completions = [Int32Array.from([8, 9, 10]), Int32Array.from([11, 12])];

async function gradients(model: CausalLM, run: () => Promise<unknown>): Promise<Float32Array[]> {
  await model.zeroGrad();
  await run();
  return model.native.parameterNames().map(({ name }) => model.native.getGradient(name) ?? new Float32Array());
}
// Writes values over a float32 tensor's bytes in a safetensors file (same shape, same place).
function overwriteTensor(file: string, name: string, values: Float32Array): void {
  const bytes = readFileSync(file);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8")) as Record<string, { dtype: string; data_offsets: [number, number] }>;
  const [begin, end] = header[name].data_offsets;
  expect([header[name].dtype, end - begin]).toEqual(["F32", values.byteLength]);
  Buffer.from(values.buffer, values.byteOffset, values.byteLength).copy(bytes, 8 + headerLength + begin);
  writeFileSync(file, bytes);
}
const bits = (xs: Float32Array[]) => xs.map((x) => Buffer.from(x.buffer).toString("base64"));
const pgBackward = (model: CausalLM) => () => model.policyGradientBackward(prompts, completions, [1, -0.5]);

describe("dropout", () => {
  it("keeps each element with probability 1 − p: wpe's gradient is zero exactly where the embedding was dropped", async () => {
    const rate = 0.1;
    const model = keep(gpt2({ attn_pdrop: 0, resid_pdrop: 0, embd_pdrop: rate }).train());
    model.setSeed(17, "dropout");
    let dropped = 0;
    let total = 0;
    for (let call = 0; call < 10; call++) {
      await gradients(model, () => model.causalLMLossBackward(fullRow));
      const wpe = model.native.getGradient("transformer.wpe.weight")!;
      // The last position predicts nothing: its embedding gets no gradient either way.
      const seen = wpe.subarray(0, (POSITIONS - 1) * 32);
      dropped += seen.filter((g) => g === 0).length;
      total += seen.length;
    }
    // Binomial(total, p): mean total·p, sd √(total·p·(1 − p)); 5 sd is a bound a correct mask fails ~1 in 10⁶.
    const sd = Math.sqrt(total * rate * (1 - rate));
    expect(Math.abs(dropped - total * rate)).toBeLessThan(5 * sd);
    // Without dropout no entry is exactly zero.
    const plain = keep(gpt2({ attn_pdrop: 0, resid_pdrop: 0, embd_pdrop: 0 }).train());
    await gradients(plain, () => plain.causalLMLossBackward(fullRow));
    expect(plain.native.getGradient("transformer.wpe.weight")!.subarray(0, (POSITIONS - 1) * 32).filter((g) => g === 0).length).toBe(0);
  });

  it("scales what it keeps by 1 / (1 − p): the dropped loss is that of the same model fed the masked, scaled embeddings", async () => {
    // With embd_pdrop alone, h₀ = (wte[id] + wpe[pos]) ⊙ m · 1/(1 − p). The mask m is read off wpe's gradient
    // (zero exactly where dropped); a model without dropout whose wpe makes wte[id] + wpe'[pos] that h₀ computes
    // the same loss, within the rounding of that one addition.
    const rate = 0.1;
    const dropping = keep(gpt2({ attn_pdrop: 0, resid_pdrop: 0, embd_pdrop: rate }).train());
    dropping.setSeed(23, "dropout");
    const { loss } = await dropping.causalLMLossBackward(fullRow);
    const hidden = 32;
    const wpeGrad = dropping.native.getGradient("transformer.wpe.weight")!;
    const wte = dropping.native.getParameter("transformer.wte.weight");
    const wpe = dropping.native.getParameter("transformer.wpe.weight");
    const lossWith = async (scale: number) => {
      const fed = Float32Array.from(wpe);
      for (let pos = 0; pos < POSITIONS - 1; pos++) {
        for (let j = 0; j < hidden; j++) {
          const at = pos * hidden + j;
          const embedded = Math.fround(wte[fullRow.ids[pos] * hidden + j] + wpe[at]);
          fed[at] = Math.fround(embedded * (wpeGrad[at] === 0 ? 0 : scale)) - wte[fullRow.ids[pos] * hidden + j];
        }
      }
      const dir = mkdtempSync(path.join(tmpdir(), "comlrl-dropout-scale-"));
      await dropping.save(dir);
      overwriteTensor(path.join(dir, "model.safetensors"), "transformer.wpe.weight", fed);
      const config = JSON.parse(readFileSync(path.join(dir, "config.json"), "utf8"));
      writeFileSync(path.join(dir, "config.json"), JSON.stringify({ ...config, embd_pdrop: 0 }));
      const plain = keep(await CausalLM.load(dir));
      return (await plain.causalLMLossBackward(fullRow, { backward: false })).loss;
    };
    const keptScale = Math.fround(1 / Math.fround(1 - rate));
    expect(Math.abs((await lossWith(keptScale)) - loss)).toBeLessThan(1e-5);
    // The scale matters: the mask alone gives another loss.
    expect(Math.abs((await lossWith(1)) - loss)).toBeGreaterThan(1e-3);
  });

  it("rows that share a prompt each draw their own masks over it, as transformers' padded rows do", async () => {
    // Four rows continue one 16-token prompt. An entry of wpe's gradient at a prompt position is zero only where
    // every row dropped it: p⁴ of them with a mask per row, p with one shared mask.
    const rate = 0.5;
    const model = keep(gpt2({ attn_pdrop: 0, resid_pdrop: 0, embd_pdrop: rate }).train());
    model.setSeed(31, "dropout");
    const prompt = Array.from({ length: 16 }, (_, i) => (i * 5 + 1) % VOCAB);
    const completion = Int32Array.from([7, 8, 9]);
    await gradients(model, () => model.policyGradientBackward([prompt, prompt, prompt, prompt], [completion, completion, completion, completion], [1, 1, 1, 1]));
    const atPrompt = model.native.getGradient("transformer.wpe.weight")!.subarray(0, prompt.length * 32);
    const zeroShare = atPrompt.filter((g) => g === 0).length / atPrompt.length;
    expect(zeroShare).toBeLessThan(0.2);
  });

  it("a rate of 0 (or evaluation mode) is bit-identical to a model without dropout, in training mode too", async () => {
    const rates = { attn_pdrop: 0.3, resid_pdrop: 0.3, embd_pdrop: 0.3 };
    const none = keep(gpt2({ attn_pdrop: 0, resid_pdrop: 0, embd_pdrop: 0 }));
    const zeroTraining = keep(gpt2({ attn_pdrop: 0, resid_pdrop: 0, embd_pdrop: 0 }).train());
    const evaluating = keep(gpt2(rates));
    const reference = bits(await gradients(none, pgBackward(none)));
    expect(bits(await gradients(zeroTraining, pgBackward(zeroTraining)))).toEqual(reference);
    expect(bits(await gradients(evaluating, pgBackward(evaluating)))).toEqual(reference);
    expect(evaluating.info().training).toBe(false);
  });

  it("acts in training mode's gradient forwards; generation and scoring never drop", async () => {
    const rates = { attn_pdrop: 0.3, resid_pdrop: 0.3, embd_pdrop: 0.3 };
    const evaluating = keep(gpt2(rates));
    const training = keep(gpt2(rates).train());
    expect(training.info().training).toBe(true);
    expect(bits(await gradients(training, pgBackward(training)))).not.toEqual(bits(await gradients(evaluating, pgBackward(evaluating))));
    const scores = async (m: CausalLM) => Buffer.from((await m.score(prompts, completions, { tokenLogprobs: true })).tokenLogprobs!.buffer).toString("base64");
    expect(await scores(training)).toEqual(await scores(evaluating));
    const generate = (m: CausalLM) => {
      m.setSeed(9);
      return m.native.generate({ prompts: Int32Array.from([1, 2, 3]), promptLengths: Int32Array.from([3]), maxNewTokens: 6, numReturnSequences: 3, doSample: true, eosTokenIds: new Int32Array(), padTokenId: 0 });
    };
    expect((await generate(training)).tokens).toEqual((await generate(evaluating)).tokens);
    const forward = async (m: CausalLM) => Buffer.from((await m.native.forward({ ids: Int32Array.from([1, 2, 3]), batch: 1, length: 3 })).logits!.buffer).toString("base64");
    expect(await forward(training)).toEqual(await forward(evaluating));
  });

  it("each family's own rate acts: Llama-like attention_dropout, Phi-3's resid_pdrop, GPT-2's three", async () => {
    for (const [name, rates] of [["attn_pdrop", { attn_pdrop: 0.3, resid_pdrop: 0, embd_pdrop: 0 }], ["resid_pdrop", { attn_pdrop: 0, resid_pdrop: 0.3, embd_pdrop: 0 }]] as const) {
      const a = keep(gpt2(rates).train());
      const b = keep(gpt2({ attn_pdrop: 0, resid_pdrop: 0, embd_pdrop: 0 }));
      expect(bits(await gradients(a, pgBackward(a))), name).not.toEqual(bits(await gradients(b, pgBackward(b))));
    }
    const cases = [
      ["qwen2", { attention_dropout: 0.3 }, { attentionDropout: 0.3 }],
      ["phi3", { resid_pdrop: 0.3 }, { residualDropout: 0.3 }],
      ["phi3", { attention_dropout: 0.3 }, { attentionDropout: 0.3 }],
    ] as const;
    for (const [family, extra, read] of cases) {
      const shape = { vocabSize: VOCAB, hiddenSize: 16, intermediateSize: 32, numLayers: 1, numHeads: 2, numKvHeads: 1, ropeTheta: 1e4, rmsNormEps: 1e-6, tieWordEmbeddings: false };
      const make = (rates: Record<string, number>) => keep(CausalLM.create(buildConfigJson(family, shape, { bosTokenId: null, eosTokenId: VOCAB - 1 }, rates), { seed: 2, initStd: 0.2 }));
      const dropping = make(extra).train();
      const plain = make({});
      expect(bits(await gradients(dropping, pgBackward(dropping))), `${family} ${JSON.stringify(extra)}`).not.toEqual(bits(await gradients(plain, pgBackward(plain))));
      expect(dropping.config).toMatchObject(read);
    }
  });

  it("is seeded and restorable: the same stream state gives the same masks, another seed others", async () => {
    const model = keep(gpt2({ attn_pdrop: 0.2, resid_pdrop: 0.2, embd_pdrop: 0.2 }).train());
    model.setSeed(1, "dropout");
    const state = model.generatorState("dropout");
    const first = bits(await gradients(model, pgBackward(model)));
    const second = bits(await gradients(model, pgBackward(model)));
    expect(second).not.toEqual(first);
    model.setGeneratorState(state, "dropout");
    expect(bits(await gradients(model, pgBackward(model)))).toEqual(first);
    model.setSeed(2, "dropout");
    expect(bits(await gradients(model, pgBackward(model)))).not.toEqual(first);
  });

  it("gradient checkpointing's recompute replays the forward's masks: the same gradients and the same stream after", async () => {
    const make = () => keep(gpt2({ attn_pdrop: 0.2, resid_pdrop: 0.2, embd_pdrop: 0.2 }).train());
    const plain = make();
    const checkpointed = make().setGradientCheckpointing(true);
    for (const m of [plain, checkpointed]) m.setSeed(4, "dropout");
    const a = await gradients(plain, pgBackward(plain));
    const b = await gradients(checkpointed, pgBackward(checkpointed));
    a.forEach((g, i) => g.forEach((x, j) => expect(b[i][j]).toBeCloseTo(x, 5)));
    expect(Buffer.from(checkpointed.generatorState("dropout"))).toEqual(Buffer.from(plain.generatorState("dropout")));
  });

  it("a scoring pass for a backward drops; not kept, its backward's own forward draws its masks again: the kept pass's sums, gradients and stream", async () => {
    const run = async (keepGraph: boolean) => {
      const model = keep(gpt2({ attn_pdrop: 0.2, resid_pdrop: 0.2, embd_pdrop: 0.2 }).train());
      model.setSeed(6, "dropout");
      let sum: string[] = [];
      const grads = await gradients(model, async () => {
        const scored = await model.scoreForBackward(prompts, completions, keepGraph);
        sum = bits([scored.sum]);
        await scored.policyGradientBackward([1, -0.5]);
      });
      return { sum, grads: bits(grads), stream: Buffer.from(model.generatorState("dropout")), scored: bits([(await model.score(prompts, completions)).sum]) };
    };
    const kept = await run(true);
    const unkept = await run(false);
    expect(kept.sum).not.toEqual(kept.scored);
    expect(unkept).toEqual(kept);
  });
});
