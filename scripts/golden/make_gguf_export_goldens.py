"""Goldens for comlrl's GGUF writer (src/models/gguf/), made by the `gguf` Python package that llama.cpp ships.

Writes tests/golden/gguf_export/:
  values.f32      float32 inputs: random normals at several scales plus edge cases (ties, subnormals, overflow)
  f16.bin         numpy's float32 -> float16 cast of values.f32
  bf16.bin        gguf.quants.quantize(values, BF16)
  q8_0.bin        gguf.quants.quantize(values, Q8_0) (blocks of 32 along each row of 32-value rows)
  permuted.f32    convert_hf_to_gguf.py's LlamaModel.permute of a [heads*head_dim, cols] matrix (q and k layouts)
  writer.gguf     a file GGUFWriter writes from the metadata and tensors in writer.json's description
  writer.json     that description, for the test to write the same file with writeGguf

Run: /work/venv/bin/python scripts/golden/make_gguf_export_goldens.py
"""
import json
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

OUT = Path(__file__).resolve().parents[2] / "tests" / "golden" / "gguf_export"
OUT.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(42)

# Edge cases: f16 rounding ties (1 + 2^-11 lies halfway), subnormals, values past f16's range, signed zeros, a block
# of zeros (Q8_0 scale 0), a block whose x/d lands on .5 ties.
edges = np.array(
    [0.0, -0.0, 1.0, -1.0, 1 + 2**-11, 1 + 3 * 2**-11, 65504.0, 65520.0, 70000.0, -70000.0, 2**-24, 2**-25, 3 * 2**-26,
     2**-14, 2**-15 * 1.5, 1e-8, 1 + 2**-8, 1 + 3 * 2**-8, 3.14159265, -2.71828182, 1e30, -1e-30, 0.1, 0.2, 0.3, 0.5,
     1.5, 2.5, 100.0, -100.0, 12345.678, 7.0],
    dtype=np.float32,
)
zeros = np.zeros(32, dtype=np.float32)
ties = (np.arange(32, dtype=np.float32) - 16) * np.float32(0.5) * np.float32(127 / 15.5)
values = np.concatenate([
    edges, zeros, ties,
    rng.normal(0, 0.02, 32 * 40).astype(np.float32),
    rng.normal(0, 1, 32 * 20).astype(np.float32),
    rng.normal(0, 300, 32 * 4).astype(np.float32),
]).astype(np.float32)
values.tofile(OUT / "values.f32")
values.astype(np.float16).tofile(OUT / "f16.bin")
gguf.quants.quantize(values.reshape(-1, 32), Q.BF16).tofile(OUT / "bf16.bin")
gguf.quants.quantize(values.reshape(-1, 32), Q.Q8_0).tofile(OUT / "q8_0.bin")


def permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py LlamaModel.permute (n_head already the kv head count for k)."""
    return weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


matrix = np.arange(6 * 8 * 5, dtype=np.float32).reshape(6 * 8, 5)  # 6 heads of width 8, 5 columns
permute(matrix, 6).tofile(OUT / "permuted.f32")

# A small file with every metadata value type the exporter writes and one tensor of each ggml type.
description = {
    "architecture": "llama",
    "metadata": [
        ["general.name", "string", "tiny golden"],
        ["llama.block_count", "uint32", 2],
        ["llama.attention.layer_norm_rms_epsilon", "float32", 1e-6],
        ["tokenizer.ggml.add_bos_token", "bool", False],
        ["tokenizer.ggml.tokens", "string[]", ["a", "b", "Ġc", "<|im_end|>", "é"]],
        ["tokenizer.ggml.token_type", "int32[]", [1, 1, 1, 3, 1]],
    ],
    "tensors": [
        {"name": "output_norm.weight", "type": "F32", "shape": [64], "start": 0},
        {"name": "token_embd.weight", "type": "F16", "shape": [3, 64], "start": 64},
        {"name": "blk.0.attn_q.weight", "type": "BF16", "shape": [2, 32], "start": 256},
        {"name": "blk.0.attn_k.weight", "type": "Q8_0", "shape": [5, 64], "start": 320},
    ],
}
writer = gguf.GGUFWriter(OUT / "writer.gguf", description["architecture"])
for key, kind, value in description["metadata"]:
    if kind == "string":
        writer.add_string(key, value)
    elif kind == "uint32":
        writer.add_uint32(key, value)
    elif kind == "float32":
        writer.add_float32(key, value)
    elif kind == "bool":
        writer.add_bool(key, value)
    else:
        writer.add_array(key, value)
for tensor in description["tensors"]:
    shape = tensor["shape"]
    data = values[tensor["start"]: tensor["start"] + int(np.prod(shape))].reshape(shape)
    if tensor["type"] == "F32":
        writer.add_tensor(tensor["name"], data)
    elif tensor["type"] == "F16":
        writer.add_tensor(tensor["name"], data.astype(np.float16))
    else:
        qtype = Q[tensor["type"]]
        writer.add_tensor(tensor["name"], gguf.quants.quantize(data, qtype), raw_dtype=qtype)
writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()
(OUT / "writer.json").write_text(json.dumps(description, indent=2) + "\n")
print("wrote", sorted(p.name for p in OUT.iterdir()))
