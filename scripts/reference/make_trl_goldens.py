"""Goldens from TRL's own GRPOTrainer loss for tests/golden/trl.test.ts (docs/objectives.md).

Calls the installed TRL's `GRPOTrainer._compute_loss` itself, on a trainer object that holds only the attributes that
method reads (set from a real `GRPOConfig`, as `GRPOTrainer.__init__` sets them):
- tensors.json: for every loss type × importance-sampling level × case, fixed per-token log-probs (a leaf that
  requires grad, fed through a replaced `_get_per_token_logps_and_entropies`), old and reference log-probs,
  entropies, advantages and ragged completion masks, with TRL's loss, the gradients with respect to the log-probs and
  the entropies, and the metrics it logs;
- model_step.json + model_step.safetensors: one whole loss of a tiny Qwen2 (tests/golden/comlrl/model) through the
  unreplaced `_compute_loss`, which runs the model, with the loss and every parameter's gradient.

    python -m venv /tmp/trl && /tmp/trl/bin/pip install -r scripts/reference/requirements-trl.txt
    /tmp/trl/bin/python scripts/reference/make_trl_goldens.py
"""

import contextlib
import json
import os
import tempfile
from collections import defaultdict
from types import SimpleNamespace

import torch
import transformers
import trl
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM
from trl import GRPOConfig, GRPOTrainer
from trl.trainer import add_fused_lm_head

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "golden", "trl")
MODEL = os.path.join(ROOT, "tests", "golden", "comlrl", "model")

LOSS_TYPES = ["grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo"]
LEVELS = ["token", "sequence"]
ROW_LENGTHS = [7, 3, 5, 1, 6, 4]
MAX_COMPLETION_LENGTH = 8

torch.set_num_threads(1)


class SingleProcessAccelerator:
    """What `_compute_loss` asks of accelerate's Accelerator in a one-process run."""

    num_processes = 1
    sync_gradients = True
    is_main_process = True

    def gather(self, tensor):
        return tensor

    gather_for_metrics = gather

    def reduce(self, tensor, reduction="sum"):
        return tensor

    def autocast(self):
        return contextlib.nullcontext()


def trainer_for(args: GRPOConfig, model=None) -> GRPOTrainer:
    """A GRPOTrainer without __init__: the attributes `_compute_loss` reads, from args as __init__ derives them."""
    trainer = GRPOTrainer.__new__(GRPOTrainer)
    trainer.args = args
    trainer.loss_type = args.loss_type
    trainer.importance_sampling_level = args.importance_sampling_level
    trainer.off_policy_mask_threshold = args.off_policy_mask_threshold
    trainer.top_entropy_quantile = args.top_entropy_quantile
    trainer.max_completion_length = args.max_completion_length
    trainer.temperature = args.temperature
    trainer.epsilon_low = args.epsilon
    trainer.epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
    trainer.beta = args.beta
    trainer.use_vllm = args.use_vllm
    trainer.vllm_importance_sampling_correction = args.vllm_importance_sampling_correction
    trainer.use_liger_kernel = False
    trainer.aux_loss_enabled = False
    trainer.entropy_coef = args.entropy_coef
    trainer.use_adaptive_entropy = args.use_adaptive_entropy
    trainer._entropy_bonus_enabled = args.entropy_coef != 0.0 or args.use_adaptive_entropy
    trainer._last_world_entropy = float("inf")
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    trainer.current_gradient_accumulation_steps = 1
    trainer.accelerator = SingleProcessAccelerator()
    trainer.model = model if model is not None else SimpleNamespace(training=True)
    return trainer


def config(**fields) -> GRPOConfig:
    return GRPOConfig(
        output_dir=tempfile.mkdtemp(),
        report_to=[],
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=len(ROW_LENGTHS),
        num_generations=2,
        steps_per_generation=1,
        gradient_accumulation_steps=1,
        max_completion_length=MAX_COMPLETION_LENGTH,
        **fields,
    )


def padded(values: torch.Tensor, lengths: list[int], fill: float) -> torch.Tensor:
    """[rows, max length] with each row's first `length` values from the flat tensor, `fill` after."""
    out = torch.full((len(lengths), max(lengths)), fill, dtype=values.dtype)
    offset = 0
    for row, length in enumerate(lengths):
        out[row, :length] = values[offset : offset + length]
        offset += length
    return out


def flat(values: torch.Tensor, lengths: list[int]) -> list[float]:
    return [float(v) for row, length in enumerate(lengths) for v in values[row, :length]]


def fixed_inputs():
    generator = torch.Generator().manual_seed(33)
    tokens = sum(ROW_LENGTHS)
    logprobs = torch.log(torch.rand(tokens, generator=generator) * 0.9 + 0.05)
    return {
        "logprobs": logprobs,
        # The rollout's log-probs, off by up to ±0.45 so that ratios leave [1 − ε, 1 + ε_high] in both directions.
        "old": logprobs + (torch.rand(tokens, generator=generator) - 0.5) * 0.9,
        "ref": logprobs + (torch.rand(tokens, generator=generator) - 0.5) * 0.6,
        "entropies": torch.rand(tokens, generator=generator) * 2.0,
        "advantages": torch.tensor([1.2, -0.7, 0.4, -1.5, 0.0, 0.9]),
    }


# Each case: the GRPOConfig fields beyond the loss type and level, and what the inputs hold.
CASES = {
    # One update per rollout: no old log-probs (TRL uses per_token_logps.detach()), no KL, no entropy.
    "on_policy": {"fields": {}, "old": False, "truncated_row": None},
    # Multi-update ratios with clip-higher, the k3 KL in the loss, an entropy bonus, and one truncated completion
    # masked out (mask_truncated_completions zeroes its mask).
    "off_policy": {"fields": {"epsilon": 0.2, "epsilon_high": 0.28, "beta": 0.04, "entropy_coef": 0.01}, "old": True, "truncated_row": 2},
    # The KL without TRL's importance-weight correction of its gradient (use_bias_correction_kl=False).
    "plain_kl": {"fields": {"epsilon": 0.2, "beta": 0.1, "use_bias_correction_kl": False}, "old": True, "truncated_row": None},
    # Two-sided clipping of the unclipped ratio.
    "delta": {"fields": {"epsilon": 0.2, "delta": 1.25}, "old": True, "truncated_row": None},
}


def case_fields(loss_type: str, case: dict) -> dict:
    fields = dict(case["fields"])
    if loss_type == "cispo" and "epsilon_high" in fields:
        fields["epsilon_high"] = 1.3  # cispo caps the (detached) ratio itself at epsilon_high
    if loss_type in ("cispo", "sapo"):
        fields.pop("delta", None)  # delta only bounds the clipped-surrogate losses
    return fields


def tensor_golden(loss_type: str, level: str, name: str, case: dict) -> dict:
    fields = case_fields(loss_type, case)
    args = config(loss_type=loss_type, importance_sampling_level=level, **fields)
    inputs = fixed_inputs()
    lengths = ROW_LENGTHS
    mask = padded(torch.ones(sum(lengths)), lengths, 0.0)
    if case["truncated_row"] is not None:
        mask[case["truncated_row"]] = 0.0
    logprobs = padded(inputs["logprobs"], lengths, -1.0).requires_grad_(True)
    entropies = padded(inputs["entropies"], lengths, 0.5).requires_grad_(True)
    trainer = trainer_for(args)
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (logprobs, entropies, None)
    rows, width = mask.shape
    batch = {
        "prompt_ids": torch.zeros((rows, 1), dtype=torch.long),
        "prompt_mask": torch.ones((rows, 1), dtype=torch.long),
        "completion_ids": torch.zeros((rows, width), dtype=torch.long),
        "completion_mask": mask.long(),
        "advantages": inputs["advantages"],
        "num_items_in_batch": mask.sum(),
    }
    if case["old"]:
        batch["old_per_token_logps"] = padded(inputs["old"], lengths, -1.0)
    if args.beta != 0.0:
        batch["ref_per_token_logps"] = padded(inputs["ref"], lengths, -1.0)
    loss = trainer._compute_loss(None, batch)
    loss.backward()
    metrics = {key: values[-1] for key, values in trainer._metrics["train"].items()}
    return {
        "name": f"{loss_type}/{level}/{name}",
        "options": {
            "lossType": loss_type,
            "importanceSamplingLevel": level,
            "epsilon": args.epsilon,
            "epsilonHigh": trainer.epsilon_high,
            "delta": args.delta,
            "beta": args.beta,
            "klBiasCorrection": args.use_bias_correction_kl,
            "entropyCoef": args.entropy_coef,
            "maxCompletionLength": args.max_completion_length,
            "tokenNormalizer": float(batch["num_items_in_batch"]),
        },
        "inputs": {
            "rowLengths": lengths,
            "logprobs": flat(logprobs.detach(), lengths),
            "oldLogprobs": flat(batch["old_per_token_logps"], lengths) if case["old"] else None,
            "refLogprobs": flat(batch["ref_per_token_logps"], lengths) if args.beta != 0.0 else None,
            "entropies": flat(entropies.detach(), lengths),
            "tokenMask": flat(mask, lengths),
            "advantages": [float(a) for a in inputs["advantages"]],
        },
        "expected": {
            "loss": float(loss.detach()),
            "gradLogprobs": flat(logprobs.grad, lengths),
            "gradEntropies": flat(entropies.grad, lengths) if args.entropy_coef != 0.0 else None,
            "metrics": metrics,
        },
    }


def model_step_golden(loss_type: str, level: str) -> tuple[dict, dict]:
    """One loss of the tiny model through the whole `_compute_loss` (the model scores the completions)."""
    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32, attn_implementation="eager")
    model.train()
    args = config(loss_type=loss_type, importance_sampling_level=level, epsilon=0.2, epsilon_high=0.28, beta=0.04)
    # As GRPOTrainer.__init__ patches the policy: log-probs and entropies from a chunked LM head at the temperature.
    add_fused_lm_head(model, temperature=args.temperature, cast_lm_head_to_fp32=args.cast_lm_head_to_fp32, outputs=("log_probs", "entropy"))
    trainer = trainer_for(args, model)
    generator = torch.Generator().manual_seed(7)
    vocab = model.config.vocab_size
    # Two prompts of equal length (no left padding), two completions each, right-padded with mask 0.
    prompts = torch.randint(3, vocab, (2, 5), generator=generator).repeat_interleave(2, dim=0)
    lengths = [6, 3, 5, 4]
    completions = torch.randint(3, vocab, (4, max(lengths)), generator=generator)
    mask = padded(torch.ones(sum(lengths)), lengths, 0.0).long()
    completions = completions.masked_fill(mask == 0, 0)
    with torch.no_grad():
        current, _, _ = trainer._get_per_token_logps_and_entropies(
            model, torch.cat([prompts, completions], 1), torch.cat([torch.ones_like(prompts), mask], 1), completions.size(1)
        )
    old = current + (torch.rand(current.shape, generator=generator) - 0.5) * 0.6
    ref = current + (torch.rand(current.shape, generator=generator) - 0.5) * 0.4
    batch = {
        "prompt_ids": prompts,
        "prompt_mask": torch.ones_like(prompts),
        "completion_ids": completions,
        "completion_mask": mask,
        "advantages": torch.tensor([0.8, -0.8, -1.1, 1.1]),
        "old_per_token_logps": old,
        "ref_per_token_logps": ref,
        "num_items_in_batch": mask.sum(),
    }
    loss = trainer._compute_loss(model, batch)
    loss.backward()
    grads = {f"grad.{loss_type}.{level}.{name}": p.grad.detach().clone().contiguous() for name, p in model.named_parameters()}
    meta = {
        "name": f"{loss_type}/{level}",
        "options": {
            "lossType": loss_type,
            "importanceSamplingLevel": level,
            "epsilon": args.epsilon,
            "epsilonHigh": trainer.epsilon_high,
            "beta": args.beta,
            "klBiasCorrection": args.use_bias_correction_kl,
            "maxCompletionLength": args.max_completion_length,
            "tokenNormalizer": float(mask.sum()),
        },
        "prompts": prompts.tolist(),
        "completions": [row[:length].tolist() for row, length in zip(completions, lengths)],
        "oldLogprobs": flat(old, lengths),
        "refLogprobs": flat(ref, lengths),
        "advantages": batch["advantages"].tolist(),
        "tokenLogprobs": flat(current, lengths),
        "loss": float(loss.detach()),
    }
    return meta, grads


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    versions = {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__}
    goldens = [tensor_golden(t, level, name, case) for t in LOSS_TYPES for level in LEVELS for name, case in CASES.items()]
    with open(os.path.join(OUT, "tensors.json"), "w") as f:
        json.dump({"versions": versions, "goldens": goldens}, f, indent=1)
    steps, tensors = [], {}
    for loss_type, level in [("grpo", "token"), ("dapo", "token"), ("grpo", "sequence"), ("cispo", "token")]:
        meta, grads = model_step_golden(loss_type, level)
        steps.append(meta)
        tensors.update(grads)
    with open(os.path.join(OUT, "model_step.json"), "w") as f:
        json.dump({"versions": versions, "model": "tests/golden/comlrl/model", "steps": steps}, f, indent=1)
    save_file(tensors, os.path.join(OUT, "model_step.safetensors"))
    print(f"wrote {len(goldens)} tensor goldens and {len(steps)} model steps to {OUT}")


if __name__ == "__main__":
    main()
