"""docs/data/vs-comlrl-smollm2.json (or -0.5b-phases.json) from compare_speed.py results files of a size with
rooflines (smollm2, 0.5b): the table's rows (each side's epoch, its phases, peak memory and the rooflines of its
phases) with the harness's own JSON kept under "raw".

    python3 scripts/reference/phase_table.py bench/results/compare-comlrl-<time>.json… [--size smollm2|0.5b]
        [--out FILE] [--note TEXT]

Our side runs twice per pair: with its defaults ("ours") and with the memory-lean settings of docs/memory.md
("ours-lean": the agents in turn on all threads, COMLRL_CPU_LANES=1, and glibc's mmap threshold at 1 MiB). CoMLRL's
phases come from compare_speed.py's global hooks: generate() is its generation; the rest of the epoch
(its loss forwards, backward and optimizer steps, and the reward, a few milliseconds) is its update. Its rooflines are
read for the same work as ours (the token counts of our median run): the work the config asks for, whatever either
side spends on it. Standard library only.
"""

import argparse
import json
import os
import statistics

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# What each size trains, for the table's title (the model and the task), and the table's file under docs/data/.
SUBJECTS = {
    "smollm2": ("on SmolLM2-135M-Instruct", "the paragraph-summary task", "vs-comlrl-smollm2.json"),
    "0.5b": ("at Qwen2.5-0.5B's shape (a random model)", "the demo's cover-the-vowels task", "vs-comlrl-0.5b-phases.json"),
}


def median_run(runs):
    return sorted(runs, key=lambda r: r["seconds"])[(len(runs) - 1) // 2]


def phases(run):
    """(generation, reward, update) seconds of a run."""
    if run["side"] != "comlrl":
        t = run["timings"]
        return t["train/generation"], t["train/reward"], t["train/update"]
    generation = run["timings"]["generate"]
    return generation, None, run["seconds"] - generation


def medians(runs):
    """Median epoch, generation, update seconds and peak RSS MiB of a side's runs."""
    return (statistics.median(r["seconds"] for r in runs), statistics.median(phases(r)[0] for r in runs),
            statistics.median(phases(r)[2] for r in runs), statistics.median(r["peakRssMiB"] for r in runs))


def spread(values, unit=" s", digits=1):
    """The median with the range, or the one value."""
    middle = f"{statistics.median(values):.{digits}f}{unit}"
    return middle if len(values) == 1 else f"{middle} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="+")
    parser.add_argument("--size", default="smollm2", choices=sorted(SUBJECTS))
    parser.add_argument("--out", help="default: the size's file under docs/data/ (SUBJECTS)")
    parser.add_argument("--note", default="")
    options = parser.parse_args()
    results = []
    for name in options.results:
        with open(name) as f:
            results.append(json.load(f))
    # Several runs of the harness (each its own pairs) are read as one: their runs and ceilings pooled.
    raw = results[0]
    rows = [r for result in results for r in result["rows"] if r["size"] == options.size]
    if not rows:
        raise SystemExit(f"{', '.join(options.results)}: no rows of size {options.size}")
    model, task, table_file = SUBJECTS[options.size]
    out_file = options.out or os.path.join(ROOT, "docs", "data", table_file)
    row = dict(rows[0], runs=[run for r in rows for run in r["runs"]], ceilings=[c for r in rows for c in r["ceilings"]])
    by_side = {side: [r for r in row["runs"] if r["side"] == side] for side in ("ours", "ours-lean", "comlrl")}
    ours = median_run(by_side["ours"])
    ceiling = {key: max(m[key] for m in row["ceilings"]) for key in ("matmulGflops", "readGbps")}
    floor = ours["roofline"]
    lines = []
    for side, label in (("ours", "comlrl (ours), defaults"), ("ours-lean", "comlrl (ours), lean"), ("comlrl", "CoMLRL 1.4.3")):
        runs = by_side[side]
        split = [phases(r) for r in runs]
        generation = [s[0] for s in split]
        update = [s[2] for s in split]
        reward = "—" if side == "comlrl" else spread([s[1] for s in split], digits=3)
        cpu = [r.get("cpuSeconds") for r in runs]
        lines.append([label, spread([r["seconds"] for r in runs]), spread(cpu) if None not in cpu else "—", spread(generation), reward, spread(update),
                      spread([r["peakRssMiB"] / 1024 for r in runs], " GiB", 2),
                      f"{100 * floor['generationFloorSeconds'] / statistics.median(generation):.0f}%",
                      f"{100 * floor['updateFloorSeconds'] / statistics.median(update):.0f}%",
                      ", ".join(f"{r['loadavg'][0]:.1f}" for r in runs)])
    c, cg, cu, cm = medians(by_side["comlrl"])
    c_cpu = [r.get("cpuSeconds") for r in by_side["comlrl"]]
    for side in ("ours", "ours-lean"):
        o, og, ou, om = medians(by_side[side])
        o_cpu = [r.get("cpuSeconds") for r in by_side[side]]
        cpu = f"{statistics.median(c_cpu) / statistics.median(o_cpu):.2f}×" if None not in c_cpu + o_cpu else ""
        lines.append([f"CoMLRL / ours{'' if side == 'ours' else ', lean'}", f"{c / o:.2f}×", cpu, f"{cg / og:.2f}×", "", f"{cu / ou:.2f}×",
                      f"ours {om / cm:.2f}× CoMLRL's", "", "", ""])
    g = ours["generation"]
    config = row["config"]
    out = {
        "title": (f"One MAGRPO epoch {model} against CoMLRL 1.4.3, both sides in one run: two fp32 agents, "
                  f"{task}, {row['items']} items, {config['numGenerations']} generations of up to "
                  f"{config['maxNewTokens']} new tokens, lr {config['agentLearningRate']}, rollout buffer {config['rolloutBufferSize']}"),
        "machine": (f"2-core {raw['cpu']} VM, {row['threads']} threads per side, the sides run one at a time "
                    f"and alternate; ceilings measured in the same run: fp32 matmul {ceiling['matmulGflops']:.0f} GFLOP/s, "
                    f"read bandwidth {ceiling['readGbps']:.1f} GB/s"),
        "date": raw["date"][:10],
        "times": [r["date"][11:16] + " UTC" for r in results],
        "command": f"python scripts/reference/compare_speed.py --trainers magrpo --sizes {options.size}",
        "conditions": (f"Medians (min–max) over {len(by_side['ours'])} runs a side, each its own process after a one-item warm-up; "
                       f"the 1-minute load at each run's start is the last column (other sessions' work: read the seconds with it). "
                       f"Rooflines, for our median run's work ({g['calls']} generate() calls, {g['weightPasses']} weight passes, "
                       f"{g['promptTokens']} prompt and {g['completionTokens']} completion tokens): generation's floor is the longer of every "
                       f"fp32 weight read once per pass at the read bandwidth ({floor['generationReadSeconds']:.2f} s) and 2 FLOPs per matmul "
                       f"weight per token at the matmul rate ({floor['generationComputeSeconds']:.2f} s); the update's is "
                       f"6 FLOPs per matmul weight per trained token at the matmul rate ({floor['updateFlops'] / 1e12:.2f} TFLOP, "
                       f"{floor['updateFloorSeconds']:.2f} s); each cell is floor / the side's median phase. {options.note}").strip(),
        "columns": ["side", "epoch", "epoch, CPU seconds", "generation", "reward", "update", "peak RSS", "generation: of its roofline",
                    "update: of matmul ceiling", "load (1 min) per run"],
        "rows": lines,
        "raw": results,
    }
    with open(out_file, "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("\n".join(" | ".join(map(str, line)) for line in lines))
    print(f"wrote {out_file}")


if __name__ == "__main__":
    main()
