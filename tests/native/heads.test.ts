// Value and reward heads against hand computations: the readout positions, the MSE and clipped value losses and their
// gradients, the Bradley–Terry loss (stable at huge margins) and its gradient, padding on either side, a frozen
// backbone, the one-forward actor-critic loss, and state-dict names, shapes and errors.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadTorchStateDict } from "../../src/io/torch-pickle.js";
import { ValueHead } from "../../src/models/value-head.js";
import type { NativeValueHead } from "../../src/native/binding.js";
import { addon } from "../../src/native/loader.js";
import { strideZeroHead } from "../support/hostile-files.js";
import { batchOf, tinyLM } from "./tiny-lm.js";

const model = tinyLM(21);
const disposables: Array<{ dispose(): void }> = [model];
afterAll(() => disposables.forEach((d) => d.dispose()));

function newHead(hiddenDim: number | null, seed = 1): NativeValueHead {
  const head = new (addon().NativeValueHead)({ hiddenSize: 16, hiddenDim, dtype: "float32", device: "cpu", seed });
  disposables.push(head);
  return head;
}

const f32 = (values: number[]) => ({ dtype: "float32" as const, shape: [values.length], data: new Uint8Array(Float32Array.from(values).buffer) });
const prompts = [[1, 2, 3], [4, 5], [1, 2, 3]];
const completions = [[6, 7], [8, 9, 10], [11]];
const batch = batchOf(prompts, completions);
const close = (a: ArrayLike<number>, b: ArrayLike<number>, tol: number) => expect(Math.max(...Array.from(a, (x, i) => Math.abs(x - b[i])))).toBeLessThan(tol);

/** The final-norm hidden state of one unpadded row at each position, [length][16]. */
async function hiddenOf(ids: number[]): Promise<Float32Array[]> {
  const out = await model.native.forward({ ids: Int32Array.from(ids), batch: 1, length: ids.length, logits: false, hiddenStates: true });
  const last = out.hiddenStates![out.hiddenStates!.length - 1];
  return ids.map((_, i) => last.subarray(i * 16, (i + 1) * 16));
}

describe("value head", () => {
  it("has PyTorch's state_dict names and shapes, N(0, 0.02) weights and zero biases", () => {
    expect(newHead(null).parameterNames()).toEqual([{ name: "weight", shape: [1, 16] }, { name: "bias", shape: [1] }]);
    const mlp = newHead(8);
    expect(mlp.parameterNames().map((p) => [p.name, p.shape])).toEqual([["0.weight", [8, 16]], ["0.bias", [8]], ["2.weight", [1, 8]], ["2.bias", [1]]]);
    const w = mlp.getParameter("0.weight");
    const std = Math.sqrt(w.reduce((s, x) => s + x * x, 0) / w.length);
    expect(std).toBeGreaterThan(0.012);
    expect(std).toBeLessThan(0.03);
    expect(Array.from(mlp.getParameter("0.bias"))).toEqual(new Array(8).fill(0));
    expect(mlp.info()).toEqual({ hiddenSize: 16, hiddenDim: 8, parameterCount: 8 * 16 + 8 + 8 + 1, device: "cpu", dtype: "float32", frozen: false });
    expect(newHead(null).info().hiddenDim).toBeNull();
    // The same seed gives the same head.
    expect(newHead(8, 3).getParameter("0.weight")).toEqual(newHead(8, 3).getParameter("0.weight"));
  });

  it("reads V at the last prompt position, Q at the last completion token, and every position", async () => {
    const head = newHead(8);
    const positions = await addon().values(model.native, head, { ...batch, readout: "positions" });
    const v = await addon().values(model.native, head, { ...batch, readout: "v" });
    const q = await addon().values(model.native, head, { ...batch, readout: "q" });
    let offset = 0;
    prompts.forEach((p, r) => {
      const length = p.length + completions[r].length;
      expect(Math.abs(v[r] - positions[offset + p.length - 1]), `V row ${r}`).toBeLessThan(1e-5);
      expect(Math.abs(q[r] - positions[offset + length - 1]), `Q row ${r}`).toBeLessThan(1e-5);
      offset += length;
    });
    expect(positions.length).toBe(offset);
    expect(v[2]).toBe(v[0]); // rows 0 and 2 share their prompt: one forward, one value
    // By hand for the linear head: w·h + b at row 1's last token.
    const linear = newHead(null, 5);
    linear.loadStateDict({ weight: { ...f32(Array.from({ length: 16 }, (_, i) => (i - 8) / 10)), shape: [1, 16] }, bias: f32([0.25]) });
    const h = (await hiddenOf([...prompts[1], ...completions[1]]))[4];
    const expected = h.reduce((s, x, i) => s + x * ((i - 8) / 10), 0.25);
    expect(Math.abs((await addon().values(model.native, linear, { ...batch, readout: "q" }))[1] - expected)).toBeLessThan(1e-5);
  });

  it("value loss: MSE and the clipped form by hand, with the bias gradient", async () => {
    const head = newHead(null, 2);
    const v = Array.from(await addon().values(model.native, head, { ...batch, readout: "q" }));
    // Row 0: V moved 1 above V_old and the target lies further up: V_clip = V − 0.8 has the larger error (3.24 vs 1),
    // so the clipped term wins. Row 1: V moved 1 below V_old toward a target above: the unclipped error wins (1 vs
    // 0.04). Row 2: inside the clip range, both terms agree.
    const targets = [v[0] + 1, v[1] + 1, v[2] + 0.5];
    const oldValues = [v[0] - 1, v[1] + 1, v[2] + 0.05];
    const clipRange = 0.2;
    const mse = v.reduce((s, x, i) => s + (targets[i] - x) ** 2, 0) / 3;
    const clippedTerms = v.map((x, i) => {
      const vc = oldValues[i] + Math.max(-clipRange, Math.min(clipRange, x - oldValues[i]));
      return { loss: Math.max((targets[i] - x) ** 2, (targets[i] - vc) ** 2), clippedWins: (targets[i] - vc) ** 2 > (targets[i] - x) ** 2 && Math.abs(x - oldValues[i]) > clipRange };
    });
    expect(clippedTerms.map((c) => c.clippedWins)).toEqual([true, false, false]);
    const clipped = clippedTerms.reduce((s, c) => s + c.loss, 0) / 3;
    expect(clipped).not.toBeCloseTo(mse, 3);

    await head.zeroGrad();
    const plain = await addon().valueLossBackward(model.native, head, { ...batch, readout: "q", targets: Float32Array.from(targets) });
    expect(Math.abs(plain.loss - mse)).toBeLessThan(1e-5);
    close(plain.values, v, 1e-6);
    // d/db mean (y − V)² = mean 2(V − y)
    expect(Math.abs(head.getGradient("bias")![0] - v.reduce((s, x, i) => s + 2 * (x - targets[i]), 0) / 3)).toBeLessThan(1e-5);

    await head.zeroGrad();
    const out = await addon().valueLossBackward(model.native, head, { ...batch, readout: "q", targets: Float32Array.from(targets), oldValues: Float32Array.from(oldValues), clipRange });
    expect(Math.abs(out.loss - clipped)).toBeLessThan(1e-5);
    // Where the clipped term wins, V_clip is constant in V: that row sends no gradient.
    const grad = v.reduce((s, x, i) => s + (clippedTerms[i].clippedWins ? 0 : 2 * (x - targets[i])), 0) / 3;
    expect(Math.abs(head.getGradient("bias")![0] - grad)).toBeLessThan(1e-5);

    // scale weights only the gradient; backward: false leaves gradients alone.
    await head.zeroGrad();
    const scaled = await addon().valueLossBackward(model.native, head, { ...batch, readout: "q", targets: Float32Array.from(targets), scale: 0.5 });
    expect(scaled.loss).toBeCloseTo(plain.loss, 6);
    expect(head.getGradient("bias")![0]).toBeCloseTo((v.reduce((s, x, i) => s + 2 * (x - targets[i]), 0) / 3) * 0.5, 5);
    await head.zeroGrad();
    await addon().valueLossBackward(model.native, head, { ...batch, readout: "v", targets: Float32Array.from(targets), backward: false });
    expect(head.getGradient("bias")).toBeNull();
  });

  it("refuses bad value-loss input naming the field", async () => {
    const head = newHead(null);
    const call = (extra: object) => () => addon().valueLossBackward(model.native, head, { ...batch, readout: "q", targets: Float32Array.from([1, 2, 3]), ...extra });
    expect(call({ targets: Float32Array.from([1]) })).toThrow("targets has 1 values for 3 readouts");
    expect(call({ oldValues: Float32Array.from([1, 2, 3]) })).toThrow("oldValues is given without clipRange");
    expect(call({ clipRange: 0.2 })).toThrow("clipRange is given without oldValues");
    expect(call({ readout: "z" })).toThrow('readout must be "v", "q" or "positions", got "z"');
    const wide = new (addon().NativeValueHead)({ hiddenSize: 32, dtype: "float32", device: "cpu" });
    disposables.push(wide);
    expect(() => addon().values(model.native, wide, { ...batch, readout: "v" })).toThrow("the head reads hidden size 32, the model's is 16");
  });

  it("actor-critic: policy loss + coef · value loss from one forward equals the two losses' gradients summed", async () => {
    const actor = tinyLM(21);
    const head = newHead(8, 4);
    disposables.push(actor);
    const advantages = Float32Array.from([1, -0.5, 2]);
    const targets = Float32Array.from([0.3, -0.2, 0.9]);
    const coef = 0.5;
    const pg = await addon().policyGradientBackward(actor.native, { ...batch, advantages });
    const pgGrad = actor.native.getGradient("model.norm.weight")!;
    await actor.zeroGrad();
    const vl = await addon().valueLossBackward(actor.native, head, { ...batch, readout: "q", targets });
    const vlGrad = actor.native.getGradient("model.norm.weight")!;
    const vlHeadGrad = head.getGradient("2.bias")![0];
    await actor.zeroGrad();
    await head.zeroGrad();
    const ac = await addon().actorCriticBackward(actor.native, head, { ...batch, readout: "q", advantages, targets, valueLossCoef: coef });
    expect(Math.abs(ac.policyLoss - pg.loss)).toBeLessThan(1e-4);
    expect(Math.abs(ac.valueLoss - vl.loss)).toBeLessThan(1e-5);
    expect(Math.abs(ac.loss - (pg.loss + coef * vl.loss))).toBeLessThan(1e-4);
    close(actor.native.getGradient("model.norm.weight")!, Array.from(pgGrad, (g, i) => g + coef * vlGrad[i]), 1e-4);
    expect(Math.abs(head.getGradient("2.bias")![0] - coef * vlHeadGrad)).toBeLessThan(1e-5);
  });

  it("loadStateDict checks names and shapes (naming both) and converts dtypes; stateDict round-trips", async () => {
    const head = newHead(null);
    expect(() => head.loadStateDict({ weight: { ...f32(new Array(8).fill(0)), shape: [1, 8] }, bias: f32([0]) })).toThrow(
      'state dict "weight" has shape [1, 8], the head\'s is [1, 16]',
    );
    expect(() => head.loadStateDict({ bias: f32([0]) })).toThrow('state dict lacks "weight"');
    expect(() => head.loadStateDict({ ...head.stateDict(), "0.weight": f32([1]) })).toThrow('state dict has "0.weight", which the value head does not (it has weight, bias)');
    expect(() => head.loadStateDict({ weight: { dtype: "float32", shape: [1, 16], data: new Uint8Array(3) }, bias: f32([0]) })).toThrow(
      'state dict entry "weight": 3 bytes of data, but float32 [1, 16] needs 64',
    );
    // bf16 bytes of 1.5 (0x3FC0) and −2 (0xC000) become float32 1.5 and −2.
    const bf16 = (x: number) => (new Uint32Array(Float32Array.from([x]).buffer)[0] >>> 16) & 0xffff;
    const weights = Array.from({ length: 16 }, (_, i) => (i % 2 ? 1.5 : -2));
    head.loadStateDict({ weight: { dtype: "bfloat16", shape: [1, 16], data: new Uint8Array(Uint16Array.from(weights.map(bf16)).buffer) }, bias: f32([0.5]) });
    expect(Array.from(head.getParameter("weight"))).toEqual(weights);
    const dict = head.stateDict();
    expect(dict.weight.dtype).toBe("float32");
    expect(Array.from(new Float32Array(dict.bias.data.slice().buffer))).toEqual([0.5]);
    const copy = newHead(null, 9);
    copy.loadStateDict(dict);
    expect(copy.getParameter("weight")).toEqual(head.getParameter("weight"));
  });
});

describe("reward head", () => {
  const rows = [[3, 4, 5, 6], [7, 8], [9, 10, 11]];
  const width = 5;
  function padded(side: "left" | "right") {
    const ids = new Int32Array(rows.length * width);
    const mask = new Int32Array(rows.length * width);
    rows.forEach((row, r) => {
      const start = side === "left" ? width - row.length : 0;
      row.forEach((token, i) => {
        ids[r * width + start + i] = token;
        mask[r * width + start + i] = 1;
      });
    });
    return { ids, batch: rows.length, length: width, attentionMask: mask };
  }

  it("scores the last real token, the same left- or right-padded as unpadded", async () => {
    const head = newHead(null, 6);
    const right = await addon().rewardScores(model.native, head, padded("right"));
    const left = await addon().rewardScores(model.native, head, padded("left"));
    close(left, right, 1e-5);
    for (let r = 0; r < rows.length; r++) {
      const alone = await addon().rewardScores(model.native, head, { ids: Int32Array.from(rows[r]), batch: 1, length: rows[r].length });
      expect(Math.abs(alone[0] - right[r]), `row ${r}`).toBeLessThan(1e-5);
    }
  });

  it("scores rows that begin alike (each shared beginning run once) as it scores each row alone", async () => {
    const head = newHead(null, 9);
    const alike = [[3, 4, 5, 6, 7], [3, 4, 5, 9], [3, 4, 12], [20, 21, 22], [20, 21, 23, 24], [30, 31]];
    const length = Math.max(...alike.map((row) => row.length));
    const ids = new Int32Array(alike.length * length);
    const attentionMask = new Int32Array(alike.length * length);
    alike.forEach((row, r) => {
      ids.set(row, r * length);
      attentionMask.fill(1, r * length, r * length + row.length);
    });
    const together = await addon().rewardScores(model.native, head, { ids, batch: alike.length, length, attentionMask });
    for (let r = 0; r < alike.length; r++) {
      const alone = await addon().rewardScores(model.native, head, { ids: Int32Array.from(alike[r]), batch: 1, length: alike[r].length });
      expect(Math.abs(alone[0] - together[r]), `row ${r}`).toBeLessThan(1e-5);
    }
  });

  it("a pair that begins alike backpropagates into the backbone as pairs that share nothing do", async () => {
    const head = newHead(null, 10);
    const [a, b, c] = [[3, 4, 5, 6, 7], [3, 4, 5, 9], [20, 21, 22]];
    const probe = "model.layers.0.self_attn.q_proj.weight";
    // The gradient and the σ(−m) factor of −log σ(s_w − s_l) for one pair; [a, b] share their first three tokens.
    const pair = async (winner: number[], loser: number[]) => {
      const length = Math.max(winner.length, loser.length);
      const ids = new Int32Array(2 * length);
      const attentionMask = new Int32Array(2 * length);
      [winner, loser].forEach((row, r) => {
        ids.set(row, r * length);
        attentionMask.fill(1, r * length, r * length + row.length);
      });
      await model.zeroGrad();
      const out = await addon().bradleyTerryBackward(model.native, head, { ids, batch: 2, length, attentionMask, chosen: Int32Array.from([0]), rejected: Int32Array.from([1]) });
      return { gradient: Float32Array.from(model.native.getGradient(probe)!), factor: -1 / (1 + Math.exp(out.scores[0] - out.scores[1])) };
    };
    const ab = await pair(a, b);
    const ac = await pair(a, c);
    const bc = await pair(b, c);
    // ∇s_a − ∇s_b from the pairs against c, which share no beginning with either.
    const expected = ac.gradient.map((g, i) => ab.factor * (g / ac.factor - bc.gradient[i] / bc.factor));
    expect(Math.max(...Array.from(expected, Math.abs))).toBeGreaterThan(1e-3);
    close(ab.gradient, expected, 1e-5);
    await model.zeroGrad();
  });

  it("Bradley–Terry loss and its weight gradient by hand", async () => {
    const head = newHead(null, 7);
    const chosen = [0, 2];
    const rejected = [1, 1];
    const out = await addon().bradleyTerryBackward(model.native, head, { ...padded("left"), chosen: Int32Array.from(chosen), rejected: Int32Array.from(rejected) });
    const s = out.scores;
    const margins = chosen.map((w, k) => s[w] - s[rejected[k]]);
    expect(Math.abs(out.loss - margins.reduce((a, m) => a + Math.log1p(Math.exp(-m)), 0) / 2)).toBeLessThan(1e-6);
    // ∂/∂w mean −log σ(m_k) = mean −σ(−m_k) · (h_chosen − h_rejected), h at each row's last token.
    const last = await Promise.all(rows.map(async (row) => (await hiddenOf(row))[row.length - 1]));
    const expected = new Array(16).fill(0);
    chosen.forEach((w, k) => {
      const weight = -1 / (1 + Math.exp(margins[k])) / 2;
      for (let i = 0; i < 16; i++) expected[i] += weight * (last[w][i] - last[rejected[k]][i]);
    });
    close(head.getGradient("weight")!, expected, 1e-5);
    expect(Math.abs(head.getGradient("bias")![0])).toBeLessThan(1e-7); // the bias cancels in every margin
  });

  it("stays finite at huge margins (−log σ(m) ≈ max(0, −m))", async () => {
    const head = newHead(null, 8);
    const scores0 = await addon().rewardScores(model.native, head, padded("right"));
    // Scale the head so margins reach the thousands: log(σ(m)) alone would be −inf in fp32.
    const scale = 5000 / Math.max(...Array.from(scores0, (x, i) => Math.abs(x - scores0[(i + 1) % 3])));
    head.loadStateDict({ weight: { dtype: "float32", shape: [1, 16], data: new Uint8Array(Float32Array.from(head.getParameter("weight"), (x) => x * scale).buffer) }, bias: f32([0]) });
    const out = await addon().bradleyTerryBackward(model.native, head, { ...padded("right"), chosen: Int32Array.from([0, 1]), rejected: Int32Array.from([1, 0]), backward: false });
    const m = out.scores[0] - out.scores[1];
    expect(Math.abs(m)).toBeGreaterThan(100);
    expect(out.loss).toBeCloseTo((Math.max(0, -m) + Math.max(0, m)) / 2, 2);
  });

  it("trains the head alone on a frozen backbone; both frozen is an error", async () => {
    const frozen = tinyLM(21).freeze();
    disposables.push(frozen);
    const head = newHead(null, 9);
    await addon().bradleyTerryBackward(frozen.native, head, { ...padded("right"), chosen: Int32Array.from([0]), rejected: Int32Array.from([1]) });
    expect(head.getGradient("weight")).not.toBeNull();
    expect(frozen.native.getGradient("model.norm.weight")).toBeNull();
    const optimizer = new (addon().NativeOptimizer)(head, { lr: 1e-2 });
    await optimizer.step();
    optimizer.dispose();
    head.freeze();
    await expect(addon().bradleyTerryBackward(frozen.native, head, { ...padded("right"), chosen: Int32Array.from([0]), rejected: Int32Array.from([1]) })).rejects.toThrow(
      "nothing to train: the model and the head are both frozen",
    );
    expect(() => addon().bradleyTerryBackward(frozen.native, head, { ...padded("right"), chosen: Int32Array.from([0]), rejected: Int32Array.from([3]) })).toThrow(
      "rejected names a row outside the batch of 3",
    );
  });
});

describe("ValueHead wrapper", () => {
  it("takes the model's hidden size, dtype and device, and saves a value_head.pt that loads back", async () => {
    const head = ValueHead.create(model, { hiddenDim: 4, seed: 2 });
    disposables.push(head);
    expect(head.info()).toMatchObject({ hiddenSize: 16, hiddenDim: 4, dtype: "float32", device: "cpu" });
    const file = path.join(mkdtempSync(path.join(tmpdir(), "comlrl-heads-")), "value_head.pt");
    await head.save(file);
    expect(Object.keys(loadTorchStateDict(file))).toEqual(["pre_projection.0.weight", "pre_projection.0.bias", "value_projection.weight", "value_projection.bias"]);
    const other = ValueHead.create(model, { hiddenDim: 4, seed: 3 });
    disposables.push(other);
    other.loadStateDict(file);
    expect(await other.readout(prompts, completions, "q")).toEqual(await head.readout(prompts, completions, "q"));
    const linear = ValueHead.create(model);
    disposables.push(linear);
    expect(() => linear.loadStateDict(file)).toThrow(`${file}: the saved head has pre_projection.0.weight [4, 16], pre_projection.0.bias [4], value_projection.weight [1, 4], value_projection.bias [1]; this value head has value_projection.weight [1, 16], value_projection.bias [1]`);
    // A < 1 KiB file declaring a 1.6 GB stride-0 weight: refused by its shape before any storage is gathered.
    const hostile = path.join(path.dirname(file), "hostile_value_head.pt");
    writeFileSync(hostile, strideZeroHead([20000, 20000]));
    const start = Date.now();
    expect(() => linear.loadStateDict(hostile)).toThrow(`${hostile}: the saved head has weight [20000, 20000], bias [1]; this value head has weight [1, 16], bias [1]`);
    expect(Date.now() - start).toBeLessThan(1000);
  });
});
