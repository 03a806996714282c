"""Multi-turn IAC and MAAC from scripted generations (tests/golden/comlrl-actor-critic.test.ts)."""

import random
from collections import defaultdict

import torch

from comlrl.trainers.actor_critic.iac import IACConfig, IACTrainer
from comlrl.trainers.actor_critic.maac import MAACConfig, MAACTrainer

from .actor_critic import prepare_iac, prepare_maac, record_iac_after, record_maac_after
from .common import EOS, load_model, record_backward, tokenizer


# Multi-turn IAC: two items, two turns, one generation per turn. Rows are [item][turn][agent], EOS-padded as generate
# returns them; rewards [item][turn][agent] (one per agent). Each first turn's mean reward is at most the default
# early-termination threshold (-0.2), so both episodes play their second turn.
MT_ITEMS = [{"prompt": "the red fox"}, {"prompt": "once upon a time"}]
MT_ROWS = [
    [[[40, 264, 41, EOS], [60, 283, 61, 62]], [[43, 70, EOS], [64, 295, 65]]],
    [[[50, 51, 52], [70, 288, EOS]], [[55, 56, EOS, EOS], [72, 73, 74, 75]]],
]
MT_REWARDS = [[[-0.5, -0.25], [1.0, 0.5]], [[0.0, -1.0], [0.25, -0.75]]]
MT = {"items": MT_ITEMS, "rows": MT_ROWS, "rewards": MT_REWARDS, "formatters": None}
# Three turns of one item with formatters that tag each agent's prompt ("<i> prompt"): the third turn's transition
# reads the second turn's prompt from the history, which CoMLRL's actor-critic records formatted.
MT3 = {
    "items": [{"prompt": "the lazy dog"}],
    "rows": [[[[41, 42, EOS], [61, 62]], [[44, 264, 45], [66, EOS]], [[47, EOS], [68, 69, 70]]]],
    "rewards": [[[-0.5, -0.5], [-1.0, 0.0], [0.75, 0.25]]],
    "formatters": "tagged",
}

# Early termination: the first item's first turn has mean reward 0.25 > -0.2, so its episode ends there (its target is
# its reward); the second item plays both turns. Turn 1 is updated over both items, turn 2 over the second alone.
MT_EARLY = {
    "items": MT_ITEMS,
    "rows": [[MT_ROWS[0][0]], MT_ROWS[1]],
    "rewards": [[[0.5, 0.0]], MT_REWARDS[1]],
    "formatters": None,
}


def tagged_formatter(i: int):
    return lambda item, external_prompts=None: f"<{i}> {item['prompt']}"


def mt_transition(prompt, agent_completions, num_agents, prompt_history_per_agent, response_history_per_agent):
    """Each agent's next prompt: its last prompt, its own last response and the other agent's."""
    return [
        f"{prompt_history_per_agent[i][-1]} | {response_history_per_agent[i][-1]} | {agent_completions[1 - i]}"
        for i in range(num_agents)
    ]


def multi_turn_trainer(cls, config_cls, episodes, **kwargs):
    """A 2-agent trainer of cls over the episodes (one generation per turn, a rollout buffer of the turns played, the
    harness's transition, rewards and formatters); returns it with the per-agent generate makers and prompts seen."""
    rows, rewards_given = episodes["rows"], episodes["rewards"]
    turns = max(len(r) for r in rows)
    random.seed(0)
    torch.manual_seed(0)
    config = kwargs.pop("config")
    played = sum(len(r) for r in rows)  # each agent's samples: the buffer fills after the last item
    args = config_cls(num_agents=2, num_turns=turns, num_generations=1, rollout_buffer_size=played, **config)
    rewards = iter([turn for item in rewards_given for turn in item])
    trainer = cls(
        agents=[load_model(), load_model()], tokenizer=tokenizer(), args=args, external_transition=mt_transition,
        formatters=[tagged_formatter(i) for i in range(2)] if episodes["formatters"] == "tagged" else None,
        reward_func=lambda prompts, *completions, **kw: list(next(rewards)), **kwargs,
    )
    queues = [[turn[a] for item in rows for turn in item] for a in range(2)]
    prompts_seen = [[], []]

    def scripted(agent):
        def run(input_ids=None, **kwargs):
            prompts_seen[agent].append(input_ids[0].tolist())
            return torch.cat([input_ids, torch.tensor([queues[agent].pop(0)])], dim=1)

        return run

    return trainer, scripted, prompts_seen


def run_turn_updates(trainer, items) -> list:
    """Runs the items through _run_batch and records each _update (one agent, one turn): its samples (one per item that
    played the turn, in item order) as the trainer made them, their normalised advantages, metrics and the losses
    backwarded."""
    updates = []
    update = trainer._update

    def recorded(agent_idx, samples):
        info = {
            "agent": agent_idx,
            "turn": samples[0].metadata["turn_idx"],
            "itemIndices": [items.index(s.metadata["batch_item"]) for s in samples],  # what the lists below are of
            "prompts": [s.prompt for s in samples],
            "promptIds": [s.full_input_ids[: s.prompt_len].tolist() for s in samples],
            "rows": [s.full_input_ids[s.prompt_len:].tolist() for s in samples],
            "responseLens": [int(s.response_len) for s in samples],
            "completions": [s.completion for s in samples],
            "oldValues": [float(s.old_value.view(-1)[0]) for s in samples],
            "targets": [float(s.metadata["value_target"].view(-1)[0]) for s in samples],
            "returns": [float(s.returns.view(-1)[0]) for s in samples],
        }
        if "joint_input_ids" in samples[0].metadata:  # MAAC: the ids of the joint text its critic reads
            info["criticIds"] = [s.metadata["joint_input_ids"][0].tolist() for s in samples]
        losses = []
        undo = record_backward(losses)
        try:
            metrics = update(agent_idx, samples)
        finally:
            undo()
        by_item = sorted(samples, key=lambda s: items.index(s.metadata["batch_item"]))
        info["normalizedAdvantages"] = [float(s.normalized_advantage.view(-1)[0]) for s in by_item]
        updates.append({**info, "metrics": metrics, "backwardLosses": losses})
        return metrics

    trainer._update = recorded
    trainer._run_batch(items, defaultdict(list))
    return updates


def multi_turn_golden(name: str, trainer, episodes, prompts_seen, updates, config: dict) -> dict:
    return {
        "config": {
            "numAgents": 2, "numTurns": trainer.args.num_turns, "numGenerations": 1, "rolloutBufferSize": trainer.args.rollout_buffer_size,
            "criticType": trainer.args.critic_type, "discount": trainer.args.discount, "advantageNormalization": trainer.args.advantage_normalization,
            "earlyTerminationThreshold": trainer.args.early_termination_threshold, "formatters": episodes["formatters"], **config,
        },
        "tensorPrefix": name,
        "items": episodes["items"],
        "rewards": episodes["rewards"],
        "generatePromptIds": prompts_seen,
        # In CoMLRL's order: agent 0's turns, then agent 1's.
        "updates": updates,
    }


def iac_multi_turn_case(name: str, separate: bool, critic_type: str, head_dim, discount: float, normalize: bool, tensors: dict, episodes=MT) -> dict:
    """The episodes' items through the trainer's own _run_batch (a rollout buffer of the turns played): each agent's buffer
    fills after the last item and _process_buffer updates it turn by turn, each turn's samples (one per item) as one
    minibatch. Two normalised advantages are always ±1; unnormalised, the raw y − V_old weigh the actor loss."""
    trainer, scripted, prompts_seen = multi_turn_trainer(
        IACTrainer, IACConfig, episodes, critics=[load_model(), load_model()] if separate else None,
        config=dict(use_separate_critic=separate, critic_type=critic_type, value_head_hidden_dim=head_dim,
                    critic_value_head_hidden_dim=head_dim, discount=discount, advantage_normalization=normalize),
    )
    heads, actor_norms, critic_norms = prepare_iac(trainer, name, scripted, tensors)
    updates = run_turn_updates(trainer, episodes["items"])
    for u in updates:
        k = sum(1 for v in updates[: updates.index(u)] if v["agent"] == u["agent"])
        u["actorGradNorm"] = actor_norms[u["agent"]][k]
        u["criticGradNorm"] = critic_norms[u["agent"]][k] if separate else None
    record_iac_after(trainer, name, heads, tensors)
    return multi_turn_golden(name, trainer, episodes, prompts_seen, updates, {
        "useSeparateCritic": separate, "valueHeadHiddenDim": head_dim, "criticValueHeadHiddenDim": head_dim,
    })


def maac_multi_turn_case(name: str, critic_type: str, tensors: dict) -> dict:
    """MAAC over the two-turn episodes: the one critic's value of each turn's joint text (a Q critic's with the joint
    action), TD targets from the next turn's, the critic stepped in every agent's turn update."""
    trainer, scripted, prompts_seen = multi_turn_trainer(MAACTrainer, MAACConfig, MT, critics=[load_model()], config=dict(critic_type=critic_type))
    actor_norms, critic_norms = prepare_maac(trainer, name, scripted, tensors)
    updates = run_turn_updates(trainer, MT["items"])
    for n, u in enumerate(updates):
        u["actorGradNorm"] = actor_norms[u["agent"]][sum(1 for v in updates[:n] if v["agent"] == u["agent"])]
        u["criticGradNorm"] = critic_norms[n]
    record_maac_after(trainer, name, tensors)
    return multi_turn_golden(name, trainer, MT, prompts_seen, updates, {})
