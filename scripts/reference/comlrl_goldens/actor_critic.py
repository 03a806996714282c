"""One IAC update and one MAAC round from scripted generations (tests/golden/comlrl-actor-critic.test.ts)."""

import random

import torch

from comlrl.trainers.actor_critic.iac import IACConfig, IACTrainer
from comlrl.trainers.actor_critic.maac import MAACConfig, MAACTrainer

from .common import EOS, load_model, params, record_backward, tokenizer, watch_grad_norms


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
