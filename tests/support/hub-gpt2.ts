// A tiny GPT-2 in the Hub's format: openai-community/gpt2's config.json field for field (dropouts of 0.1 included),
// only its sizes shrunk, with the project's tiny BPE tokenizer, written as an HF directory.
import { buildByteLevelBpeTokenizer } from "../../src/models/tiny-tokenizer.js";
import { CausalLM } from "../../src/models/causal-lm.js";
import { ComlrlTokenizer } from "../../src/models/tokenizer.js";

/** openai-community/gpt2's config.json with n_embd 32, n_head 4, n_layer 2, 128 positions and the given vocabulary. */
export function hubGpt2Config(vocabSize: number, eosTokenId: number, dropout = { attn_pdrop: 0.1, resid_pdrop: 0.1, embd_pdrop: 0.1 }): Record<string, unknown> {
  return {
    activation_function: "gelu_new",
    architectures: ["GPT2LMHeadModel"],
    ...dropout,
    bos_token_id: eosTokenId,
    eos_token_id: eosTokenId,
    initializer_range: 0.02,
    layer_norm_epsilon: 1e-5,
    model_type: "gpt2",
    n_ctx: 128,
    n_embd: 32,
    n_head: 4,
    n_layer: 2,
    n_positions: 128,
    summary_activation: null,
    summary_first_dropout: 0.1,
    summary_proj_to_labels: true,
    summary_type: "cls_index",
    summary_use_proj: true,
    task_specific_params: { "text-generation": { do_sample: true, max_length: 50 } },
    vocab_size: vocabSize,
  };
}

/** Writes the tiny Hub-format GPT-2 (random weights from seed) at dir and returns its tokenizer. */
export async function createHubGpt2(dir: string, options: { seed?: number; dropout?: Parameters<typeof hubGpt2Config>[2] } = {}): Promise<ComlrlTokenizer> {
  const files = buildByteLevelBpeTokenizer({ vocabSize: 300 });
  const tokenizer = ComlrlTokenizer.fromJson({ tokenizerJson: files.tokenizerJson, tokenizerConfig: files.tokenizerConfig, source: dir });
  const model = CausalLM.create(hubGpt2Config(tokenizer.vocabSize, tokenizer.eosTokenIds[0], options.dropout), { seed: options.seed ?? 0 });
  try {
    await model.save(dir, { tokenizer });
  } finally {
    model.dispose();
  }
  return ComlrlTokenizer.fromDirectory(dir);
}
