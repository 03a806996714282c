#!/usr/bin/env python3
"""Golden reference outputs for every model family the native decoder runs, made by transformers 5.x itself.

For each family: a tiny random checkpoint written by `save_pretrained()` (config.json in transformers 5's own layout:
`rope_parameters`, `dtype`, `layer_types`) and the reference values the golden tests compare against, in the format
tests/golden/transformers446/README.md describes (golden.json + golden.safetensors). Eager attention, float32 and float64,
one thread, fixed seeds. Run with the project's reference venv (CI never runs this; it checks the committed files):

    /work/venv/bin/python scripts/golden/make_family_goldens.py [family ...]

Models are deliberately smaller than the four 4.46 goldens (hidden 32, intermediate 32, vocab 64, 12 tokens) so that every family's
files stay a few hundred KB.
"""
import json
import math
import os
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden")
VOCAB, LENGTH, LENGTHS_RIGHT, NEW_TOKENS = 64, 12, (12, 8, 5), 12
SHAPE = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=128, initializer_range=0.1, pad_token_id=0, bos_token_id=1,
             eos_token_id=2)

# GPT-2 names the same shape its own way (and has no kv heads); 32 positions cover the longest generated sequence.
GELU_INIT = 0.5
GPT2_SHAPE = dict(vocab_size=VOCAB, n_embd=32, n_inner=32, n_layer=2, n_head=4, n_positions=32, initializer_range=0.1,
                  pad_token_id=0, bos_token_id=1, eos_token_id=2)

# family -> (config class, model class, config fields beyond the shape[, the shape if not SHAPE]). Each family's
# fields are the ones that select a decoder part, set so that the part changes the numbers (windows shorter than the
# sequence, scaling that moves frequencies at these positions).
FAMILIES = {
    # The defect of issue 20: transformers 5 writes rope_theta inside rope_parameters.
    "qwen2_t5_theta1e6": ("Qwen2Config", "Qwen2ForCausalLM", dict(rope_parameters={"rope_type": "default", "rope_theta": 1e6})),
    "llama3": ("LlamaConfig", "LlamaForCausalLM", dict(
        head_dim=16, tie_word_embeddings=True,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64})),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(sliding_window=5)),
    "qwen2_sliding": ("Qwen2Config", "Qwen2ForCausalLM", dict(
        use_sliding_window=True, sliding_window=5, max_window_layers=1, num_hidden_layers=3,
        rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 32})),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(
        head_dim=8, sliding_window=5, query_pre_attn_scalar=12, attn_logit_softcapping=5.0, final_logit_softcapping=3.0,
        hidden_activation="gelu_pytorch_tanh")),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        head_dim=8, sliding_window=5, query_pre_attn_scalar=8, num_hidden_layers=3, sliding_window_pattern=2,
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e6},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(partial_rotary_factor=0.5, tie_word_embeddings=False)),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", dict()),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", dict(num_hidden_layers=4, no_rope_layer_interval=2,
                                                             tie_word_embeddings=True)),
    # Sparse MoE: top-2 of 4 experts; Qwen3-MoE with one dense layer (mlp_only_layers) and unnormalised top-k.
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", dict(
        head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, mlp_only_layers=[1],
        norm_topk_prob=False)),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(intermediate_size=16, num_local_experts=4,
                                                           num_experts_per_tok=2, sliding_window=5)),
    # Learned positions, LayerNorm, Conv1D weights, gelu_new; dropout off (ours runs none, so a file must say 0).
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(activation_function="gelu_new", attn_pdrop=0.0, resid_pdrop=0.0,
                                                   embd_pdrop=0.0), GPT2_SHAPE),
    # Exact (erf) GELU. Larger weights than the shape's, so that the MLP's inputs reach where erf and tanh GELU part
    # (their gap is at most ~5e-4, near |x| = 2) and the tanh form fails the logits tolerance.
    "gpt2_gelu": ("GPT2Config", "GPT2LMHeadModel", dict(activation_function="gelu", attn_pdrop=0.0, resid_pdrop=0.0,
                                                        embd_pdrop=0.0), {**GPT2_SHAPE, "initializer_range": GELU_INIT}),
}

# The MoE families with output_router_logits, where transformers adds router_aux_loss_coef × load_balancing_loss_func
# to the loss of a forward given labels: the base family's weights (its seed from its golden.json), config.json with
# the two fields, the loss, the aux loss and every gradient of the total, full and right-padded. The test borrows the
# base family's model.safetensors. A large coefficient, so that the router term moves the gradients far beyond the
# tolerance (golden.json's router_term_grad_effect_*: the largest change it makes, relative to each gradient's norm).
ROUTER_AUX = {"qwen3_moe_aux": "qwen3_moe", "mixtral_aux": "mixtral"}
ROUTER_AUX_COEF = 0.5

# transformers 5 keeps each layer's experts as two stacked parameters and writes them per expert on save; the
# golden tensors use the checkpoint's (and our) per-expert names. Mixtral's checkpoints call them w1 / w3 / w2.
EXPERT_NAMES = {"qwen3_moe": ("mlp", "gate_proj", "up_proj", "down_proj"),
                "mixtral": ("block_sparse_moe", "w1", "w3", "w2")}


def checkpoint_names(family, named):
    """(name, tensor) pairs of model.named_parameters() form → the checkpoint's names and per-expert tensors."""
    if family not in EXPERT_NAMES:
        return dict(named)
    block, gate, up, down = EXPERT_NAMES[family]
    out = {}
    for name, tensor in named:
        prefix = name.replace(".mlp.", f".{block}.").rsplit(".experts.", 1)[0]
        if name.endswith("experts.gate_up_proj"):
            for e, both in enumerate(tensor):
                g, u = both.chunk(2, dim=0)
                out[f"{prefix}.experts.{e}.{gate}.weight"] = g
                out[f"{prefix}.experts.{e}.{up}.weight"] = u
        elif name.endswith("experts.down_proj"):
            for e, d in enumerate(tensor):
                out[f"{prefix}.experts.{e}.{down}.weight"] = d
        else:
            out[name.replace(".mlp.gate.", f".{block}.gate.")] = tensor
    return out


def build(family, seed, **extra):
    config_name, model_name, fields, *shape = FAMILIES[family]
    config = getattr(transformers, config_name)(**{**(shape[0] if shape else SHAPE), **fields, **extra})
    config._attn_implementation = "eager"
    config._experts_implementation = "eager"  # the reference loop; grouped_mm has no float64
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).eval()
    # Large biases and norm weights far from their init, so that a missing bias or a wrong norm form shows.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name or ".ln_" in name or name.endswith(".bias"):
                param.add_(torch.randn_like(param) * 0.1)
    return model


def inputs():
    g = torch.Generator().manual_seed(1)
    full = torch.randint(3, VOCAB, (3, LENGTH), generator=g)
    right_mask = torch.zeros(3, LENGTH, dtype=torch.long)
    left_mask = torch.zeros(3, LENGTH, dtype=torch.long)
    for b, n in enumerate(LENGTHS_RIGHT):
        right_mask[b, :n] = 1
        left_mask[b, LENGTH - n:] = 1
    right = full * right_mask
    left = torch.zeros_like(full)
    for b, n in enumerate(LENGTHS_RIGHT):
        left[b, LENGTH - n:] = full[b, :n]
    left_pos = (left_mask.cumsum(-1) - 1).masked_fill(left_mask == 0, 1)
    return dict(full_ids=full, right_ids=right, right_mask=right_mask, left_ids=left, left_mask=left_mask,
                left_position_ids=left_pos)


def token_logprobs(logits, ids, mask=None):
    lp = torch.log_softmax(logits[:, :-1].double(), -1).gather(-1, ids[:, 1:, None])[..., 0]
    return lp if mask is None else lp * mask[:, 1:]


def loss_of(model, ids, mask=None):
    labels = ids.clone() if mask is None else ids.masked_fill(mask == 0, -100)
    return model(input_ids=ids, attention_mask=mask, labels=labels).loss


def generation(model, x):
    """Greedy paths and their smallest top-1 − top-2 margin."""
    t = {}
    settings = dict(max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None, pad_token_id=0,
                    output_logits=True, return_dict_in_generate=True)
    margins = []
    prompts = [x["full_ids"][0, :5], x["full_ids"][1, :3]]
    with torch.no_grad():
        for i, p in enumerate(prompts):
            g = model.generate(input_ids=p[None], attention_mask=torch.ones(1, len(p), dtype=torch.long), **settings)
            t[f"gen.prompt{i}"] = p
            t[f"gen.prompt{i}.new_tokens"] = g.sequences[0, len(p):]
            t[f"gen.prompt{i}.scores"] = torch.stack(g.logits, 1)[0]
            margins += [s.topk(2, -1).values.diff().abs().min().item() for s in g.logits]
        width = max(len(p) for p in prompts)
        ids = torch.zeros(2, width, dtype=torch.long)
        mask = torch.zeros(2, width, dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = p
            mask[i, width - len(p):] = 1
        g = model.generate(input_ids=ids, attention_mask=mask, **settings)
        t["gen.batch_left.new_tokens"] = g.sequences[:, width:]
        t["gen.batch_left.scores"] = torch.stack(g.logits, 1)
        margins += [s.topk(2, -1).values.diff().abs().min().item() for s in g.logits]
    return t, min(margins)


def gpt2_hub_variant(model, x):
    """The tiny GPT-2 as the hub's gpt2 stores itself: float16, saved from the base model (no "transformer." prefix),
    with the causal-mask buffers attn.bias / attn.masked_bias, and config.json's 4.x torch_dtype. Reference: what
    transformers computes after loading it in float32."""
    out = os.path.join(OUT, "gpt2_hub")
    os.makedirs(out, exist_ok=True)
    n = model.config.n_positions
    tensors = {k.removeprefix("transformer."): v.detach().half().contiguous() for k, v in model.state_dict().items()}
    for i in range(model.config.n_layer):
        tensors[f"h.{i}.attn.bias"] = torch.tril(torch.ones(n, n, dtype=torch.bool)).view(1, 1, n, n)
        tensors[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4, dtype=torch.float16)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("dtype", None)
    config["torch_dtype"] = "float16"
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    loaded = transformers.GPT2LMHeadModel.from_pretrained(out, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        t = {"input.full_ids": x["full_ids"], "logits.full": loaded(input_ids=x["full_ids"]).logits}
        meta = {"transformers_version": transformers.__version__, "torch_version": torch.__version__,
                "loss_full": loss_of(loaded, x["full_ids"]).item()}
    save_file({k: v.contiguous() for k, v in t.items()}, os.path.join(out, "golden.safetensors"))
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(meta, f, indent=1)


def phi3_longrope_variant(x):
    """phi3's weights under longrope scaling (short factors below original_max_position_embeddings, an attention
    factor of √(1 + ln 8 / ln 16)): config.json and the logits only; the test borrows phi3/model.safetensors."""
    out = os.path.join(OUT, "phi3_longrope")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(OUT, "phi3", "config.json")) as f:
        raw = json.load(f)
    raw["original_max_position_embeddings"] = 16
    raw["rope_parameters"] = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                              "short_factor": [1.3, 2.0], "long_factor": [4.0, 8.0]}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(raw, f, indent=2)
    model = transformers.Phi3ForCausalLM.from_pretrained(os.path.join(OUT, "phi3"), config=transformers.Phi3Config.from_pretrained(out),
                                                         attn_implementation="eager").eval()
    with torch.no_grad():
        t = {"input.full_ids": x["full_ids"], "logits.full": model(input_ids=x["full_ids"]).logits}
    save_file({k: v.contiguous() for k, v in t.items()}, os.path.join(out, "golden.safetensors"))
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump({"transformers_version": transformers.__version__, "torch_version": torch.__version__}, f, indent=1)


def router_aux_variant(name, x):
    family = ROUTER_AUX[name]
    base = os.path.join(OUT, family)
    with open(os.path.join(base, "golden.json")) as f:
        seed = json.load(f)["seed"]
    model = build(family, seed, output_router_logits=True, router_aux_loss_coef=ROUTER_AUX_COEF)
    saved = load_file(os.path.join(base, "model.safetensors"))
    weights = checkpoint_names(family, [(n, p.detach()) for n, p in model.named_parameters()])
    assert weights.keys() == saved.keys() and all(torch.equal(saved[k], w) for k, w in weights.items()), f"{name}: not {family}'s weights"
    base_golden = load_file(os.path.join(base, "golden.safetensors"))
    out = os.path.join(OUT, name)
    os.makedirs(out, exist_ok=True)
    model.config.save_pretrained(out)
    t = {f"input.{k}": x[k] for k in ("full_ids", "right_ids", "right_mask")}
    meta = {"transformers_version": transformers.__version__, "torch_version": torch.__version__, "family": family,
            "seed": seed, "router_aux_loss_coef": ROUTER_AUX_COEF}
    for kind, mask in (("full", None), ("right", x["right_mask"])):
        ids = x[f"{kind}_ids"]
        model.zero_grad()
        result = model(input_ids=ids, attention_mask=mask, labels=ids.clone() if mask is None else ids.masked_fill(mask == 0, -100))
        result.loss.backward()
        meta[f"loss_{kind}"] = result.loss.item()
        meta[f"aux_loss_{kind}"] = result.aux_loss.item()
        grads = checkpoint_names(family, [(n, p.grad.clone()) for n, p in model.named_parameters()])
        meta[f"grad_norm_{kind}"] = {n: g.norm().item() for n, g in grads.items()}
        meta[f"router_term_grad_effect_{kind}"] = max(
            ((g - base_golden[f"grad.{kind}.{n}"]).abs().max() / g.norm().clamp_min(1e-6)).item() for n, g in grads.items())
        for n, g in grads.items():
            t[f"grad.{kind}.{n}"] = g
    tensors = {k: v.detach().clone().contiguous() for k, v in t.items()}
    save_file(tensors, os.path.join(out, "golden.safetensors"))
    meta["tensors"] = {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in tensors.items()}
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{name}: aux {meta['aux_loss_full']:.6f} / {meta['aux_loss_right']:.6f}, router term moves gradients by up to "
          f"{meta['router_term_grad_effect_full']:.2e} / {meta['router_term_grad_effect_right']:.2e} of their norms")


def main(families):
    torch.set_num_threads(1)
    x = inputs()
    for family in families:
        if family in ROUTER_AUX:
            router_aux_variant(family, x)
            continue
        # The first weight seed whose greedy paths have top-1 − top-2 margins far above fp32 noise, so that
        # generated tokens can be compared exactly.
        for seed in range(20):
            model = build(family, seed)
            gen, margin = generation(model, x)
            if margin > 2e-3:
                break
        else:
            raise SystemExit(f"{family}: no seed gives greedy margins above 2e-3")
        out = os.path.join(OUT, family)
        os.makedirs(out, exist_ok=True)
        model.save_pretrained(out)
        t = {f"input.{k}": v for k, v in x.items()}
        t.update(gen)
        meta = {"transformers_version": transformers.__version__, "torch_version": torch.__version__, "family": family,
                "seed": seed, "gen_min_top2_margin": margin}
        with torch.no_grad():
            full = model(input_ids=x["full_ids"], output_hidden_states=True)
            t["logits.full"] = full.logits
            for i, h in enumerate(full.hidden_states):
                t[f"hidden.full.{i}"] = h
            right = model(input_ids=x["right_ids"], attention_mask=x["right_mask"]).logits
            t["logits.right"] = right
            t["logits.left"] = model(input_ids=x["left_ids"], attention_mask=x["left_mask"],
                                     position_ids=x["left_position_ids"]).logits
            t["logits.left_default_pos"] = model(input_ids=x["left_ids"], attention_mask=x["left_mask"]).logits
            t["logprobs.full"] = token_logprobs(full.logits, x["full_ids"]).float()
            t["logprobs.right"] = token_logprobs(right, x["right_ids"], x["right_mask"]).float()
            meta["logprob_sum_full"] = token_logprobs(full.logits, x["full_ids"]).sum(-1).tolist()
            meta["logprob_sum_right"] = token_logprobs(right, x["right_ids"], x["right_mask"]).sum(-1).tolist()
            double = build(family, seed).double()
            t["logits64.full"] = double(input_ids=x["full_ids"]).logits
            t["logits64.right"] = double(input_ids=x["right_ids"], attention_mask=x["right_mask"]).logits
            meta["fp32_vs_fp64_logits_max_abs"] = (t["logits64.full"] - full.logits.double()).abs().max().item()

        for kind, mask in (("full", None), ("right", x["right_mask"])):
            model.zero_grad()
            loss = loss_of(model, x[f"{kind}_ids"], mask)
            loss.backward()
            meta[f"loss_{kind}"] = loss.item()
            grads = checkpoint_names(family, [(n, p.grad.clone()) for n, p in model.named_parameters()])
            meta[f"grad_norm_{kind}"] = {n: g.norm().item() for n, g in grads.items()}
            for n, g in grads.items():
                t[f"grad.{kind}.{n}"] = g

        meta["adamw"] = dict(lr=1e-2, betas=[0.9, 0.999], eps=1e-8, weight_decay=0.01)
        model.zero_grad()
        loss_of(model, x["full_ids"]).backward()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
        opt.step()
        for n, p in checkpoint_names(family, [(n, p.detach().clone()) for n, p in model.named_parameters()]).items():
            t[f"adamw_step1.{n}"] = p
        with torch.no_grad():
            meta["loss_full_after_adamw_step1"] = loss_of(model, x["full_ids"]).item()

        tensors = {k: v.detach().clone().contiguous() for k, v in t.items()}
        save_file(tensors, os.path.join(out, "golden.safetensors"))
        meta["tensors"] = {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in tensors.items()}
        with open(os.path.join(out, "golden.json"), "w") as f:
            json.dump(meta, f, indent=1)
        if family == "gpt2":
            gpt2_hub_variant(build(family, seed), x)
        if family == "phi3":
            phi3_longrope_variant(x)
        size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
        print(f"{family}: seed {seed}, fp32-fp64 {meta['fp32_vs_fp64_logits_max_abs']:.2e}, margin {margin:.3g}, {size // 1024} KB")


if __name__ == "__main__":
    main(sys.argv[1:] or [*FAMILIES, *ROUTER_AUX])
