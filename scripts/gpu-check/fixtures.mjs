// What the rows share: a random model sized for the device, its prompts and completions, and every training loss.
import path from "node:path";
import { CausalLM, ValueHead, createTinyModel } from "../../dist/index.js";

// Tolerances: fp32 on the GPU differs from the CPU by summation order and TF32-free cuBLAS (≈1e-5 relative);
// bf16 weights and activations round to 8 bits of mantissa (≈4e-3 relative per op, a few 1e-2 over a model), judged
// against the same bf16 model on the CPU, tensor by tensor.
export const FP32_TOLERANCE = 1e-4;
export const BF16_TOLERANCE = 5e-2;

// Memory-efficient SDPA's backward splits the keys into blocks of 64 and adds the blocks' gradients with atomics:
// rows that expect equal bits hold only below that, or under COMLRL_DETERMINISTIC=1.
const ATOMICS_FROM_KEYS = 64;

export const GRADIENT_PARAMS = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.down_proj.weight"];

/** The model (large enough on a GPU that a step is not all launch overhead, small on the CPU fallback) and its data. */
export async function prepareFixtures(h, scratch) {
  const shape = h.gpu
    ? { hiddenSize: 512, numLayers: 8, numHeads: 8, numKvHeads: 4, vocabSize: 1000 }
    : { hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, vocabSize: 1000 };
  const modelDir = path.join(scratch, "model");
  const tokenizer = await createTinyModel(modelDir, { seed: 1, ...shape });
  const prompts = Array.from({ length: 8 }, (_, i) => tokenizer.encode(`the quick brown fox number ${i} jumps over`));
  const completions = prompts.map((p) => p.slice().reverse());
  const keys = Math.max(...prompts.map((p, i) => p.length + completions[i].length));
  const losses = {
    policyGradient: (lm) => lm.policyGradientBackward(prompts.slice(0, 4), completions.slice(0, 4), [1, -1, 0.5, -0.5]),
    causalLM: (lm) => lm.causalLMLossBackward({ ids: Int32Array.from(prompts.slice(0, 4).flatMap((p) => p.slice(0, 6))), batch: 4, length: 6 }),
    valueLoss: (lm, head) => head.valueLossBackward(prompts.slice(0, 4), completions.slice(0, 4), { readout: "v", targets: [0.5, -0.5, 1, 0] }),
    actorCritic: (lm, head) => head.actorCriticBackward(prompts.slice(0, 4), completions.slice(0, 4), { readout: "v", targets: [0.5, -0.5, 1, 0], advantages: [1, -1, 0.5, -0.5], valueLossCoef: 0.5 }),
    bradleyTerry: (lm, head) => head.bradleyTerryBackward({ ids: Int32Array.from(prompts.slice(0, 4).flatMap((p) => p.slice(0, 6))), batch: 4, length: 6, chosen: [0, 2], rejected: [1, 3] }),
  };
  return {
    modelDir, prompts, completions, losses,
    /** Whether equal inputs must give equal bits on this device at these lengths. */
    bitwise: !h.gpu || keys < ATOMICS_FROM_KEYS || process.env.COMLRL_DETERMINISTIC === "1",
    keys,
    /** The GRADIENT_PARAMS' gradients after one backward of `loss` on `where` in `dtype`. */
    async gradients(where, dtype, loss, checkpointing) {
      const lm = await CausalLM.load(modelDir, { device: where, dtype });
      lm.setGradientCheckpointing(checkpointing);
      const head = ValueHead.create(lm, { seed: 3 });
      try {
        await losses[loss](lm, head);
        return GRADIENT_PARAMS.map((name) => lm.native.getGradient(name));
      } finally {
        head.dispose();
        lm.dispose();
      }
    },
  };
}
