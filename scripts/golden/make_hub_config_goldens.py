#!/usr/bin/env python3
"""What transformers makes of each real Hub config.json in tests/fixtures/hub-configs: tests/golden/hub-configs.json.

For every fixture directory: whether AutoConfig.from_pretrained() loads it (and its error if not), and for those that
load, the numbers comlrl's parser must agree with: the shape, the layer kinds with each layer's attention window, and
each rotary table transformers' own <Family>RotaryEmbedding computes at init (inverse frequencies, float32, and the
attention scaling). Nothing is downloaded and no weights exist: the config alone builds the rotary module.

    /work/venv/bin/python scripts/golden/make_hub_config_goldens.py
"""
import importlib
import json
import os

import torch
import transformers
from transformers import AutoConfig

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "hub-configs")
OUT = os.path.join(ROOT, "tests", "golden", "hub-configs.json")


def rotary_tables(config):
    """The rotary embedding module of the config's family, built from the config: one table per layer kind it uses."""
    prefix = type(config).__name__.removesuffix("TextConfig").removesuffix("Config")
    module = importlib.import_module(type(config).__module__.replace(".configuration_", ".modeling_"))
    rotary_class = getattr(module, f"{prefix}RotaryEmbedding", None)
    if rotary_class is None:
        return {}
    rotary = rotary_class(config=config)
    return {"all": {"inv_freq": rotary.inv_freq.tolist(), "attention_scaling": float(rotary.attention_scaling)}}


def windows(config):
    """Each layer's attention window (0: full), as the family's attention and mask code picks it: from layer_types where
    the config has them, else config.sliding_window on every layer (Mistral, Mixtral, Phi-3)."""
    window = getattr(config, "sliding_window", None) or 0
    kinds = getattr(config, "layer_types", None)
    if kinds:
        return [window if kind == "sliding_attention" else 0 for kind in kinds]
    return [window] * config.num_hidden_layers


def main():
    torch.set_grad_enabled(False)
    golden = {"transformers": transformers.__version__, "configs": {}}
    for name in sorted(os.listdir(FIXTURES)):
        path = os.path.join(FIXTURES, name)
        if not os.path.isdir(path):
            continue
        try:
            config = AutoConfig.from_pretrained(path, trust_remote_code=False)
        except Exception as error:  # noqa: BLE001 - the refusal itself is the record
            golden["configs"][name] = {"loads": False, "error": f"{type(error).__name__}: {error}"[:300]}
            continue
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        golden["configs"][name] = {
            "loads": True,
            "model_type": config.model_type,
            "num_hidden_layers": config.num_hidden_layers,
            "hidden_size": config.hidden_size,
            "num_attention_heads": config.num_attention_heads,
            "num_key_value_heads": getattr(config, "num_key_value_heads", config.num_attention_heads),
            "head_dim": head_dim,
            "vocab_size": config.vocab_size,
            "tie_word_embeddings": config.tie_word_embeddings,
            "windows": windows(config),
            "rope": rotary_tables(config),
        }
    with open(OUT, "w") as f:
        json.dump(golden, f, indent=1, sort_keys=True)
        f.write("\n")
    for name, entry in golden["configs"].items():
        print(name, "loads" if entry["loads"] else entry["error"][:100])


if __name__ == "__main__":
    main()
