"""Speed against the real CoMLRL 1.4.3: one epoch of each trainer on both sides (README "Against CoMLRL").

Same model directory, task (the demo's cover-the-vowels: the same item prompts through the same tokenizer's chat
template, checked byte for byte, and the same reward), config (ours resolved, then mapped field by field) and
thread count on both sides. Each run is its own process: a one-item warm-up epoch with a throwaway trainer, then
train() of one epoch, timed. Runs alternate between the sides (the first side alternates too); the driver writes the
medians, min/max and the ratio CoMLRL / ours to bench/results/compare-comlrl-<UTC time>.json and .md, with each run's
peak resident memory (the ru_maxrss wait4 reports for the run's process tree, as GNU time's "Maximum resident set
size": the largest process of it, the warm-up epoch included).

    python -m venv /tmp/ref && /tmp/ref/bin/pip install -r scripts/reference/requirements.txt
    /tmp/ref/bin/python scripts/reference/compare_speed.py [--trainers magrpo,iac,maac,madpo,marlhf]
        [--sizes demo,0.5b-short,0.5b,0.5b-lean,smollm2] [--pairs 3] [--threads 2] [--items 16]

The smollm2 size trains the real SmolLM2-135M-Instruct (its PyPI GGUF, dequantized to fp32 by smollm2_hf_dir.py into
bench/results/) on the paragraph-summary task (src/tasks/paragraph-summary.ts, mirrored below): our `config` prints
the task's items, this side renders them through the same chat template and checks the prompts equal ours.

The driver runs our side with `npx tsx scripts/reference/compare-speed-ours.ts` (COMLRL_ADDON is passed through).
"""

import argparse
import dataclasses
import datetime
import gc
import json
import math
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CACHE = os.path.join(ROOT, "bench", "results", "compare-comlrl-models")  # bench/results/ is git-ignored
OURS = ["npx", "tsx", os.path.join("scripts", "reference", "compare-speed-ours.ts")]
TRAINERS = ["magrpo", "iac", "maac", "madpo", "marlhf"]

# The 0.5B size: a random model of Qwen2.5-0.5B's shape with the demo tokenizer (the model's vocabulary is larger
# than the tokenizer's; ids past it decode to nothing on both sides). Two fp32 0.5B agents with AdamW take ~16 GB,
# so a separate 0.5B critic or reward model does not fit in 23 GB: IAC puts value heads on the actors
# (useSeparateCritic false), MAAC's shared critic and MARLHF's reward model are a small model of the same vocabulary.
QWEN_05B = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                num_key_value_heads=2, rope_theta=1e6, tie_word_embeddings=True, max_position_embeddings=32768)
SMALL_CRITIC = dict(QWEN_05B, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2)
# Our memory-lean settings (docs/memory.md): the agents' updates in turn (one CPU lane), so that one agent's backward is
# alive at a time, and glibc's mmap threshold fixed at 1 MiB, so that freed blocks go back to the system.
LEAN_ENV = {"COMLRL_CPU_LANES": "1", "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=1048576"}
# The 0.5B sizes share their model and settings: "0.5b-short" samples 8 new tokens (what the first comparison ran),
# "0.5b" 64 (a completion length users train with).
QWEN_05B_PLAN = {
    "by_trainer": {
        "magrpo": {"numGenerations": 4},
        "iac": {"useSeparateCritic": False},
        "madpo": {"preferenceNumCandidates": 4, "preferencePairsPerSample": 2},
        "marlhf": {"numGenerations": 4, "preferenceNumCandidates": 4, "preferencePairsPerSample": 2, "rewardModelName": "{small_critic}"},
    },
    # A random model's text holds no vowels (its ids past the demo tokenizer decode to "<id>"), so every candidate
    # ties on cover-the-vowels and no preference pair forms; the mean of those ids' digits separates candidates.
    "reward_by_trainer": {"madpo": "digits", "marlhf": "digits"},
}
SIZES = {
    "demo": {"items": 16, "pairs": 3, "overrides": {}, "by_trainer": {}},
    "0.5b-short": {"items": 4, "pairs": 1, "overrides": {"maxNewTokens": 8}, **QWEN_05B_PLAN},
    # Sizes with "rooflines" measure the machine's ceilings before and after their pairs, and read our phases against
    # the floors of the work the config asks for (scripts/reference/phase_table.py makes their tables).
    "0.5b": {"items": 2, "pairs": 1, "overrides": {"maxNewTokens": 64}, "rooflines": True,
             "ours_variants": {"ours-lean": LEAN_ENV}, **QWEN_05B_PLAN},
    # "0.5b" with only our memory-lean settings; CoMLRL's side runs as at "0.5b".
    "0.5b-lean": {"items": 2, "pairs": 1, "overrides": {"maxNewTokens": 64}, "ours_env": LEAN_ENV, **QWEN_05B_PLAN},
    # A real pretrained model on a real writing task (docs/performance.md's headline table). Like "0.5b", our side
    # also runs in the lean settings, as side "ours-lean", in the same rotation.
    "smollm2": {"items": 4, "pairs": 2, "reward": "paragraphs", "by_trainer": {}, "rooflines": True,
                "overrides": {"numGenerations": 4, "maxNewTokens": 48, "agentLearningRate": 1e-5},
                "ours_variants": {"ours-lean": LEAN_ENV}},
}
SMOLLM2_GGUF = os.path.expanduser("~/.cache/comlrl/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")

TOPICS = ["a song", "a game", "a code", "a chant", "a puzzle", "a signal", "a rhyme", "a pattern"]
VOWELS = "aeiou"


# ---- the task, as src/tasks/cover-vowels.ts defines it ----

def dataset(count):
    return [{"prompt": f"Together write the five vowels as {TOPICS[i % len(TOPICS)]}. Each of you writes three letters."}
            for i in range(count)]


def formatters(tokenizer):
    def role(name):
        def format_item(item):
            messages = [{"role": "system", "content": f"You are writer {name}."}, {"role": "user", "content": item["prompt"]}]
            return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return format_item
    return [role("A"), role("B")]


def contribution(text):
    return list(re.sub(r"\s+", "", text).lower())[:3]


def reward(completions_a, completions_b):
    return [sum(v in set(contribution(a) + contribution(b)) for v in VOWELS) / len(VOWELS)
            for a, b in zip(completions_a, completions_b)]


def digits_reward(completions_a, completions_b):
    """The mean digit value in the two completions over 9, 0 without digits (as compare-speed-ours.ts --reward
    digits): continuous, so candidates practically never tie."""
    def mean_digit(text):
        digits = [int(d) for d in re.findall(r"[0-9]", text)]
        return sum(digits) / (9 * len(digits)) if digits else 0.0
    return [mean_digit(a + b) for a, b in zip(completions_a, completions_b)]


# ---- the paragraph-summary task, as src/tasks/paragraph-summary.ts defines it ----

def paragraph_formatters(tokenizer):
    def role(system, instruction):
        def format_item(item):
            messages = [{"role": "system", "content": system}, {"role": "user", "content": f"{instruction}\n\n{item['prompt']}"}]
            return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return format_item
    return [role("You write one-sentence summaries.", "Summarize this paragraph in one short sentence."),
            role("You write detailed accounts.", "Describe in detail everything this paragraph says.")]


def clamp01(x):
    return max(0.0, min(1.0, x))


def unique_words(text):
    return len(set(re.findall(r"\w+", text.lower())))


def summary_form(summary):
    trimmed = summary.strip()
    one_sentence = 0.5 if len(re.findall(r"[.!?]+(?=\s|$)", trimmed)) == 1 and re.search(r"[.!?]$", trimmed) else 0.0
    return one_sentence + 0.5 * clamp01((30 - len(trimmed.split())) / 15)


def paragraph_reward(summaries, accounts):
    def one(summary, account):
        if not summary.strip():
            return 0.0
        length = clamp01((len(account) / len(summary) - 1) / 3)
        unique = unique_words(summary)
        vocabulary = 0.0 if unique == 0 else clamp01((unique_words(account) / unique - 1) / 2)
        return (summary_form(summary) + length + vocabulary) / 3
    return [one(s, a) for s, a in zip(summaries, accounts)]


REWARDS = {"vowels": reward, "digits": digits_reward, "paragraphs": paragraph_reward}


# ---- CoMLRL's side: one run ----

def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def comlrl_config(trainer, ours):
    """Our resolved config, field by field under CoMLRL's names; our fields CoMLRL lacks are returned separately."""
    import torch
    from comlrl.trainers.actor_critic.iac import IACConfig
    from comlrl.trainers.actor_critic.maac import MAACConfig
    from comlrl.trainers.preference.madpo import MADPOConfig
    from comlrl.trainers.preference.marlhf import MARLHFConfig
    from comlrl.trainers.reinforce.magrpo import MAGRPOConfig

    cls = {"magrpo": MAGRPOConfig, "iac": IACConfig, "maac": MAACConfig, "madpo": MADPOConfig, "marlhf": MARLHFConfig}[trainer]
    names = {f.name for f in dataclasses.fields(cls)}
    fields, ours_only = {}, {}
    for key, value in ours.items():
        (fields if snake(key) in names else ours_only)[snake(key)] = value
    if fields.get("reward_model_device", "").startswith("cuda") and not torch.cuda.is_available():
        fields["reward_model_device"] = "cpu"  # ours falls back to the agents' device; CoMLRL would fail
    return cls(**fields), ours_only


class StageClock:
    """Seconds in HF generate(), in backward() and in optimizer steps, and steps per optimizer: global hooks, so
    every CoMLRL trainer (and the trainers MARLHF builds inside) is measured alike."""

    def __init__(self):
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
        from transformers.generation.utils import GenerationMixin

        self.seconds = {"generate": 0.0, "backward": 0.0, "optimizer_step": 0.0}
        self.steps = {}
        self.generated_rows = 0
        self._step_started = {}
        clock = self

        def timed(name, fn):
            def wrapper(*args, **kwargs):
                started = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    clock.seconds[name] += time.perf_counter() - started
            return wrapper

        generate = timed("generate", GenerationMixin.generate)

        def counted(*args, **kwargs):
            out = generate(*args, **kwargs)
            clock.generated_rows += int((out.sequences if hasattr(out, "sequences") else out).shape[0])
            return out

        GenerationMixin.generate = counted
        torch.Tensor.backward = timed("backward", torch.Tensor.backward)

        def pre(optimizer, args, kwargs):
            clock._step_started[id(optimizer)] = time.perf_counter()

        def post(optimizer, args, kwargs):
            clock.seconds["optimizer_step"] += time.perf_counter() - clock._step_started.pop(id(optimizer))
            clock.steps[id(optimizer)] = clock.steps.get(id(optimizer), 0) + 1

        register_optimizer_step_pre_hook(pre)
        register_optimizer_step_post_hook(post)

    def reset(self):
        self.seconds = {k: 0.0 for k in self.seconds}
        self.steps = {}
        self.generated_rows = 0


def use_unused_pad_token(tokenizer, ids):
    """Makes the tokenizer's pad token one that no prompt holds. CoMLRL 1.4.3's MAGRPO takes a prompt to end at its
    first pad token (reinforce/magrpo.py, `pad_positions` of the prompt ids) and a completion to end at its first pad
    token; SmolLM2's pad token is its eos, <|im_end|>, which ends every chat turn of the prompt, so every completion
    would be cut to nothing (and score 0). Another special token no prompt holds takes its place, as a CoMLRL user
    must do; comlrl_trainer makes generate() pad with it, so a completion still ends at the eos it samples."""
    used = {i for agent in ids for prompt in agent for i in prompt}
    if tokenizer.pad_token_id is None or tokenizer.pad_token_id not in used:
        return
    unused = [t for t in tokenizer.all_special_tokens if tokenizer.convert_tokens_to_ids(t) not in used]
    if not unused:
        raise SystemExit("every special token of the tokenizer occurs in the prompts; CoMLRL needs a pad token they do not hold")
    tokenizer.pad_token = unused[0]


def comlrl_setup(spec):
    """The tokenizer, formatters and items of a CoMLRL run, its prompts checked against ours (text and ids), and our
    config mapped to CoMLRL's (with our fields CoMLRL lacks)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(spec["model"])
    if spec["reward"] == "paragraphs":
        formats, items = paragraph_formatters(tokenizer), spec["ours"]["items"]
    else:
        formats, items = formatters(tokenizer), dataset(spec["items"])
    prompts = [[f(item) for item in items] for f in formats]
    probe = spec["ours"].get("rewardProbe")
    if probe:
        theirs = REWARDS[spec["reward"]](probe["summaries"], probe["accounts"])
        if any(abs(a - b) > 1e-12 for a, b in zip(theirs, probe["rewards"])) or len(theirs) != len(probe["rewards"]):
            raise SystemExit("this side's reward differs from ours: " + json.dumps({"comlrl": theirs, "ours": probe["rewards"]}))
    if prompts != spec["ours"]["prompts"]:
        raise SystemExit("the rendered prompts differ from ours: " + json.dumps({"comlrl": prompts[0][0], "ours": spec["ours"]["prompts"][0][0]}))
    ids = [[tokenizer(p)["input_ids"] for p in agent] for agent in prompts]
    if ids != spec["ours"]["promptIds"]:
        raise SystemExit("the prompts' token ids differ from ours")
    use_unused_pad_token(tokenizer, ids)
    args, ours_only = comlrl_config(spec["trainer"], spec["ours"]["config"])
    return tokenizer, formats, items, args, ours_only


def comlrl_trainer(spec, tokenizer, formats, args, data, reward_func=None, **extra):
    """CoMLRL's trainer of spec["trainer"] on data (reward_func: default the spec's reward; extra: more trainer
    arguments, such as eval_dataset)."""
    from comlrl.trainers.actor_critic.iac import IACTrainer
    from comlrl.trainers.actor_critic.maac import MAACTrainer
    from comlrl.trainers.preference.madpo import MADPOTrainer
    from comlrl.trainers.preference.marlhf import MARLHFTrainer
    from comlrl.trainers.reinforce.magrpo import MAGRPOTrainer

    common = dict(agent_model=spec["model"], tokenizer=tokenizer, reward_func=reward_func or REWARDS[spec["reward"]], formatters=formats,
                  train_dataset=data, args=args, **extra)
    trainer = spec["trainer"]
    if trainer in ("iac", "maac"):
        critic = None if getattr(args, "use_separate_critic", True) is False else spec["critic"]
        made = (IACTrainer if trainer == "iac" else MAACTrainer)(critic_model=critic, **common)
    else:
        made = {"magrpo": MAGRPOTrainer, "madpo": MADPOTrainer, "marlhf": MARLHFTrainer}[trainer](num_agents=2, **common)
    made.verbose = False  # no tqdm bar: ours runs quiet; neither side logs to W&B
    for agent in getattr(made, "agents", []):
        agent.generation_config.pad_token_id = tokenizer.pad_token_id  # see use_unused_pad_token
    return made


def comlrl_run(spec):
    import torch

    torch.set_num_threads(spec["threads"])
    clock = StageClock()  # installed before the warm-up so both epochs pay the same hook overhead
    tokenizer, formats, items, args, ours_only = comlrl_setup(spec)

    def build(data):
        return comlrl_trainer(spec, tokenizer, formats, args, data)

    warm = build(items[:1])
    warm.train()
    del warm
    gc.collect()
    trainer = build(items)
    clock.reset()
    started, cpu = time.perf_counter(), time.process_time()
    trainer.train()
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
    print(json.dumps({
        "side": "comlrl", "trainer": spec["trainer"], "items": spec["items"], "threads": torch.get_num_threads(),
        "seconds": seconds, "cpuSeconds": cpu_seconds, "envSteps": getattr(trainer, "env_step", None),
        "optimizerSteps": sorted(clock.steps.values()), "generatedRows": clock.generated_rows, "timings": clock.seconds,
        "oursOnlyFields": sorted(ours_only), "padToken": tokenizer.pad_token,
    }))


# ---- the models ----

def make_model(name, shape, tokenizer_dir):
    """A random Qwen2 model of this shape with the demo tokenizer, cached under bench/results/ (never committed)."""
    path = os.path.join(CACHE, name)
    if os.path.exists(os.path.join(path, "config.json")):
        return path
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = Qwen2Config(**shape, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None)
    partial = path + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    Qwen2ForCausalLM(config).save_pretrained(partial)
    # The demo's tokenizer and generation_config.json files as they are (save_pretrained would rewrite them).
    for name in os.listdir(tokenizer_dir):
        if name not in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(tokenizer_dir, name), os.path.join(partial, name))
    pad_vocabulary(os.path.join(partial, "tokenizer.json"), shape["vocab_size"])
    os.rename(partial, path)
    return path


def pad_vocabulary(tokenizer_json, size):
    """Gives every id of the model's vocabulary a token, "<id>", that no merge produces: a random model samples ids
    past the demo tokenizer's 512 (as a random Qwen2.5 would past its tokenizer's 151,665), and ours refuses to decode
    an id it has no token for. Encoding is unchanged, so the prompts stay the demo's."""
    with open(tokenizer_json) as f:
        spec = json.load(f)
    vocab = spec["model"]["vocab"]
    first = 1 + max([*vocab.values(), *(t["id"] for t in spec["added_tokens"])])
    for i in range(first, size):
        vocab[f"<{i}>"] = i
    # The special tokens join the model's vocabulary at their ids too: transformers 5 appends special tokens it does
    # not find there after the last vocabulary id, which would move them.
    vocab.update({t["content"]: t["id"] for t in spec["added_tokens"]})
    if len(vocab) != size or len(set(vocab.values())) != size:
        raise SystemExit(f"{tokenizer_json}: a padding token collides with an existing one")
    with open(tokenizer_json, "w") as f:
        json.dump(spec, f, ensure_ascii=False)


def models(size, env):
    demo = os.path.join(CACHE, "demo")
    if not os.path.exists(os.path.join(demo, "config.json")):
        subprocess.run(OURS + ["make-demo-model", demo], cwd=ROOT, env=env, check=True)
    if size == "demo":
        return {"model": demo, "critic": demo, "small_critic": demo}
    if size == "smollm2":
        smollm2 = os.path.join(CACHE, "smollm2")
        if not os.path.exists(os.path.join(smollm2, "config.json")):
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "reference", "smollm2_hf_dir.py"), SMOLLM2_GGUF, smollm2], check=True)
        return {"model": smollm2, "critic": smollm2, "small_critic": smollm2}
    small = make_model("small-critic-151936", SMALL_CRITIC, demo)
    return {"model": make_model("qwen2.5-0.5b-shape", QWEN_05B, demo), "critic": small, "small_critic": small}


# ---- the driver ----

def last_json(stdout, what):
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"{what} printed no result")
    return json.loads(lines[-1])


def run_side(side, trainer, size, dirs, items, threads, overrides, ours_config, env, reward_name):
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    common = ["--trainer", trainer, "--model", dirs["model"], "--items", str(items), "--reward", reward_name]
    variants = SIZES[size].get("ours_variants", {})
    if side == "ours" or side in variants:
        command = OURS + ["run", *common, "--critic", dirs["critic"], "--overrides", json.dumps(overrides)]
        run_env = dict(env, COMLRL_NUM_THREADS=str(threads), **SIZES[size].get("ours_env", {}), **variants.get(side, {}))
    else:
        spec = dict(trainer=trainer, items=items, threads=threads, ours=ours_config, reward=reward_name, **dirs)
        command = [sys.executable, __file__, "--comlrl-run", json.dumps(spec)]
        run_env = dict(env, OMP_NUM_THREADS=str(threads))
    started = time.perf_counter()
    returncode, stdout, stderr, peak_kib, cpu_seconds = run_measured(command, run_env)
    if returncode != 0:
        raise SystemExit(f"{side} {trainer} ({size}) failed:\n{stderr[-4000:]}")
    result = last_json(stdout, f"{side} {trainer}")
    result.update(side=side, size=size, loadavg=[float(x) for x in load], processSeconds=time.perf_counter() - started, peakRssMiB=peak_kib / 1024,
                  processCpuSeconds=cpu_seconds)
    print(f"  {side:6} {trainer:6} {size:10} {result['seconds']:8.2f} s   peak RSS {peak_kib / 2**20:6.2f} GiB   load {' '.join(load)}", flush=True)
    return result


def run_measured(command, env):
    """Runs command to its end: exit status, stdout, stderr, the peak resident KiB of its process tree (wait4's
    ru_maxrss: the largest of the process and its waited-for descendants, as GNU time reports it) and the CPU seconds
    (user + system) of that tree: on a machine others load, the CPU a run spends moves less than its wall time."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return process.returncode, out.read(), err.read(), usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def summary(runs):
    seconds = [r["seconds"] for r in runs]
    return {"median": statistics.median(seconds), "min": min(seconds), "max": max(seconds), "n": len(seconds),
            "peakRssMiB": statistics.median(r["peakRssMiB"] for r in runs)}


def stages(runs):
    """The stage seconds of the median run (the lower median for an even count), as "name s, ..."."""
    run = sorted(runs, key=lambda r: r["seconds"])[(len(runs) - 1) // 2]
    return ", ".join(f"{name} {seconds:.2f}" for name, seconds in run["timings"].items() if seconds >= 0.005)


# ---- the rooflines (the sizes with "rooflines") ----

def model_parameters(model_dir):
    """(all parameters, those of the LM head) from the model's safetensors header and config (a tied head counted once)."""
    import struct
    with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    total = sum(math.prod(t["shape"]) for name, t in header.items() if name != "__metadata__")
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    return total, config["vocab_size"] * config["hidden_size"]


def ceilings(env, threads):
    done = subprocess.run(OURS + ["ceilings"], cwd=ROOT, env=dict(env, COMLRL_NUM_THREADS=str(threads)), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the ceilings failed:\n{done.stderr[-4000:]}")
    return last_json(done.stdout, "ceilings")


def rooflines(run, total, head, ceiling):
    """The generation and update phases of one of our runs against the machine's ceilings, for the work its config
    asks for (counted by our side). Each phase's floor is the roofline's: the longer of its bytes over the read
    bandwidth and its FLOPs over the fp32 matmul rate. Generation streams every weight once per prefill or decode step
    of a generate() call (fp32: 4 bytes) and does 2 FLOPs per matmul weight per token it computes (the body's on every
    prompt and completion token, the LM head's on the completion tokens); with a rollout buffer's rows in one decode
    step its FLOPs per weight byte come near some hosts' ratio of the two ceilings, where either may bound it. The
    update does 6 FLOPs per matmul weight per token it trains on (forward and backward: the body's weights (all but
    the embedding, which is only read) on each prompt once and each completion token, the LM head's on the completion
    tokens). Attention's own FLOPs (under 2% at these lengths) are left out."""
    g = run["generation"]
    body = total - head
    matmul = ceiling["matmulGflops"] * 1e9
    generation_read = g["weightPasses"] * total * 4 / (ceiling["readGbps"] * 1e9)
    token_flops = body * (g["promptTokens"] + g["completionTokens"]) + head * g["completionTokens"]
    generation_compute = 2 * token_flops / matmul
    generation_floor = max(generation_read, generation_compute)
    update_flops = 6 * token_flops
    update_floor = update_flops / matmul
    return {"generationReadSeconds": generation_read, "generationComputeSeconds": generation_compute,
            "generationFloorSeconds": generation_floor, "updateFlops": update_flops, "updateFloorSeconds": update_floor,
            "generationFraction": generation_floor / run["timings"]["train/generation"],
            "updateFraction": update_floor / run["timings"]["train/update"]}


def table(rows, header):
    lines = [header, "", "| trainer | size | ours median (min–max) | CoMLRL median (min–max) | CoMLRL / ours | "
             "peak RSS ours / CoMLRL, GiB | ours / CoMLRL memory | pairs | load (1 min) | ours: stages, s | "
             "CoMLRL: generate, backward, optimizer step, s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for row in rows:
        o, c = row["ours"], row["comlrl"]
        loads = [r["loadavg"][0] for r in row["runs"]]
        by_side = {side: [r for r in row["runs"] if r["side"] == side] for side in ("ours", "comlrl")}
        lines.append(f"| {row['trainer']} | {row['size']} | {o['median']:.2f} s ({o['min']:.2f}–{o['max']:.2f}) | "
                     f"{c['median']:.2f} s ({c['min']:.2f}–{c['max']:.2f}) | {c['median'] / o['median']:.2f}× | "
                     f"{o['peakRssMiB'] / 1024:.2f} / {c['peakRssMiB'] / 1024:.2f} | {o['peakRssMiB'] / c['peakRssMiB']:.2f}× | {o['n']} | "
                     f"{min(loads):.1f}–{max(loads):.1f} | {stages(by_side['ours'])} | {stages(by_side['comlrl'])} |")
    return "\n".join(lines)


def drive(options):
    env = dict(os.environ)
    stamp = datetime.datetime.now(datetime.timezone.utc)
    rows = []
    for size in options.sizes.split(","):
        if size not in SIZES:
            raise SystemExit(f"--sizes: {size} is not one of {', '.join(SIZES)}")
        plan = SIZES[size]
        dirs = models(size, env)
        items = options.items or plan["items"]
        pairs = options.pairs or plan["pairs"]
        for trainer in options.trainers.split(","):
            if trainer not in TRAINERS:
                raise SystemExit(f"--trainers: {trainer} is not one of {', '.join(TRAINERS)}")
            overrides = {key: value.format(**dirs) if isinstance(value, str) else value
                         for key, value in {**plan["overrides"], **plan["by_trainer"].get(trainer, {})}.items()}
            reward_name = plan.get("reward_by_trainer", {}).get(trainer, plan.get("reward", "vowels"))
            done = subprocess.run(OURS + ["config", "--trainer", trainer, "--model", dirs["model"], "--items", str(items),
                                          "--overrides", json.dumps(overrides), "--reward", reward_name], cwd=ROOT, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"our config for {trainer} failed:\n{done.stderr[-4000:]}")
            ours_config = last_json(done.stdout, "config")
            runs = []
            machine = [ceilings(env, options.threads)] if plan.get("rooflines") else []
            sides = ["ours", *plan.get("ours_variants", {}), "comlrl"]
            for pair in range(pairs):
                order = sides if pair % 2 == 0 else sides[::-1]
                for side in order:
                    runs.append(run_side(side, trainer, size, dirs, items, options.threads, overrides, ours_config, env, reward_name))
            if machine:
                machine.append(ceilings(env, options.threads))
                # The higher of the two: a ceiling measured while others took the CPU would flatter every fraction.
                ceiling = {key: max(m[key] for m in machine) for key in ("matmulGflops", "readGbps")}
                total, head = model_parameters(dirs["model"])
                for run in runs:
                    if run["side"] != "comlrl":
                        run["roofline"] = rooflines(run, total, head, ceiling)
                print(f"  ceilings {machine}; parameters {total}, LM head {head}", flush=True)
            rows.append({
                "trainer": trainer, "size": size, "items": items, "threads": options.threads, "reward": reward_name,
                "config": ours_config["config"], **({"ceilings": machine} if machine else {}),
                "ours": summary([r for r in runs if r["side"] == "ours"]),
                "comlrl": summary([r for r in runs if r["side"] == "comlrl"]), "runs": runs,
                **{variant: summary([r for r in runs if r["side"] == variant]) for variant in plan.get("ours_variants", {})},
            })
            rows[-1]["ratio"] = rows[-1]["comlrl"]["median"] / rows[-1]["ours"]["median"]
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), platform.processor())
    header = (f"One epoch, seconds, {stamp:%Y-%m-%d %H:%M} UTC, {socket.gethostname()} ({cpu}, {os.cpu_count()} cores), "
              f"{options.threads} threads per side")
    text = table(rows, header)
    out = os.path.join(ROOT, "bench", "results", f"compare-comlrl-{stamp:%Y%m%d-%H%M%S}")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump({"date": stamp.isoformat(), "host": socket.gethostname(), "cpu": cpu, "threads": options.threads, "rows": rows}, f, indent=1)
    with open(out + ".md", "w") as f:
        f.write(text + "\n")
    print(text)
    print(f"\nwrote {out}.json and .md")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trainers", default=",".join(TRAINERS))
    parser.add_argument("--sizes", default="demo")
    parser.add_argument("--pairs", type=int, default=0, help="runs per side (default: 3 at demo size, 1 at the 0.5b sizes)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--items", type=int, default=0, help="items in the timed epoch (default: 16 at demo size, 4 at 0.5b-short, 2 at 0.5b)")
    parser.add_argument("--comlrl-run", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.comlrl_run:
        comlrl_run(json.loads(options.comlrl_run))
    else:
        drive(options)


if __name__ == "__main__":
    main()
