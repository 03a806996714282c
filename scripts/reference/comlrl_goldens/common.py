"""The tiny model, its tokenizer and the recorders every golden uses; the MAGRPO rows shared by several goldens."""

import os

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
OUT = os.path.join(ROOT, "tests", "golden", "comlrl")
MODEL = os.path.join(OUT, "model")
EOS = 0  # <|endoftext|>: eos and pad, as in Qwen checkpoints, so CoMLRL's pad == eos accounting shows


torch.set_num_threads(1)


def make_model() -> None:
    """A 300-token byte-level BPE tokenizer and a 1-layer Qwen2 (hidden 16, GQA 2/1, tied embeddings)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(["the red fox ran over the lazy dog", "once upon a time there was a cat"], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.save_pretrained(MODEL)
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=tok.get_vocab_size(), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64, tie_word_embeddings=True,
        eos_token_id=EOS, pad_token_id=EOS, bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    # Weights larger than the 0.02 init so log-probs (and so the gradients) vary across tokens.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0, 0.3)
    model.save_pretrained(MODEL)


def load_model():
    return Qwen2ForCausalLM.from_pretrained(MODEL, dtype=torch.float32)


def tokenizer():
    return PreTrainedTokenizerFast.from_pretrained(MODEL)


def params(model, prefix: str, tensors: dict) -> None:
    for name, p in model.state_dict().items():
        tensors[f"{prefix}.{name}"] = p.detach().float().clone().contiguous()


def watch_grad_norms(optimizer, into: list) -> None:
    """Records the total gradient norm each time optimizer.step() is called (no clipping: CoMLRL has none)."""
    step = optimizer.step

    def recorded(*args, **kwargs):
        grads = [p.grad.detach().flatten() for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        into.append(float(torch.cat(grads).norm()))
        return step(*args, **kwargs)

    optimizer.step = recorded


def record_backward(into: list):
    """Patches Tensor.backward to record each loss a trainer backwards; returns the undo."""
    backward = torch.Tensor.backward

    def recorded(tensor, *a, **k):
        into.append(float(tensor.detach()))
        return backward(tensor, *a, **k)

    torch.Tensor.backward = recorded
    return lambda: setattr(torch.Tensor, "backward", backward)


# Two nodes, K = 3 completions each, padded to the node's width with EOS as HF generate returns them. A row ends
# at its first EOS, or runs to max_new_tokens (width) without one.
PROMPTS = [[14, 120, 33, 201], [57, 9, 260, 88, 140]]
ROWS = [
    [[40, 41, 42, EOS, EOS, EOS], [50, 51, 52, 53, 54, 55], [60, EOS, EOS, EOS, EOS, EOS]],
    [[70, 71, EOS, EOS], [80, 81, 82, 83], [90, 91, 92, EOS]],
]
RETURNS = [[1.0, 0.25, -0.5], [0.0, 2.0, 0.5]]


def natural(row):
    """The tokens a completion consists of: up to and including its first EOS."""
    return row[: row.index(EOS) + 1] if EOS in row else list(row)


# Every row ends with EOS, the longest at its last position: CoMLRL's row[:-1] drops those EOS tokens (tokenAccounting
# "comlrl" must too) and scores the shorter rows' EOS and pads.
ROWS_EOS_ENDED = [
    [[40, 41, EOS], [50, EOS, EOS], [60, 61, EOS]],
    [[70, 71, 72, EOS], [80, EOS, EOS, EOS], [90, 91, EOS, EOS]],
]
