"""Multi-turn MAGRPO through CoMLRL's own rollout (tests/golden/comlrl-magrpo-multi-turn.test.ts)."""

import random
from types import SimpleNamespace

import torch

from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer

from .actor_critic_multi_turn import MT_ITEMS, mt_transition, tagged_formatter
from .common import EOS, load_model, params, tokenizer, watch_grad_norms


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
