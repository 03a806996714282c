"""The run config each CoMLRL trainer hands wandb.init (tests/golden/comlrl-wandb.test.ts)."""

import os

import torch

from comlrl.trainers.actor_critic.iac import IACConfig, IACTrainer
from comlrl.trainers.actor_critic.maac import MAACConfig, MAACTrainer
from comlrl.trainers.preference.centralized import TaggedCentralizedComparatorAdapter
from comlrl.trainers.preference.iterative import MADPOIterConfig, MADPOIterTrainer, MARLHFIterConfig, MARLHFIterTrainer
from comlrl.trainers.preference.madpo import MADPOConfig, MADPOTrainer
from comlrl.trainers.preference.marlhf import MARLHFConfig, MARLHFTrainer
from comlrl.trainers.reinforce.centralized_magrpo import CentralizedMAGRPOConfig, CentralizedMAGRPOTrainer
from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer
from comlrl.trainers.reinforce.mareinforce import MAREINFORCEConfig, MAREINFORCETrainer
from comlrl.trainers.reinforce.maremax import MAReMaxConfig, MAReMaxTrainer
from comlrl.trainers.reinforce.marloo import MARLOOConfig, MARLOOTrainer

from .common import MODEL, ROOT, load_model, tokenizer


# The run config each trainer hands wandb.init, as its _init_wandb builds it when the trainer is made with a
# wandb_config: every trainer on the tiny model, its actors loaded objects (a count) or given by path.
WANDB_CONFIG = {
    "project": "comlrl-goldens",
    "config_sections": {"dataset": {"name": "tiny", "type": "writing"}, "output": {"verbose": False}, "external": {"mode": "level_feedback"}},
}
WANDB_CASES = {
    # name: (trainer, its config, actors, critics loaded, args, wandb_config)
    "magrpo": (MAGRPOTrainer, MAGRPOConfig, 1, 0, dict(num_agents=1, num_turns=1, num_generations=3, rollout_buffer_size=2), WANDB_CONFIG),
    "mareinforce_reference_kl": (
        MAREINFORCETrainer, MAREINFORCEConfig, "path", 0,
        dict(num_agents=2, num_turns=1, reference_kl_enabled=True, reference_kl_coef=0.05, reference_devices=["cpu"]), WANDB_CONFIG,
    ),
    # Without config sections: no dataset_name / dataset_type.
    "maremax_no_sections": (MAReMaxTrainer, MAReMaxConfig, 2, 0, dict(num_agents=2, num_turns=1, agent_learning_rate=1e-5), {"name": "run"}),
    "marloo": (MARLOOTrainer, MARLOOConfig, 2, 0, dict(num_agents=2, num_turns=1, num_generations=3, advantage_normalization=False), WANDB_CONFIG),
    "centralized": (CentralizedMAGRPOTrainer, CentralizedMAGRPOConfig, 1, 0, dict(num_agents=2, num_generations=3, rollout_buffer_size=2), WANDB_CONFIG),
    "iac_separate_v": (IACTrainer, IACConfig, 2, 2, dict(num_agents=2, num_turns=1, num_generations=2, rollout_buffer_size=2), WANDB_CONFIG),
    "iac_shared_q": (
        IACTrainer, IACConfig, 2, 0,
        dict(num_agents=2, num_turns=1, num_generations=2, use_separate_critic=False, critic_type="q", value_head_hidden_dim=8,
             train_batch_size=1, critic_learning_rate=None),
        WANDB_CONFIG,
    ),
    "maac_q": (MAACTrainer, MAACConfig, 2, 1, dict(num_agents=2, num_turns=1, num_generations=2, critic_type="q", max_new_tokens=64), WANDB_CONFIG),
    "madpo": (MADPOTrainer, MADPOConfig, 2, 0, dict(num_agents=2), WANDB_CONFIG),
    "madpo_centralized": (MADPOTrainer, MADPOConfig, 1, 0, dict(num_agents=2, collaboration_mode="centralized"), WANDB_CONFIG),
    "marlhf": (MARLHFTrainer, MARLHFConfig, "path", 0, dict(num_agents=2, reward_model_device="cpu", rl_algorithm="maremax"), WANDB_CONFIG),
    "marlhf_iac": (MARLHFTrainer, MARLHFConfig, "path", 0, dict(num_agents=2, reward_model_device="cpu", rl_algorithm="iac", num_generations=1), WANDB_CONFIG),
    "madpo_iter_centralized": (MADPOIterTrainer, MADPOIterConfig, 1, 0, dict(num_agents=2, collaboration_mode="centralized"), WANDB_CONFIG),
    "marlhf_iter": (MARLHFIterTrainer, MARLHFIterConfig, "path", 0, dict(num_agents=2, reward_model_device="cpu"), WANDB_CONFIG),
}


def repo_relative(value):
    """value with every path under the repository written relative to it (the model's path is the checkout's)."""
    if isinstance(value, str) and value.startswith(ROOT + os.sep):
        return os.path.relpath(value, ROOT)
    if isinstance(value, dict):
        return {k: repo_relative(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [repo_relative(v) for v in value]
    return value


def wandb_run_configs() -> dict:
    """Builds each WANDB_CASES trainer with wandb.init replaced by a recorder (returning no run, so none is kept)."""
    import wandb

    captured = []

    def init(**kwargs):
        captured.append(kwargs)

    wandb.init = init
    cases = {}
    for name, (cls, config_cls, actors, critics, args, wandb_config) in WANDB_CASES.items():
        torch.manual_seed(0)
        kwargs = dict(args=config_cls(**args), reward_func=lambda *a, **k: [0.0], wandb_config=wandb_config)
        if actors == "path":
            kwargs["agent_model"] = MODEL
        else:
            kwargs.update(agents=[load_model() for _ in range(actors)], tokenizer=tokenizer())
        if critics:
            kwargs["critics"] = [load_model() for _ in range(critics)]
        if cls is CentralizedMAGRPOTrainer:
            kwargs["centralized_adapter"] = TaggedCentralizedComparatorAdapter()
        if cls not in (IACTrainer, MAACTrainer):  # the actor-critic trainers read num_agents from their args
            kwargs["num_agents"] = args["num_agents"]
        cls(**kwargs)
        init_kwargs = repo_relative(captured.pop())
        cases[name] = {
            "trainer": cls.__name__,
            "actors": actors,
            "critics": critics,
            "args": args,
            "wandbConfig": wandb_config,
            "config": init_kwargs.pop("config"),
            "init": init_kwargs,  # the other wandb.init arguments
        }
    return cases
