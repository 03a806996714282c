"""Single-turn MAGRPO and centralized MAGRPO updates (tests/golden/comlrl.test.ts)."""

import random

import torch

from comlrl.trainers.preference.centralized import TaggedCentralizedComparatorAdapter
from comlrl.trainers.reinforce.centralized_magrpo import CentralizedMAGRPOConfig, CentralizedMAGRPOTrainer
from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer, NodeSample

from .common import PROMPTS, RETURNS, ROWS, load_model, natural, params, tokenizer, watch_grad_norms


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
