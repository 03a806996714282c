"""Golden updates from the real CoMLRL 1.4.3 for tests/golden/comlrl*.test.ts (README "Checking against CoMLRL").

Runs CoMLRL's own update code on a tiny Qwen2 model (made here with transformers) from fixed rollouts, and writes
tests/golden/comlrl/: the model (model/), goldens.json (inputs, losses, gradient norms, CoMLRL's token accounting)
and goldens.safetensors (parameters after each step, value-head weights). Our tests replay the same rollouts.

    python -m venv /tmp/ref && /tmp/ref/bin/pip install -r scripts/reference/requirements.txt
    /tmp/ref/bin/python scripts/reference/make_comlrl_goldens.py            # writes the goldens
    /tmp/ref/bin/python scripts/reference/make_comlrl_goldens.py --check    # our files, loaded by CoMLRL

MAGRPO-family rollouts are NodeSamples handed to `_update_from_samples`; actor-critic rollouts come from the
trainer's own `_collect_rollouts` with the model's `generate` replaced by one that returns given token ids. Each
golden's cases are in comlrl_goldens/, a module per test file beside common.py's model and recorders; main() runs
them in one fixed order, which the seeded goldens depend on.
"""

import argparse
import json
import os
import sys

import torch
from safetensors.torch import save_file

from comlrl_goldens.actor_critic import iac_case, maac_case
from comlrl_goldens.actor_critic_multi_turn import MT3, MT_EARLY, iac_multi_turn_case, maac_multi_turn_case
from comlrl_goldens.common import EOS, OUT, PROMPTS, RETURNS, ROWS, ROWS_EOS_ENDED, make_model
from comlrl_goldens.interop import check_ours, comlrl_save_dirs, ours_marlhf_scores, value_heads
from comlrl_goldens.magrpo import centralized_case, magrpo_case
from comlrl_goldens.magrpo_multi_turn import MAGRPO_MT, MAGRPO_MT3, magrpo_multi_turn_case
from comlrl_goldens.preference import madpo_case, reward_head_init_stats, reward_model_case
from comlrl_goldens.wandb_run_config import wandb_run_configs


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
