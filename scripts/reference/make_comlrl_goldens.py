"""Golden updates from the real CoMLRL 1.4.3 for tests/golden/comlrl*.test.ts (README "Checking against CoMLRL").

Runs CoMLRL's own update code on a tiny Qwen2 model (made here with transformers) from fixed rollouts, and writes
tests/golden/comlrl/: the model (model/), goldens.json (inputs, losses, gradient norms, CoMLRL's token accounting)
and goldens.safetensors (parameters after each step, value-head weights). Our tests replay the same rollouts.

    python -m venv /tmp/ref && /tmp/ref/bin/pip install -r scripts/reference/requirements.txt
    /tmp/ref/bin/python scripts/reference/make_comlrl_goldens.py            # writes the goldens
    /tmp/ref/bin/python scripts/reference/make_comlrl_goldens.py --check    # our files, loaded by CoMLRL

MAGRPO-family rollouts are NodeSamples handed to `_update_from_samples`; actor-critic rollouts come from the
trainer's own `_collect_rollouts` with the model's `generate` replaced by one that returns given token ids.
"""

import argparse
import json
import os
import random
import sys
from collections import defaultdict
from types import SimpleNamespace

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from comlrl.models.actor_critic import ValueHead
from comlrl.trainers.actor_critic.iac import IACConfig, IACTrainer
from comlrl.trainers.actor_critic.maac import MAACConfig, MAACTrainer
from comlrl.trainers.preference.centralized import TaggedCentralizedComparatorAdapter
from comlrl.trainers.preference.iterative import MADPOIterConfig, MADPOIterTrainer, MARLHFIterConfig, MARLHFIterTrainer
from comlrl.trainers.preference.madpo import AgentPreferenceTensors, MADPOConfig, MADPOTrainer, PreferencePair
from comlrl.trainers.preference.marlhf import JointRewardModel, MARLHFConfig, MARLHFTrainer
from comlrl.trainers.reinforce.centralized_magrpo import CentralizedMAGRPOConfig, CentralizedMAGRPOTrainer
from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer, NodeSample
from comlrl.trainers.reinforce.mareinforce import MAREINFORCEConfig, MAREINFORCETrainer
from comlrl.trainers.reinforce.maremax import MAReMaxConfig, MAReMaxTrainer
from comlrl.trainers.reinforce.marloo import MARLOOConfig, MARLOOTrainer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
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


def magrpo_case(mode: str, normalize: bool, tensors: dict, rows_of_nodes=ROWS, name=None) -> dict:
    random.seed(0)
    torch.manual_seed(0)
    model = load_model()
    args = MAGRPOConfig(num_agents=1, num_turns=1, num_generations=3, rollout_buffer_size=2, advantage_mode=mode, advantage_normalization=normalize)
    trainer = MAGRPOTrainer(agents=[model], num_agents=1, tokenizer=tokenizer(), reward_func=lambda *a, **k: [0.0], args=args)
    losses, norms = [], []
    compute = trainer._compute_loss_with_gradients

    def recorded(agent, data, returns):
        loss = compute(agent, data, returns)
        losses.append(float(loss.detach()))
        return loss

    trainer._compute_loss_with_gradients = recorded
    watch_grad_norms(trainer.optimizers[0], norms)
    samples = [
        NodeSample(0, 0, {"prompt_input_ids": torch.tensor([p]), "completion_input_ids": [[torch.tensor(r) for r in rows]]}, ret, 0.0, 0.0, 1)
        for p, rows, ret in zip(PROMPTS, rows_of_nodes, RETURNS)
    ]
    order = {id(s): i for i, s in enumerate(samples)}
    trainer._update_from_samples(0, samples)
    # The shuffle reorders the minibatch; losses are reported in sample order.
    per_sample = [0.0] * len(samples)
    for s, loss in zip(samples, losses):
        per_sample[order[id(s)]] = loss
    name = name or (f"magrpo_{mode}" if normalize else f"magrpo_{mode}_unnormalized")
    params(trainer.agents[0], f"{name}.after", tensors)
    return {
        "config": {"advantageMode": mode, "numGenerations": 3, "rolloutBufferSize": 2, "advantageNormalization": normalize},
        "sampleLosses": per_sample,
        "loss": sum(per_sample) / len(per_sample),
        "gradNorm": norms[0],
        # CoMLRL feeds prompt + row[:-1] and scores every position: the whole padded row but its last token.
        "scoredCompletions": [[row[:-1] for row in rows] for rows in rows_of_nodes],
    }


def centralized_case(tensors: dict) -> dict:
    random.seed(0)
    torch.manual_seed(0)
    model = load_model()
    args = CentralizedMAGRPOConfig(num_agents=2, num_generations=3, rollout_buffer_size=2)
    trainer = CentralizedMAGRPOTrainer(
        centralized_adapter=TaggedCentralizedComparatorAdapter(), num_agents=2, agents=[model], tokenizer=tokenizer(),
        reward_func=lambda *a, **k: [0.0], args=args,
    )
    norms = []
    watch_grad_norms(trainer.optimizers[0], norms)
    losses = []
    compute = trainer._compute_loss_with_gradients

    def recorded(agent, data, returns):
        loss = compute(agent, data, returns)
        losses.append((data["id"], float(loss.detach())))
        return loss

    trainer._compute_loss_with_gradients = recorded
    samples = [
        NodeSample(0, 0, {"id": i, "prompt_input_ids": torch.tensor([p]), "completion_input_ids": [[torch.tensor(r) for r in rows]]}, ret, 0.0, 0.0, 1)
        for i, (p, rows, ret) in enumerate(zip(PROMPTS, ROWS, RETURNS))
    ]
    trainer._update_from_samples(0, samples)
    per_sample = [loss for _, loss in sorted(losses)]
    params(trainer.agents[0], "centralized.after", tensors)
    prompt = TaggedCentralizedComparatorAdapter().build_prompt({}, ["Write a haiku.", "Write a title."])
    return {
        "config": {"numAgents": 2, "numGenerations": 3, "rolloutBufferSize": 2},
        "sampleLosses": per_sample,
        "loss": sum(per_sample) / len(per_sample),
        "gradNorm": norms[0],
        # The joint log-prob scores each completion up to and including its first EOS (pad == eos).
        "scoredCompletions": [[natural(row) for row in rows] for rows in ROWS],
        "taggedPrompt": {"agentPrompts": ["Write a haiku.", "Write a title."], "prompt": prompt},
    }


# Actor-critic: one prompt per agent, K = 2 generations, rows padded with EOS to the batch width.
AC_ITEM = {"prompt": "the red fox"}
AC_ROWS = [[[40, 41, EOS, EOS], [50, 51, 52, 53]], [[60, EOS, EOS, EOS], [70, 71, 72, EOS]]]
AC_REWARDS = [0.75, -0.25]  # per generation, shared by both agents


def scripted_generate(rows_per_agent, calls):
    """A replacement for model.generate that returns prompt + the given rows (what a sampler could have drawn)."""

    def generate(self_index):
        def run(input_ids=None, num_return_sequences=1, **kwargs):
            calls.append({k: v for k, v in kwargs.items() if k in ("top_k", "top_p", "temperature", "max_new_tokens")})
            rows = torch.tensor(rows_per_agent[self_index][:num_return_sequences])
            return torch.cat([input_ids.repeat(rows.shape[0], 1), rows], dim=1)

        return run

    return generate


def ac_update(trainer, agent: int, samples) -> dict:
    """One actor-critic _update of an agent's rollouts: the rows it saw, the critic's old values, the logged metrics and
    the losses _ac_step backwards (separate critics: the actor loss, then value_loss_coef · value loss; a shared head:
    their sum once)."""
    losses = []
    undo = record_backward(losses)
    try:
        metrics = trainer._update(agent, list(samples))
    finally:
        undo()
    return {
        "promptIds": samples[0].full_input_ids[: samples[0].prompt_len].tolist(),
        "rows": [s.full_input_ids[s.prompt_len:].tolist() for s in samples],
        "responseLens": [int(s.response_len) for s in samples],
        "oldValues": [float(s.old_value.view(-1)[0]) for s in samples],
        "metrics": metrics,
        "backwardLosses": losses,
    }


def prepare_iac(trainer: IACTrainer, name: str, make_generate, tensors: dict):
    """Gives each agent make_generate(i) as its generate, records the value heads' initial weights, and watches each
    optimizer's gradient norms; returns the heads (critics' or actors') and the actor and critic norm lists."""
    for i, agent in enumerate(trainer.agents):
        agent.model.generate = make_generate(i)
    separate = trainer.args.use_separate_critic
    heads = trainer.critics if separate else trainer.agents
    for i, holder in enumerate(heads):
        for key, t in holder.value_head.state_dict().items():
            tensors[f"{name}.head_init.{i}.{key}"] = t.detach().float().clone()
    actor_norms = [[] for _ in trainer.agents]
    critic_norms = [[] for _ in trainer.agents]
    for i in range(len(trainer.agents)):
        watch_grad_norms(trainer.agent_optimizers[i], actor_norms[i])
        if separate:
            watch_grad_norms(trainer.critic_optimizers[i], critic_norms[i])
    return heads, actor_norms, critic_norms


def record_iac_after(trainer: IACTrainer, name: str, heads, tensors: dict) -> None:
    """Every agent's head after the updates, and agent 0's actor and critic (agent 1's parameters add size, not
    coverage: its losses and norms are checked)."""
    params(trainer.agents[0].model, f"{name}.actor_after.0", tensors)
    if trainer.args.use_separate_critic:
        params(trainer.critics[0].model, f"{name}.critic_after.0", tensors)
    for i, holder in enumerate(heads):
        for key, t in holder.value_head.state_dict().items():
            tensors[f"{name}.head_after.{i}.{key}"] = t.detach().float().clone()


def iac_case(name: str, separate: bool, critic_type: str, head_dim, tensors: dict) -> dict:
    random.seed(0)
    torch.manual_seed(0)
    tok = tokenizer()
    agents = [load_model(), load_model()]
    critics = [load_model(), load_model()] if separate else None
    args = IACConfig(
        num_agents=2, num_turns=1, num_generations=2, rollout_buffer_size=2, use_separate_critic=separate,
        critic_type=critic_type, value_head_hidden_dim=head_dim, critic_value_head_hidden_dim=head_dim,
    )
    trainer = IACTrainer(
        agents=agents, critics=critics, tokenizer=tok, args=args,
        reward_func=lambda prompts, *completions, **kw: list(AC_REWARDS),
    )
    calls = []
    heads, actor_norms, critic_norms = prepare_iac(trainer, name, scripted_generate(AC_ROWS, calls), tensors)
    rollouts = trainer._collect_rollouts(AC_ITEM)
    by_agent = [[r for r in rollouts if r.agent_idx == i] for i in range(2)]
    per_agent = []
    for i in range(2):
        samples = by_agent[i]
        per_agent.append({
            **ac_update(trainer, i, samples),
            "oldLogprobs": [float(s.old_logprob.view(-1)[0]) for s in samples],
            "normalizedAdvantages": [float(s.normalized_advantage.view(-1)[0]) for s in samples],
            "actorGradNorm": actor_norms[i][0],
            "criticGradNorm": critic_norms[i][0] if separate else None,
        })
    record_iac_after(trainer, name, heads, tensors)
    return {
        "config": {
            "numAgents": 2, "numTurns": 1, "numGenerations": 2, "rolloutBufferSize": 2, "useSeparateCritic": separate,
            "criticType": critic_type, "valueHeadHiddenDim": head_dim, "criticValueHeadHiddenDim": head_dim,
            "valueLossCoef": args.value_loss_coef, "valueClipRange": args.value_clip_range, "discount": args.discount,
        },
        "rewards": AC_REWARDS,
        "agents": per_agent,
        # What CoMLRL passed to generate: top_k is left out (None), so generation_config.json decides.
        "generateKwargs": calls[0],
    }


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
    items, rows, rewards_given = episodes["items"], episodes["rows"], episodes["rewards"]
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


# Multi-turn MAGRPO with K = 2 per node, the harness's transition and tagged formatters: per agent, the rows of each
# generate() call in CoMLRL's order (depth first: a node, then its children's subtrees), two rows of one width, each
# ending in its EOS, so the tokens CoMLRL scores (row[:-1]) are the completion without its EOS and no pad is scored or
# fed. Token ids are printable ASCII (and merges), so every completion decodes to a text of its own.
MAGRPO_MT = {
    "items": MT_ITEMS,  # two turns: a root and two children per item
    "turns": 2,
    "rows": [
        [
            [[67, 68, EOS], [69, 70, EOS]], [[71, 72, 73, EOS], [74, 264, 75, EOS]], [[76, EOS], [77, EOS]],
            [[78, 79, 80, EOS], [81, 283, 82, EOS]], [[83, 84, EOS], [85, 86, EOS]], [[87, 88, 89, 90, EOS], [91, 92, 67, 68, EOS]],
        ],
        [
            [[35, 36, EOS], [37, 38, EOS]], [[39, EOS], [40, EOS]], [[41, 42, 43, EOS], [44, 288, 45, EOS]],
            [[46, 47, EOS], [48, 49, EOS]], [[50, 51, 52, EOS], [53, 295, 54, EOS]], [[55, EOS], [56, EOS]],
        ],
    ],
}
# Three turns of one item: a root, two children, four grandchildren per agent.
MAGRPO_MT3 = {
    "items": [{"prompt": "the lazy dog"}],
    "turns": 3,
    "rows": [
        [
            [[18, 19, EOS], [20, 21, EOS]], [[22, EOS], [23, EOS]], [[24, 25, EOS], [26, 27, EOS]], [[67, 18, EOS], [68, 19, EOS]],
            [[69, 260, EOS], [70, 261, EOS]], [[71, 20, 72, EOS], [73, 21, 74, EOS]], [[75, EOS], [77, EOS]],
        ],
        [
            [[35, 18, EOS], [36, 19, EOS]], [[37, 38, 39, EOS], [40, 41, 42, EOS]], [[43, EOS], [44, EOS]], [[45, 262, EOS], [46, 265, EOS]],
            [[47, 48, EOS], [49, 50, EOS]], [[51, EOS], [52, EOS]], [[53, 54, 55, EOS], [56, 57, 58, EOS]],
        ],
    ],
}


def magrpo_mt_reward(first, second):
    """The shared reward of a joint action, from its texts' code points (which JavaScript sums alike)."""
    code = lambda text: sum(ord(ch) for ch in text)
    return [(code(first[0]) % 11) / 4 - (code(second[0]) % 7) / 8]


def magrpo_multi_turn_case(name: str, episodes: dict, buffer: int, passthrough: bool, tensors: dict) -> dict:
    """CoMLRL's own MAGRPO rollout (_train_step_returns) of the episodes' items with generate() returning their rows, then
    the epoch's final drain. A node's samples enter the agents' buffers in env-step order and an agent is updated (turn
    by turn, in minibatches of train_batch_size = buffer) as soon as its buffer holds `buffer` samples, within an item
    too. The tagged formatters ignore external prompts, so a later turn's prompt is "<i> " + the transition's prompt,
    or with external_prompt_passthrough the transition's prompt as it is."""
    random.seed(0)
    torch.manual_seed(0)
    args = MAGRPOConfig(
        num_agents=2, num_turns=episodes["turns"], num_generations=2, rollout_buffer_size=buffer, early_termination_threshold=None,
        external_prompt_passthrough=passthrough,
    )
    trainer = MAGRPOTrainer(
        agents=[load_model(), load_model()], num_agents=2, tokenizer=tokenizer(), args=args, reward_func=magrpo_mt_reward,
        external_transition=mt_transition, formatters=[tagged_formatter(i) for i in range(2)],
    )
    queues = [list(calls) for calls in episodes["rows"]]

    def scripted(agent):
        def run(input_ids=None, num_return_sequences=1, **kwargs):
            rows = torch.tensor(queues[agent].pop(0))[:num_return_sequences]
            return SimpleNamespace(sequences=torch.cat([input_ids.repeat(rows.shape[0], 1), rows], dim=1))

        return run

    norms = [[], []]
    for i, agent in enumerate(trainer.agents):
        agent.generate = scripted(i)
        watch_grad_norms(trainer.optimizers[i], norms[i])
    calls = [[], []]
    generate_completions = trainer._generate_completions

    def recorded_generation(agent, batch_items, **kwargs):
        out = generate_completions(agent, batch_items, **kwargs)
        calls[kwargs["agent_idx"]].append({
            "prompt": out["prompts"][0],  # what the agent was prompted with (the formatter's output, or passed through)
            "promptIds": out["prompt_input_ids"][0].tolist(),
            "rows": [t.tolist() for t in out["completion_input_ids"][0]],
            "responseLens": out["response_lens"],
            "completions": out["completions"][0],
        })
        return out

    trainer._generate_completions = recorded_generation
    updates = []
    update, compute = trainer._update_from_samples, trainer._compute_loss_with_gradients

    def recorded_update(agent_idx, samples):
        assert len(samples) <= args.train_batch_size, "one minibatch per update"
        losses = {}

        def loss_of(agent, data, returns):
            loss = compute(agent, data, returns)
            losses[id(data)] = float(loss.detach())
            return loss

        trainer._compute_loss_with_gradients = loss_of
        try:
            update(agent_idx, list(samples))  # a copy: its shuffle leaves the recorded order alone
        finally:
            trainer._compute_loss_with_gradients = compute
        assert all(len(set(s.returns)) > 1 for s in samples), "returns that differ within each node: no zero advantages"
        records = [{
            "envStep": s.node_env_step,
            "promptIds": s.completions_data["prompt_input_ids"][0].tolist(),
            "completionIds": [t.tolist() for t in s.completions_data["completion_input_ids"][0]],
            "returns": s.returns,
            "baselineAdvantages": trainer._compute_advantages(torch.tensor(s.returns)).tolist(),
            "nodeMeanReward": s.node_mean_reward,
            "nodeMeanReturn": s.node_mean_return,
            "loss": losses[id(s.completions_data)],
        } for s in samples]
        updates.append({
            "agent": agent_idx,
            "turn": samples[0].turn_idx,
            "samples": records,
            # One minibatch: the step minimises the mean of its samples' losses.
            "loss": sum(r["loss"] for r in records) / len(records),
            "gradNorm": norms[agent_idx][sum(1 for u in updates if u["agent"] == agent_idx)],
        })

    trainer._update_from_samples = recorded_update
    for item in episodes["items"]:
        trainer._train_step_returns(item)
    trainer._drain_ready_buffers([a for a, buffered in enumerate(trainer.rollout_buffers) if buffered])  # as train()'s epoch ends
    assert not any(queues), "every row generated"
    for a in range(2):
        params(trainer.agents[a], f"{name}.after.{a}", tensors)
    return {
        "config": {
            "numAgents": 2, "numTurns": episodes["turns"], "numGenerations": 2, "rolloutBufferSize": buffer, "trainBatchSize": args.train_batch_size,
            "earlyTerminationThreshold": None,
            "externalPromptPassthrough": passthrough, "advantageMode": args.advantage_mode,
            "advantageNormalization": args.advantage_normalization, "formatters": "tagged",
        },
        "tensorPrefix": name,
        "items": episodes["items"],
        # Per agent, in call order: one call per node, as CoMLRL builds the tree (depth first).
        "generateCalls": calls,
        # In CoMLRL's order: per drain of the buffers, agent 0's turns, then agent 1's.
        "updates": updates,
    }


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


def prepare_maac(trainer: MAACTrainer, name: str, make_generate, tensors: dict):
    """Gives each agent make_generate(i) as its generate, records the critic head's initial weights, and watches the
    gradient norms; returns the actors' norm lists and the critic's (one per step, in every agent's update)."""
    for i, agent in enumerate(trainer.agents):
        agent.model.generate = make_generate(i)
    for key, t in trainer.critics[0].value_head.state_dict().items():
        tensors[f"{name}.head_init.{key}"] = t.detach().float().clone()
    actor_norms, critic_norms = [[] for _ in trainer.agents], []
    for i, optimizer in enumerate(trainer.agent_optimizers):
        watch_grad_norms(optimizer, actor_norms[i])
    watch_grad_norms(trainer.critic_optimizer, critic_norms)
    return actor_norms, critic_norms


def record_maac_after(trainer: MAACTrainer, name: str, tensors: dict) -> None:
    params(trainer.agents[0].model, f"{name}.actor_after.0", tensors)
    params(trainer.critics[0].model, f"{name}.critic_after", tensors)
    for key, t in trainer.critics[0].value_head.state_dict().items():
        tensors[f"{name}.head_after.{key}"] = t.detach().float().clone()


def maac_case(name: str, critic_type: str, tensors: dict) -> dict:
    """MAAC: the one critic reads "[Agent i] prompt" blocks (a Q critic also the joint action: one text per generation)
    and steps inside each agent's update."""
    random.seed(0)
    torch.manual_seed(0)
    args = MAACConfig(num_agents=2, num_turns=1, num_generations=2, rollout_buffer_size=2, critic_type=critic_type)
    prompts = [AC_ITEM["prompt"], AC_ITEM["prompt"] + " again"]
    trainer = MAACTrainer(
        agents=[load_model(), load_model()], critics=[load_model()], tokenizer=tokenizer(), args=args,
        formatters=[lambda item: item["prompt"], lambda item: item["prompt"] + " again"],
        reward_func=lambda prompts, *completions, **kw: list(AC_REWARDS),
    )
    actor_norms, critic_norms = prepare_maac(trainer, name, scripted_generate(AC_ROWS, []), tensors)
    rollouts = trainer._collect_rollouts(AC_ITEM)
    per_agent = []
    for i in range(2):
        samples = [r for r in rollouts if r.agent_idx == i]
        per_agent.append({
            **ac_update(trainer, i, samples),
            "criticIds": samples[0].metadata["joint_input_ids"][0].tolist(),
            "criticIdsPerGeneration": [s.metadata["joint_input_ids"][0].tolist() for s in samples],
            "completions": [s.completion for s in samples],
            "actorGradNorm": actor_norms[i][0],
            "criticGradNorm": critic_norms[i],
        })
    record_maac_after(trainer, name, tensors)
    joint_actions = [[per_agent[a]["completions"][g] for a in range(2)] for g in range(2)]
    return {
        "config": {"numAgents": 2, "numGenerations": 2, "rolloutBufferSize": 2, "criticType": critic_type, "valueLossCoef": args.value_loss_coef},
        "rewards": AC_REWARDS,
        "prompts": prompts,
        "criticText": trainer._build_critic_input(prompts),  # V's; a Q critic's has the joint action (below)
        # The joint text the critic reads for each generation (for V, the prompts' alone).
        "criticTexts": [trainer._build_critic_input(prompts, action) for action in joint_actions],
        "agents": per_agent,
    }


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true", help="strict-load our value_head.pt fixtures into CoMLRL's ValueHead")
    if parser.parse_args().check:
        check_ours()
        return
    os.makedirs(OUT, exist_ok=True)
    make_model()
    tensors = {}
    golden = {
        "library": {"comlrl": "1.4.3", "torch": torch.__version__, "transformers": __import__("transformers").__version__},
        "eos": EOS,
        "prompts": PROMPTS,
        "rows": ROWS,
        "returns": RETURNS,
        # Normalisation makes the four baselines give the same advantages; without it each mode shows.
        "magrpo": {
            "mean": magrpo_case("mean", True, tensors),
            **{f"{m}_unnormalized": magrpo_case(m, False, tensors) for m in ("mean", "raw", "max", "rloo")},
        },
        "centralized": centralized_case(tensors),
        "madpo": madpo_case(tensors),
        "reward_model": reward_model_case(tensors),
        "reward_head_init": reward_head_init_stats(),
        "maac": maac_case("maac", "v", tensors),
        "maac_q": maac_case("maac_q", "q", tensors),
        "iac": {
            "separate_v": iac_case("iac_separate_v", True, "v", None, tensors),
            "shared_q": iac_case("iac_shared_q", False, "q", 8, tensors),
        },
        # The multi-turn cases as new keys: the single-turn goldens above are unchanged by them.
        "iac_multi_turn": {
            "separate_v": iac_multi_turn_case("iac_mt_separate_v", True, "v", None, 1.0, True, tensors),
            "shared_q_discounted_unnormalized": iac_multi_turn_case("iac_mt_shared_q", False, "q", 8, 0.9, False, tensors),
            "three_turns_tagged_formatters": iac_multi_turn_case("iac_mt3_tagged", True, "v", None, 1.0, True, tensors, MT3),
            "early_termination": iac_multi_turn_case("iac_mt_early", True, "v", None, 1.0, True, tensors, MT_EARLY),
        },
        "maac_multi_turn": {critic: maac_multi_turn_case(f"maac_mt_{critic}", critic, tensors) for critic in ("v", "q")},
    }
    value_heads(tensors)
    comlrl_save_dirs(tensors)
    if os.path.isdir(os.path.join(OUT, "ours_marlhf_save")):
        golden["ours_marlhf_save"] = ours_marlhf_scores()
    # Added after every case above, so that their values (and the generators they draw from) are unchanged.
    golden["magrpo_multi_turn"] = {
        # A buffer of each agent's six nodes: one update per turn after the second item.
        "formatted": magrpo_multi_turn_case("magrpo_mt", MAGRPO_MT, 6, False, tensors),
        "passthrough": magrpo_multi_turn_case("magrpo_mt_passthrough", MAGRPO_MT, 6, True, tensors),
        # Buffers of two fill within an item: which nodes an update takes follows the env steps' depth-first order.
        "buffer_of_two": magrpo_multi_turn_case("magrpo_mt_buffer2", MAGRPO_MT, 2, False, tensors),
        "three_turns_buffer_of_two": magrpo_multi_turn_case("magrpo_mt3_buffer2", MAGRPO_MT3, 2, True, tensors),
    }
    # One MAGRPO step on rows that all end with EOS, for tokenAccounting "comlrl" (tests/golden/comlrl.test.ts).
    golden["magrpo_token_accounting"] = {
        "eos_ended": {**magrpo_case("mean", True, tensors, ROWS_EOS_ENDED, "magrpo_eos_ended"), "rows": ROWS_EOS_ENDED},
    }
    golden["wandb_run_config"] = wandb_run_configs()
    save_file(tensors, os.path.join(OUT, "goldens.safetensors"))
    with open(os.path.join(OUT, "goldens.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: {len(tensors)} tensors")


if __name__ == "__main__":
    sys.exit(main())
