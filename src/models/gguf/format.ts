// The GGUF container as llama.cpp defines it (ggml/include/gguf.h, ggml.h; the `gguf` Python package's constants.py):
// the magic and version the writer puts first, the metadata value types, the tensor types it writes, and the
// default alignment of the tensor data, and the tensor names llama.cpp gives a decoder's weights. The writer and the reader
// (read.ts) share them.

/** "GGUF" as the first four bytes of the file. */
export const GGUF_MAGIC = Buffer.from("GGUF", "ascii");
/** The format version written (llama.cpp reads 2 and 3; 3 is current). */
export const GGUF_VERSION = 3;
/** Tensor data starts, and every tensor's data begins, on a multiple of this many bytes (general.alignment's default). */
export const GGUF_DEFAULT_ALIGNMENT = 32;

/** The metadata value type tags (gguf_type) the writer uses. */
export const GgufValueType = { UINT32: 4, INT32: 5, FLOAT32: 6, BOOL: 7, STRING: 8, ARRAY: 9, UINT64: 10 } as const;

/** The ggml tensor types the writer produces, with their ggml_type numbers. */
export const GgmlType = { F32: 0, F16: 1, Q8_0: 8, BF16: 30 } as const;
export type GgmlTypeName = keyof typeof GgmlType;

/** Elements per Q8_0 block: one f16 scale then 32 signed bytes. */
export const Q8_0_BLOCK = 32;
/** Bytes of one Q8_0 block. */
export const Q8_0_BLOCK_BYTES = 2 + Q8_0_BLOCK;

/** general.file_type values (llama_ftype): the type most of the file's weights have. */
export const LlamaFileType = { MOSTLY_F16: 1, MOSTLY_Q8_0: 7, MOSTLY_BF16: 32 } as const;

/** general.quantization_version as llama.cpp's quantizer and convert_hf_to_gguf.py write it. */
export const GGML_QUANTIZATION_VERSION = 2;

/** The tokenizer.ggml.token_type values (llama_token_type) the exporter writes and the reader takes added tokens from. */
export const GgufTokenType = { NORMAL: 1, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5 } as const;

/**
 * llama.cpp's names for a decoder layer's tensors (gguf-py's constants.py TENSOR_NAMES) and transformers' module for
 * each, where every family agrees; `ffn_norm`, `ffn_up` and the fused or extra norms differ per family.
 */
export const GGUF_LAYER_MODULES: Readonly<Record<string, string>> = {
  attn_norm: "input_layernorm",
  attn_q: "self_attn.q_proj",
  attn_k: "self_attn.k_proj",
  attn_v: "self_attn.v_proj",
  attn_output: "self_attn.o_proj",
  attn_q_norm: "self_attn.q_norm",
  attn_k_norm: "self_attn.k_norm",
  ffn_gate: "mlp.gate_proj",
  ffn_down: "mlp.down_proj",
};

/** llama.cpp's names for the tensors outside the layers, and transformers' for the same weights. */
export const GGUF_GLOBAL_TENSORS: Readonly<Record<string, string>> = {
  "token_embd.weight": "model.embed_tokens.weight",
  "output_norm.weight": "model.norm.weight",
  "output.weight": "lm_head.weight",
};
