// Parity of the value and reward heads with the reference library (transformers446/heads, README "Heads"): for each
// of the four models and both head forms, per-position values, the V and Q readouts, the MSE and clipped value losses,
// the Bradley–Terry loss, and the gradients of the head and of the backbone parameters the reference records. Head
// weights come from heads.safetensors through loadStateDict, and from Python's value_head_<form>.pt files.
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StateTensor } from "../../src/io/torch-pickle.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { ValueHead } from "../../src/models/value-head.js";
import { maxAbsDiff, norm, readSafetensors, type FixtureTensor } from "../support/safetensors.js";

const GOLDEN = path.resolve(__dirname, "transformers446");
const MODELS = ["qwen2_tiny_untied", "qwen2_tiny_tied", "llama_tiny_untied", "llama_tiny_tied"];
const FORMS = { linear: null, mlp: 16 } as const;
// Tolerances: values are fp32 computations of the same graph (summation order differs): 1e-4 absolute. Losses: 1e-5
// relative. Gradients: the largest element error below 1e-4 of the reference gradient's norm, plus 1e-7 absolute for
// gradients that vanish analytically (the reward bias: it cancels in s_chosen − s_rejected; the reference holds exactly 0).
const VALUE_TOL = 1e-4;
const LOSS_RTOL = 1e-5;
const GRAD_RTOL = 1e-4;
const GRAD_ATOL = 1e-7;
// bf16 head weights (value_head_<form>_bf16.pt) round each weight to 8 bits of mantissa: values move by ≈ 1e-2.
const BF16_VALUE_TOL = 5e-2;

describe.each(MODELS)("head parity: %s", (name) => {
  const dir = path.join(GOLDEN, "heads", name);
  let model: CausalLM;
  let ref: Map<string, FixtureTensor>;
  let meta: Record<string, any>;
  let prompts: number[][];
  let completions: number[][];
  const heads: Partial<Record<keyof typeof FORMS, ValueHead>> = {};
  const t = (key: string) => {
    const tensor = ref.get(key);
    if (!tensor) throw new Error(`golden tensor ${key} missing`);
    return tensor;
  };
  const head = (form: keyof typeof FORMS) => heads[form]!;

  // The reference head weights as a state dict (fp32 bytes).
  function referenceStateDict(form: keyof typeof FORMS): Record<string, StateTensor> {
    const prefix = `head.${form}.`;
    const dict: Record<string, StateTensor> = {};
    for (const [key, tensor] of ref) {
      if (!key.startsWith(prefix)) continue;
      dict[key.slice(prefix.length)] = { dtype: "float32", shape: tensor.shape, data: new Uint8Array(Float32Array.from(tensor.data).buffer) };
    }
    return dict;
  }

  beforeAll(async () => {
    ref = readSafetensors(path.join(dir, "heads.safetensors"));
    meta = JSON.parse(readFileSync(path.join(dir, "heads.json"), "utf8"));
    model = await CausalLM.fromDirectory(path.join(GOLDEN, name));
    const ids = t("input.ids");
    const width = ids.shape[1];
    prompts = meta.prompt_lens.map((p: number, r: number) => Array.from(ids.data.subarray(r * width, r * width + p)));
    completions = meta.completion_lens.map((c: number, r: number) => {
      const p = meta.prompt_lens[r];
      return Array.from(ids.data.subarray(r * width + p, r * width + p + c));
    });
    for (const [form, hiddenDim] of Object.entries(FORMS) as Array<[keyof typeof FORMS, number | null]>) {
      heads[form] = ValueHead.create(model, { hiddenDim });
      heads[form]!.loadStateDict(referenceStateDict(form));
    }
  });
  afterAll(() => {
    Object.values(heads).forEach((h) => h.dispose());
    model?.dispose();
  });

  function expectGradients(kind: string, headOf: ValueHead) {
    const prefix = `grad.${kind}.`;
    const keys = [...ref.keys()].filter((k) => k.startsWith(prefix));
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) {
      const parameter = key.slice(prefix.length);
      const ours = parameter.startsWith("head.") ? headOf.native.getGradient(parameter.slice(5)) : model.native.getGradient(parameter);
      expect(ours, key).not.toBeNull();
      const expected = t(key).data;
      expect(maxAbsDiff(ours!, expected), key).toBeLessThan(GRAD_RTOL * norm(expected) + GRAD_ATOL);
    }
  }

  async function zeroGrads() {
    await Promise.all([model.zeroGrad(), ...Object.values(heads).map((h) => h.native.zeroGrad())]);
  }

  it.each(Object.keys(FORMS) as Array<keyof typeof FORMS>)("%s head: per-position values, V and Q readouts", async (form) => {
    const positions = await head(form).readout(prompts, completions, "positions");
    const expected = t(`values.${form}.per_position`);
    const width = expected.shape[1];
    let offset = 0;
    prompts.forEach((p, r) => {
      const length = p.length + completions[r].length;
      const row = expected.data.subarray(r * width, r * width + length);
      expect(maxAbsDiff(positions.subarray(offset, offset + length), row), `row ${r}`).toBeLessThan(VALUE_TOL);
      offset += length;
    });
    expect(offset).toBe(positions.length);
    expect(maxAbsDiff(await head(form).readout(prompts, completions, "v"), meta[`v.${form}`])).toBeLessThan(VALUE_TOL);
    expect(maxAbsDiff(await head(form).readout(prompts, completions, "q"), meta[`q.${form}`])).toBeLessThan(VALUE_TOL);
  });

  it.each([
    ["mse", "value_loss.mse"],
    ["clipped", "value_loss.clipped"],
  ] as const)("value loss (%s) on the MLP head's Q readout and its gradients", async (kind, key) => {
    await zeroGrads();
    const clip = kind === "clipped" ? { oldValues: t("value.v_old").data, clipRange: meta.value_clip_range } : {};
    const out = await head("mlp").valueLossBackward(prompts, completions, { readout: "q", targets: t("value.targets").data, ...clip });
    expect(Math.abs(out.loss - meta[key]) / Math.abs(meta[key])).toBeLessThan(LOSS_RTOL);
    expect(maxAbsDiff(out.values, meta["q.mlp"])).toBeLessThan(VALUE_TOL);
    expectGradients(`value_loss.${kind}`, head("mlp"));
  });

  it("reward head: last-real-token scores, Bradley–Terry loss and its gradients", async () => {
    await zeroGrads();
    const ids = t("input.ids");
    const batch = { ids: Int32Array.from(ids.data), batch: ids.shape[0], length: ids.shape[1], attentionMask: Int32Array.from(t("input.mask").data) };
    const scores = await head("linear").rewardScores(batch);
    expect(maxAbsDiff(scores, meta["reward.scores"])).toBeLessThan(VALUE_TOL);
    const pairs: number[][] = meta["reward.pairs"];
    const out = await head("linear").bradleyTerryBackward({
      ...batch,
      chosen: Int32Array.from(pairs.map((p) => p[0])),
      rejected: Int32Array.from(pairs.map((p) => p[1])),
    });
    expect(Math.abs(out.loss - meta["reward.bt_loss"]) / meta["reward.bt_loss"]).toBeLessThan(LOSS_RTOL);
    expectGradients("bt", head("linear"));
  });

  it.each(Object.keys(FORMS) as Array<keyof typeof FORMS>)("reads Python's value_head_%s.pt (fp32 and bf16)", async (form) => {
    const fromPython = ValueHead.create(model, { hiddenDim: FORMS[form], seed: 99 });
    try {
      fromPython.loadStateDict(path.join(dir, `value_head_${form}.pt`));
      expect(maxAbsDiff(await fromPython.readout(prompts, completions, "q"), meta[`q.${form}`])).toBeLessThan(VALUE_TOL);
      fromPython.loadStateDict(path.join(dir, `value_head_${form}_bf16.pt`));
      expect(maxAbsDiff(await fromPython.readout(prompts, completions, "q"), meta[`q.${form}`])).toBeLessThan(BF16_VALUE_TOL);
    } finally {
      fromPython.dispose();
    }
  });
});
