"""Learning curves against the real CoMLRL 1.4.3 (docs/learning-parity.md): N epochs of the demo per seed per side.

The same model directory, prompts (checked byte for byte), reward and mapped config as compare_speed.py, whose
mapping this imports; each run is its own process with one thread. The seed is our config's `seed`; CoMLRL has none,
so its side seeds Python's, NumPy's and torch's generators with it before building the trainer. What a run records
per epoch is the task reward (cover-the-vowels), on the same samples on both sides:

* MAGRPO, IAC, MAAC: every joint action of the epoch's training rollouts;
* MARLHF: the joint actions of its RL epoch's rollouts (whose training reward is the reward model's score; the task
  reward is computed beside it on the same completions), after one pair collection and one reward-model epoch;
* MADPO (offline DPO epochs over pairs collected once, so no sampling in training): each side's own evaluate() on
  the 16 training items (one joint sample each) after every epoch, and once before the first.

    /work/venv-trl/bin/python scripts/reference/compare_learning.py [--trainers magrpo,iac,maac,madpo,marlhf]
        [--seeds 6] [--first-seed 1] [--epochs 15] [--jobs 2] [--accountings exact,comlrl] [--out docs/data/learning-parity.json]
        [--size demo|smollm2] [--items 16] [--overrides '{"agentLearningRate": 5e-5}']

`--size smollm2` runs the real SmolLM2-135M-Instruct on the paragraph-summary task with compare_speed.py's smollm2
settings (its reward, items and overrides; `--overrides` adds to them) in place of the demo.

Runs already in the output file (same trainer, side, accounting, seed and epochs) are kept, so a study can be
extended or resumed; the file is rewritten after every run. `--time-one-epoch` instead times one epoch per side per
trainer (to size a study) and prints it.
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_speed as speed  # noqa: E402  (the mapping, the task and the models, shared with the speed comparison)

ROOT = speed.ROOT
DEFAULT_OUT = os.path.join(ROOT, "docs", "data", "learning-parity.json")
ITEMS = 16
# Our MAGRPO-family token accounting (docs/magrpo.md): MAGRPO and MARLHF's MAGRPO RL phase; CoMLRL always scores its own way.
ACCOUNTED = {"magrpo", "marlhf"}


# ---- CoMLRL's side: one run ----

def comlrl_learn(spec):
    import random

    import numpy
    import torch

    torch.set_num_threads(spec["threads"])
    random.seed(spec["seed"])
    numpy.random.seed(spec["seed"])
    torch.manual_seed(spec["seed"])
    tokenizer, formats, items, args, ours_only = speed.comlrl_setup(spec)
    task = speed.REWARDS[spec["reward"]]
    trainer_name, epochs = spec["trainer"], spec["epochs"]
    rewards = [[] for _ in range(epochs + 1)]  # [0]: before the first epoch (pair collection)
    # Every CoMLRL trainer asks for the train dataloader once per epoch; MADPO and MARLHF once more first, to collect
    # their pairs.
    state = {"epoch": -1 if trainer_name in ("madpo", "marlhf") else 0}

    def reward(completions_a, completions_b):
        values = task(completions_a, completions_b)
        rewards[max(state["epoch"], 0) if trainer_name not in ("madpo", "marlhf") else 0].extend(values)
        return values

    extra = {"eval_dataset": items} if trainer_name == "madpo" else {}
    trainer = speed.comlrl_trainer(spec, tokenizer, formats, args, items, reward_func=reward, **extra)
    dataloader = trainer.get_train_dataloader

    def counted_dataloader(*a, **k):
        state["epoch"] += 1
        return dataloader(*a, **k)

    trainer.get_train_dataloader = counted_dataloader
    evaluations = []
    if trainer_name == "marlhf":
        score = trainer._compute_reward_model_rewards

        def scored(prompts, completions_list, batch_items=None):
            m = min(len(c) for c in completions_list)
            rewards[state["epoch"]].extend(task(completions_list[0][:m], completions_list[1][:m]))
            return score(prompts, completions_list, batch_items=batch_items)

        trainer._compute_reward_model_rewards = scored
    if trainer_name == "madpo":
        train_pairs = trainer._train_preference_pairs

        def evaluate():
            evaluations.append(trainer.evaluate(num_eval_samples=len(items))["eval/turn_1/reward_mean"])

        def with_evaluations(pairs, **kwargs):
            evaluate()
            return train_pairs(pairs, epoch_callback=lambda epoch, updates: evaluate(), **kwargs)

        trainer._train_preference_pairs = with_evaluations
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    print(json.dumps({"side": "comlrl", "seconds": seconds, "threads": torch.get_num_threads(), "rewards": rewards,
                      "evaluations": evaluations, "oursOnlyFields": sorted(ours_only), "padToken": tokenizer.pad_token}))


# ---- the driver ----

def curve(result, trainer, epochs, items):
    """Mean task reward per epoch (MADPO: the evaluation after each epoch) and the sample counts behind each."""
    if trainer == "madpo":
        if len(result["evaluations"]) != epochs + 1:
            raise SystemExit(f"{trainer} {result['side']}: {len(result['evaluations'])} evaluations, expected {epochs + 1}")
        return result["evaluations"][1:], [items] * epochs
    per_epoch = result["rewards"][1:]
    if len(per_epoch) != epochs or any(len(r) == 0 for r in per_epoch):
        raise SystemExit(f"{trainer} {result['side']}: rewards per epoch {[len(r) for r in per_epoch]}, expected {epochs} non-empty")
    return [sum(r) / len(r) for r in per_epoch], [len(r) for r in per_epoch]


def run_one(job, dirs, ours_configs, env, epochs, threads, study):
    trainer, side, accounting, seed = job["trainer"], job["side"], job["accounting"], job["seed"]
    overrides = overrides_of(trainer, accounting, seed, epochs, study)
    common = ["--trainer", trainer, "--model", dirs["model"], "--items", str(study["items"]), "--reward", study["reward"]]
    if side == "ours":
        command = speed.OURS + ["learn", *common, "--critic", dirs["critic"], "--overrides", json.dumps(overrides)]
        run_env = dict(env, COMLRL_NUM_THREADS=str(threads))
    else:
        spec = dict(trainer=trainer, items=study["items"], threads=threads, ours=ours_configs[trainer], reward=study["reward"], seed=seed,
                    epochs=epochs, **dirs)
        command = [sys.executable, __file__, "--comlrl-learn", json.dumps(spec)]
        run_env = dict(env, OMP_NUM_THREADS=str(threads))
    with open("/proc/loadavg") as f:
        load = float(f.read().split()[0])
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=run_env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{side} {trainer} seed {seed} failed:\n{done.stderr[-4000:]}")
    result = speed.last_json(done.stdout, f"{side} {trainer}")
    rewards, counts = curve(result, trainer, epochs, study["items"])
    # Before the first epoch, from the base model both sides load (MADPO's first evaluation, MADPO's and MARLHF's
    # pair candidates): where the sides' sampling and scoring agree, these agree within noise.
    before = {"evaluation": result["evaluations"][0]} if result["evaluations"] else {}
    if result["rewards"][0]:
        before["pairCandidates"] = sum(result["rewards"][0]) / len(result["rewards"][0])
    return dict(job, epochs=epochs, curve=rewards, samplesPerEpoch=counts, before=before, seconds=result["seconds"],
                processSeconds=time.perf_counter() - started, load1=load)


def overrides_of(trainer, accounting, seed, epochs, study):
    overrides = {**study["overrides"], "numTrainEpochs": epochs, "seed": seed}
    if trainer in ACCOUNTED:
        overrides["tokenAccounting"] = accounting
    if trainer == "madpo":
        overrides["evalNumSamples"] = study["items"]
    return overrides


def ours_config(trainer, dirs, env, epochs, study):
    done = subprocess.run(speed.OURS + ["config", "--trainer", trainer, "--model", dirs["model"], "--items", str(study["items"]),
                                        "--overrides", json.dumps(overrides_of(trainer, "exact", 0, epochs, study)), "--reward", study["reward"]],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"our config for {trainer} failed:\n{done.stderr[-4000:]}")
    return speed.last_json(done.stdout, "config")


def jobs_of(options):
    jobs = []
    seeds = {t: options.seeds for t in options.trainers.split(",")}
    for part in filter(None, options.seeds_by_trainer.split(",")):
        name, count = part.split("=")
        seeds[name] = int(count)
    for trainer, count in seeds.items():
        if trainer not in speed.TRAINERS:
            raise SystemExit(f"--trainers: {trainer} is not one of {', '.join(speed.TRAINERS)}")
        accountings = options.accountings.split(",") if trainer in ACCOUNTED else ["exact"]
        for seed in range(options.first_seed, count + 1):
            # Alternate the sides so that neither always runs beside the same load.
            sides = ["ours", "comlrl"] if seed % 2 else ["comlrl", "ours"]
            for side in (s for s in sides if s in options.sides.split(",")):
                for accounting in (accountings if side == "ours" else ["comlrl-1.4.3"]):
                    jobs.append({"trainer": trainer, "side": side, "accounting": accounting, "seed": seed})
    return jobs


def key(run):
    return (run["trainer"], run["side"], run["accounting"], run["seed"], run["epochs"])


def study_of(options):
    """The task, items and config overrides of the study: the demo's, or a speed size's (smollm2) plus --overrides."""
    if options.size == "demo":
        study = {"reward": "vowels", "items": ITEMS, "overrides": {}}
    else:
        plan = speed.SIZES[options.size]
        study = {"reward": plan.get("reward", "vowels"), "items": plan["items"], "overrides": dict(plan["overrides"])}
    study["items"] = options.items or study["items"]
    study["overrides"].update(json.loads(options.overrides))
    return study


def drive(options):
    env = dict(os.environ)
    dirs = speed.models(options.size, env)
    study = study_of(options)
    out = options.out
    data = {"runs": []}
    if os.path.exists(out):
        with open(out) as f:
            data = json.load(f)
    done_keys = {key(r) for r in data["runs"]}
    todo = [j for j in jobs_of(options) if key(dict(j, epochs=options.epochs)) not in done_keys]
    trainers = sorted({j["trainer"] for j in todo})
    ours_configs = {t: ours_config(t, dirs, env, options.epochs, study) for t in trainers}
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), platform.processor())
    # Every invocation that added runs, in order (a study extended with more seeds has several).
    commands = data.pop("commands", [data.pop("command")] if "command" in data else [])
    commands.append(" ".join(["python", "scripts/reference/compare_learning.py", *sys.argv[1:]]))
    data.update(host=socket.gethostname(), cpu=cpu, cores=os.cpu_count(), threadsPerProcess=options.threads, processes=options.jobs,
                size=options.size, reward=study["reward"], items=study["items"], commands=commands, configs={**data.get("configs", {}), **{t: c["config"] for t, c in ours_configs.items()}})
    data.setdefault("started", datetime.datetime.now(datetime.timezone.utc).isoformat())
    lock = threading.Lock()
    print(f"{len(todo)} runs to do", flush=True)

    def one(job):
        run = run_one(job, dirs, ours_configs, env, options.epochs, options.threads, study)
        with lock:
            data["runs"].append(run)
            data["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat()
            data["runs"].sort(key=lambda r: (speed.TRAINERS.index(r["trainer"]), r["side"], r["accounting"], r["seed"]))
            with open(out + ".partial", "w") as f:
                json.dump(data, f, indent=1)
            os.replace(out + ".partial", out)
            end = sum(run["curve"][-3:]) / 3
            print(f"  {run['trainer']:6} {run['side']:6} {run['accounting']:12} seed {run['seed']}: end {end:.3f}, {run['seconds']:.0f} s, load {run['load1']:.1f}", flush=True)

    with concurrent.futures.ThreadPoolExecutor(max_workers=options.jobs) as pool:
        for future in concurrent.futures.as_completed([pool.submit(one, j) for j in todo]):
            future.result()


def time_one_epoch(options):
    env = dict(os.environ)
    dirs = speed.models(options.size, env)
    study = study_of(options)
    for trainer in options.trainers.split(","):
        configs = {trainer: ours_config(trainer, dirs, env, 1, study)}
        for side in ("ours", "comlrl"):
            run = run_one({"trainer": trainer, "side": side, "accounting": "exact" if side == "ours" else "comlrl-1.4.3", "seed": 1},
                          dirs, configs, env, 1, options.threads, study)
            print(f"{trainer:6} {side:6} train {run['seconds']:.1f} s, process {run['processSeconds']:.1f} s, load {run['load1']:.1f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trainers", default=",".join(speed.TRAINERS))
    parser.add_argument("--seeds", type=int, default=4, help="seeds 1..N per trainer")
    parser.add_argument("--first-seed", type=int, default=1, help="start at this seed (another driver runs the earlier ones)")
    parser.add_argument("--seeds-by-trainer", default="", help="e.g. magrpo=6,marlhf=3 (overrides --seeds)")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--jobs", type=int, default=2, help="processes at once")
    parser.add_argument("--threads", type=int, default=1, help="threads per process")
    parser.add_argument("--accountings", default="exact,comlrl", help="our MAGRPO-family tokenAccounting values to run")
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--size", default="demo", choices=["demo", "smollm2"])
    parser.add_argument("--sides", default="ours,comlrl", help="the sides to run (one driver per side, each with its own --out, runs them at once)")
    parser.add_argument("--items", type=int, default=0, help="items per epoch (default: 16 for the demo, the size's for smollm2)")
    parser.add_argument("--overrides", default="{}", help="more config overrides, JSON")
    parser.add_argument("--time-one-epoch", action="store_true")
    parser.add_argument("--comlrl-learn", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.comlrl_learn:
        comlrl_learn(json.loads(options.comlrl_learn))
    elif options.time_one_epoch:
        time_one_epoch(options)
    else:
        drive(options)


if __name__ == "__main__":
    main()
