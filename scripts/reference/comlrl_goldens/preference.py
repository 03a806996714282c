"""MADPO's DPO update, MARLHF's reward-model step and its head's initial statistics (tests/golden/comlrl-preference.test.ts)."""

from types import SimpleNamespace

import torch

from comlrl.trainers.preference.madpo import AgentPreferenceTensors, MADPOConfig, MADPOTrainer, PreferencePair
from comlrl.trainers.preference.marlhf import JointRewardModel, MARLHFConfig, MARLHFTrainer

from .common import EOS, MODEL, load_model, params, record_backward, tokenizer, watch_grad_norms


# MADPO: two pairs of (winner, loser) rows per agent, EOS-padded as generate() returns them.
DPO_PROMPTS = [[[14, 120, 33], [57, 9, 260, 88]], [[21, 22], [31, 32, 33]]]  # [pair][agent]
DPO_WINNERS = [[[40, 41, 42, EOS], [50, 51, EOS, EOS]], [[60, 61, 62, 63], [70, EOS, EOS]]]
DPO_LOSERS = [[[43, 44, EOS, EOS], [52, 53, 54, 55]], [[64, EOS, EOS, EOS], [71, 72, 73]]]


def madpo_case(tensors: dict) -> dict:
    torch.manual_seed(0)
    args = MADPOConfig(num_agents=2)
    trainer = MADPOTrainer(agents=[load_model(), load_model()], num_agents=2, tokenizer=tokenizer(), reward_func=lambda *a, **k: [0.0], args=args)
    norms = [[], []]
    for i in range(2):
        watch_grad_norms(trainer.optimizers[i], norms[i])
    batch = [
        PreferencePair(
            prompts=["", ""], winner_completions=["", ""], loser_completions=["", ""],
            agent_tensors=[
                AgentPreferenceTensors(torch.tensor(DPO_PROMPTS[p][a]), torch.tensor(DPO_WINNERS[p][a]), torch.tensor(DPO_LOSERS[p][a]))
                for a in range(2)
            ],
            winner_reward=1.0, loser_reward=0.0, candidate_reward_mean=0.5,
        )
        for p in range(2)
    ]
    losses = []
    undo = record_backward(losses)
    try:
        metrics = trainer._update_from_preference_batch(batch)
    finally:
        undo()
    params(trainer.agents[0], "madpo.after.0", tensors)

    # CoMLRL's log-probs: the row up to its first pad (EOS when pad == eos), then feeding row[:-1] drops its last token.
    def scored(row):
        return (row[: row.index(EOS)] if EOS in row else list(row))[:-1]

    return {
        "config": {"dpoBeta": args.dpo_beta, "agentLearningRate": args.agent_learning_rate},
        "prompts": DPO_PROMPTS,
        "agentLosses": losses,
        "gradNorms": [n[0] for n in norms],
        "metrics": metrics,
        "scoredWinners": [[scored(r) for r in pair] for pair in DPO_WINNERS],
        "scoredLosers": [[scored(r) for r in pair] for pair in DPO_LOSERS],
    }


# MARLHF's reward model: joint texts of two pairs (CoMLRL's _format_joint_text), one Bradley-Terry step.
RM_PAIRS = [
    {"prompts": ["the red fox", "a lazy dog"], "winner": ["ran over", "the cat"], "loser": ["once", "upon a time there was"]},
    {"prompts": ["once upon", "a time"], "winner": ["the fox ran", "over the dog"], "loser": ["a", "cat"]},
]


def reward_model_case(tensors: dict) -> dict:
    torch.manual_seed(0)
    args = MARLHFConfig(num_agents=2, reward_model_device="cpu", reward_train_batch_size=2)
    trainer = MARLHFTrainer(agent_model=MODEL, num_agents=2, reward_func=lambda *a, **k: [0.0], args=args)
    trainer._init_reward_model()
    for key, t in trainer.reward_model.reward_head.state_dict().items():
        tensors[f"reward_model.head_init.{key}"] = t.detach().float().clone()
    norms = []
    watch_grad_norms(trainer.reward_optimizer, norms)
    pairs = [
        PreferencePair(prompts=p["prompts"], winner_completions=p["winner"], loser_completions=p["loser"], agent_tensors=[],
                       winner_reward=1.0, loser_reward=0.0, candidate_reward_mean=0.5)
        for p in RM_PAIRS
    ]
    texts = {
        "winners": [trainer._format_joint_reward_text(p, use_winner=True) for p in pairs],
        "losers": [trainer._format_joint_reward_text(p, use_winner=False) for p in pairs],
    }
    losses = []
    undo = record_backward(losses)
    try:
        trainer._train_reward_model(pairs)  # one batch of both pairs (the loader's shuffle only reorders the mean)
    finally:
        undo()
    params(trainer.reward_model.backbone, "reward_model.after", tensors)
    for key, t in trainer.reward_model.reward_head.state_dict().items():
        tensors[f"reward_model.head_after.{key}"] = t.detach().float().clone()
    return {
        "config": {"rewardLearningRate": args.reward_learning_rate, "rewardTrainBatchSize": 2},
        "pairs": RM_PAIRS,
        "texts": texts,
        "ids": {k: [trainer.reward_tokenizer(t)["input_ids"] for t in v] for k, v in texts.items()},
        "loss": losses[0],
        "gradNorm": norms[0],
    }


def reward_head_init_stats() -> dict:
    """Statistics of the head CoMLRL's JointRewardModel makes (a plain nn.Linear(H, 1), torch's default init) over 16
    heads of H = 4096 on a stub backbone: torch's stream cannot be matched across runtimes, the distribution can."""
    hidden, heads = 4096, 16
    backbone = torch.nn.Linear(1, 1)
    backbone.config = SimpleNamespace(hidden_size=hidden)
    torch.manual_seed(11)
    made = [JointRewardModel(backbone).reward_head for _ in range(heads)]
    weights = torch.cat([m.weight.detach().flatten() for m in made])
    biases = torch.cat([m.bias.detach() for m in made])
    return {
        "hiddenSize": hidden,
        "heads": heads,
        "weight": {"mean": float(weights.mean()), "std": float(weights.std()), "maxAbs": float(weights.abs().max())},
        "bias": {"values": biases.tolist(), "maxAbs": float(biases.abs().max())},
    }
