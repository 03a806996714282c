"""Saved files both ways: CoMLRL's value heads and save dirs for us to load, ours loaded by CoMLRL (tests/golden/comlrl-interop.test.ts)."""

import json
import os

import torch
from transformers import PreTrainedTokenizerFast, Qwen2ForCausalLM

from comlrl.models.actor_critic import ValueHead
from comlrl.trainers.actor_critic.iac import IACConfig, IACTrainer
from comlrl.trainers.actor_critic.maac import MAACConfig, MAACTrainer
from comlrl.trainers.preference.madpo import PreferencePair
from comlrl.trainers.preference.marlhf import MARLHFConfig, MARLHFTrainer

from .actor_critic import AC_ITEM, AC_REWARDS, AC_ROWS, scripted_generate
from .common import MODEL, OUT, load_model, record_backward, tokenizer
from .preference import RM_PAIRS


def value_heads(tensors: dict) -> None:
    """CoMLRL's ValueHead files for the replay model's hidden size, both forms, as its trainers save them."""
    torch.manual_seed(3)
    for form, dim in (("linear", None), ("mlp", 8)):
        head = ValueHead(16, dim)
        torch.save(head.state_dict(), os.path.join(OUT, f"comlrl_value_head_{form}.pt"))
        for key, t in head.state_dict().items():
            tensors[f"value_head.{form}.{key}"] = t.detach().float().clone()


def iac_one_agent(agent, critic, tok) -> IACTrainer:
    args = IACConfig(num_agents=1, num_turns=1, num_generations=2, rollout_buffer_size=2, critic_type="v")
    trainer = IACTrainer(agents=[agent], critics=[critic], tokenizer=tok, args=args, reward_func=lambda *a, **k: list(AC_REWARDS))
    trainer.agents[0].model.generate = scripted_generate(AC_ROWS, [])(0)
    return trainer


def maac_one_agent(agent, critic, tok) -> MAACTrainer:
    args = MAACConfig(num_agents=1, num_turns=1, num_generations=2, rollout_buffer_size=2, critic_type="v")
    trainer = MAACTrainer(agents=[agent], critics=[critic], tokenizer=tok, args=args, reward_func=lambda *a, **k: list(AC_REWARDS))
    trainer.agents[0].model.generate = scripted_generate(AC_ROWS, [])(0)
    return trainer


def marlhf_one_agent(agent_dir: str, reward_model_dir: str) -> MARLHFTrainer:
    args = MARLHFConfig(num_agents=1, reward_model_name=reward_model_dir, reward_model_device="cpu", reward_train_batch_size=2)
    return MARLHFTrainer(agent_model=agent_dir, num_agents=1, reward_func=lambda *a, **k: [0.0], args=args)


def comlrl_save_dirs(tensors: dict) -> None:
    """What CoMLRL's save_model writes, for our tests: IAC with one agent (the actor at the top, critic/ with
    value_head.pt), MAAC with one agent (agent_0/, critic/ with value_head.pt) and MARLHF (agent_0/ only: its
    reward model is not part of save_model)."""
    torch.manual_seed(5)
    trainer = iac_one_agent(load_model(), load_model(), tokenizer())
    trainer.save_model(os.path.join(OUT, "comlrl_iac_save"))
    for key, t in trainer.critics[0].value_head.state_dict().items():
        tensors[f"comlrl_iac_save.head.{key}"] = t.detach().float().clone()
    torch.manual_seed(6)
    maac = maac_one_agent(load_model(), load_model(), tokenizer())
    maac.save_model(os.path.join(OUT, "comlrl_maac_save"))
    for key, t in maac.critics[0].value_head.state_dict().items():
        tensors[f"comlrl_maac_save.head.{key}"] = t.detach().float().clone()
    marlhf_one_agent(MODEL, MODEL).save_model(os.path.join(OUT, "comlrl_marlhf_save"))


def our_critic(critic_dir: str):
    """A CoMLRL critic from our saveModel's critic dir: the backbone from save_pretrained, value_head.pt loaded strictly."""
    from comlrl.models.actor_critic import CausalLMWithValueHead

    critic = CausalLMWithValueHead(Qwen2ForCausalLM.from_pretrained(critic_dir))
    critic.value_head.load_state_dict(torch.load(os.path.join(critic_dir, "value_head.pt"), weights_only=True), strict=True)
    return critic


# Joint texts our saved reward model is scored on, by CoMLRL's JointRewardModel here and by ours in the test.
OURS_RM_TEXTS = ["Joint multi-agent response\n\nAgent 1 prompt:\nthe red fox\n\nAgent 1 response:\nran over", "once upon a time there was a cat"]


def our_reward_model(saved: str) -> MARLHFTrainer:
    """CoMLRL's MARLHF over our saveModel dir: the agent from agent_0/, the reward backbone from reward_model/ and its
    head from our value_head.pt (value_projection.* are the keys of its Linear reward_head), loaded strictly."""
    trainer = marlhf_one_agent(os.path.join(saved, "agent_0"), os.path.join(saved, "reward_model"))
    trainer._init_reward_model()
    head = torch.load(os.path.join(saved, "reward_model", "value_head.pt"), weights_only=True)
    trainer.reward_model.reward_head.load_state_dict({k.removeprefix("value_projection."): v for k, v in head.items()}, strict=True)
    return trainer


def ours_marlhf_scores() -> dict:
    """CoMLRL's scores of OURS_RM_TEXTS under our committed ours_marlhf_save/ reward model (made by our test)."""
    trainer = our_reward_model(os.path.join(OUT, "ours_marlhf_save"))
    with torch.no_grad():
        scores = trainer._score_reward_texts(OURS_RM_TEXTS)
    return {"texts": OURS_RM_TEXTS, "scores": scores.tolist()}


def check_ours() -> None:
    """Our files load in CoMLRL: value_head.pt strictly into its ValueHead, and our saveModel dirs continue there.

    The files are written by tests/golden/comlrl-interop.test.ts (ours_value_head_<form>.pt, ours_*_save/)."""
    results = {}
    for form, dim in (("linear", None), ("mlp", 8)):
        path = os.path.join(OUT, f"ours_value_head_{form}.pt")
        head = ValueHead(16, dim)
        head.load_state_dict(torch.load(path, weights_only=True), strict=True)
        results[form] = sorted(head.state_dict())
    # Continue training from our saveModel dirs as a CoMLRL user would: the backbones from save_pretrained dirs,
    # the critics' heads from value_head.pt (strict), then one update.
    saved = os.path.join(OUT, "ours_iac_save")
    trainer = iac_one_agent(Qwen2ForCausalLM.from_pretrained(saved), our_critic(os.path.join(saved, "critic")), PreTrainedTokenizerFast.from_pretrained(saved))
    results["ours_iac_save"] = {"continued": trainer._update(0, trainer._collect_rollouts(AC_ITEM))}
    saved = os.path.join(OUT, "ours_maac_save")
    agent_dir = os.path.join(saved, "agent_0")
    maac = maac_one_agent(Qwen2ForCausalLM.from_pretrained(agent_dir), our_critic(os.path.join(saved, "critic")), PreTrainedTokenizerFast.from_pretrained(agent_dir))
    results["ours_maac_save"] = {"continued": maac._update(0, maac._collect_rollouts(AC_ITEM))}
    # MARLHF: one Bradley-Terry step of CoMLRL's reward-model training on our saved reward model.
    marlhf = our_reward_model(os.path.join(OUT, "ours_marlhf_save"))
    losses = []
    undo = record_backward(losses)
    try:
        marlhf._train_reward_model([
            PreferencePair(prompts=p["prompts"], winner_completions=p["winner"], loser_completions=p["loser"], agent_tensors=[],
                           winner_reward=1.0, loser_reward=0.0, candidate_reward_mean=0.5)
            for p in RM_PAIRS[:1]
        ])
    finally:
        undo()
    results["ours_marlhf_save"] = {"continued": {"reward_model_loss": losses[0]}}
    print(json.dumps(results))
