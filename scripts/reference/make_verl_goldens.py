"""Goldens from verl's own PPO core (verl/trainer/ppo/core_algos.py) for tests/golden/verl.test.ts (docs/mappo.md).

Calls the installed verl's functions themselves on fixed tensors:
- gae: `compute_gae_advantage_return` over ragged episodes (one column per turn, the response mask ending each
  episode), for several (γ, λ), with the returns and the advantages before verl whitens them (returns − values);
- value_loss: `compute_value_loss` (token-mean) with its gradient with respect to the predictions, the predictions one
  value per case (a value head whose weight is zero reads its bias on every row), old values and returns on both
  sides of the clip range;
- policy_loss: `compute_policy_loss_vanilla` (PPO's clipped ratio with verl's dual clip at clip_ratio_c) under
  token-mean and seq-mean-token-mean, with its gradient with respect to the log-probs and its clip fraction.

verl's package imports its whole distributed stack (ray, tensordict, hydra configs) on the way to core_algos; none of
it is on the path these functions take, so the modules they import for other functions are stubbed and the two real
files (core_algos.py and utils/torch_functional.py) are loaded from the installed package:

    python3 -m venv /work/venv-mappo && /work/venv-mappo/bin/pip install --no-deps verl==0.9.1
    (torch from scripts/reference/requirements.txt on the path)
    /work/venv-mappo/bin/python scripts/reference/make_verl_goldens.py
"""

import importlib.metadata
import importlib.util
import json
import os
import sys
import types

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "golden", "verl", "ppo.json")

torch.set_num_threads(1)


def stub(name: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def load(name: str, path: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Unused:
    """A name imported for functions these goldens do not call."""


def verl_core_algos() -> types.ModuleType:
    installed = str(importlib.metadata.distribution("verl").locate_file("verl"))
    for package in ["verl", "verl.utils", "verl.trainer", "verl.trainer.ppo", "verl.workers"]:
        stub(package, __path__=[])
    stub("tensordict", TensorDict=Unused)
    stub("omegaconf", DictConfig=Unused)
    stub("verl.utils.device", get_device_name=lambda: "cpu", get_torch_device=lambda: torch.cpu)
    stub("verl.utils.import_utils", deprecated=lambda *_: (lambda fn: fn))
    stub("verl.trainer.config", AlgoConfig=Unused)
    stub("verl.workers.config", ActorConfig=Unused)
    sys.modules["verl.utils"].__dict__.update(as_torch_index=Unused, group_mean_std=Unused)
    sys.modules["verl.utils"].torch_functional = load("verl.utils.torch_functional", os.path.join(installed, "utils", "torch_functional.py"))
    return load("verl.trainer.ppo.core_algos", os.path.join(installed, "trainer", "ppo", "core_algos.py"))


class ActorConfig(dict):
    """The fields of verl's ActorConfig that compute_policy_loss_vanilla reads (a DictConfig answers get() too)."""

    def __getattr__(self, name):
        return self[name]


def rounded(tensor: torch.Tensor) -> list:
    return tensor.detach().double().flatten().tolist()


def gae_goldens(core) -> list:
    generator = torch.Generator().manual_seed(0)
    lengths = [3, 2, 1, 3, 2]
    turns = max(lengths)
    rewards = torch.randn(len(lengths), turns, generator=generator)
    values = torch.randn(len(lengths), turns, generator=generator)
    mask = torch.tensor([[1.0 if t < n else 0.0 for t in range(turns)] for n in lengths])
    goldens = []
    for gamma, lam in [(1.0, 0.95), (0.9, 0.0), (0.99, 1.0), (0.8, 0.5)]:
        whitened, returns = core.compute_gae_advantage_return(rewards * mask, values * mask, mask, torch.tensor(gamma), torch.tensor(lam))
        assert whitened.shape == returns.shape
        goldens.append(
            {
                "gamma": gamma,
                "lambda": lam,
                "episodes": [
                    {"rewards": rounded(rewards[i, :n]), "values": rounded(values[i, :n]), "returns": rounded(returns[i, :n]), "advantages": rounded((returns - values)[i, :n])}
                    for i, n in enumerate(lengths)
                ],
            }
        )
    return goldens


def value_loss_goldens(core) -> list:
    returns = torch.tensor([0.9, -0.4, 0.35, 1.6, 0.05, -1.1])
    # No V − V_old on a clip boundary, where torch.clamp and verl's min∘max split the gradient differently.
    old_values = torch.tensor([0.12, 0.6, 0.52, 0.43, -0.3, 0.2])
    goldens = []
    for prediction, clip in [(0.5, 0.2), (0.5, 0.05), (-0.2, 0.3), (0.25, 10.0)]:
        vpreds = torch.full((len(returns), 1), prediction, requires_grad=True)
        loss, clipfrac = core.compute_value_loss(vpreds, returns[:, None], old_values[:, None], torch.ones(len(returns), 1), clip, loss_agg_mode="token-mean")
        loss.backward()
        goldens.append(
            {
                "prediction": prediction,
                "clipRange": clip,
                "returns": rounded(returns),
                "oldValues": rounded(old_values),
                "loss": loss.item(),
                "gradPrediction": vpreds.grad.sum().item(),
                "clipFraction": clipfrac.item(),
            }
        )
    return goldens


def policy_loss_goldens(core) -> list:
    generator = torch.Generator().manual_seed(1)
    lengths = [5, 3, 4, 1, 6]
    width = max(lengths)
    mask = torch.tensor([[1.0 if t < n else 0.0 for t in range(width)] for n in lengths])
    old = -torch.rand(len(lengths), width, generator=generator) * 3
    # Log-ratios from −1.5 to 1.5: ratios under 1 − ε, inside, over 1 + ε and over the dual clip's 3.
    logprobs = old + (torch.rand(len(lengths), width, generator=generator) * 3 - 1.5)
    advantages = torch.tensor([1.2, -0.7, 0.4, -1.5, -0.3])
    goldens = []
    for mode in ["token-mean", "seq-mean-token-mean"]:
        for low, high in [(0.2, 0.2), (0.2, 0.28)]:
            config = ActorConfig(clip_ratio=low, clip_ratio_low=low, clip_ratio_high=high, clip_ratio_c=3.0, global_batch_info={})
            current = logprobs.clone().requires_grad_(True)
            loss, metrics = core.compute_policy_loss_vanilla(old, current, advantages[:, None].expand(-1, width), mask, loss_agg_mode=mode, config=config)
            loss.backward()
            keep = mask.bool()
            goldens.append(
                {
                    "lossAggMode": mode,
                    "clipRatioLow": low,
                    "clipRatioHigh": high,
                    "clipRatioC": 3.0,
                    "rowLengths": lengths,
                    "advantages": rounded(advantages),
                    "logprobs": rounded(logprobs[keep]),
                    "oldLogprobs": rounded(old[keep]),
                    "loss": loss.item(),
                    "gradLogprobs": rounded(current.grad[keep]),
                    "clipFraction": metrics["actor/pg_clipfrac"],
                }
            )
    return goldens


def main() -> None:
    core = verl_core_algos()
    goldens = {
        "source": f"verl {importlib.metadata.version('verl')} verl/trainer/ppo/core_algos.py, torch {torch.__version__}",
        "gae": gae_goldens(core),
        "valueLoss": value_loss_goldens(core),
        "policyLoss": policy_loss_goldens(core),
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(goldens, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
