"""The learning-parity page's table and curves from docs/data/learning-parity.json (compare_learning.py writes it).

    python3 scripts/reference/learning_report.py [--data docs/data/learning-parity.json]
    python3 scripts/reference/learning_report.py --data docs/data/learning-smollm2.json \
        --svg docs/learning-smollm2.svg --marker learning-table-smollm2 --end-epochs 2

Writes docs/learning-parity.svg (one panel per trainer: each side's mean reward per epoch over its seeds, with a band
of ± one standard error) and rewrites the table between `<!-- learning-table -->` and `<!-- /learning-table -->` in
docs/learning-parity.md: per trainer and side the end reward (the mean of the last 3 epochs, or --end-epochs, one value per seed) as
mean ± standard error, and CoMLRL's end minus ours in units of the difference's standard error
(√(se_comlrl² + se_ours²); seeds are independent draws on each side, not pairs). Standard library only.
"""

import argparse
import json
import math
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRAINERS = ["magrpo", "iac", "maac", "madpo", "marlhf"]
NAMES = {"magrpo": "MAGRPO", "iac": "IAC", "maac": "MAAC", "madpo": "MADPO", "marlhf": "MARLHF"}
TASKS = {"demo": "the demo", "smollm2": "SmolLM2-135M-Instruct, paragraph-summary"}
# (side, accounting) → label and colour
SERIES = [
    (("comlrl", "comlrl-1.4.3"), "CoMLRL 1.4.3", "#d62728"),
    (("ours", "exact"), "ours", "#1f77b4"),
    (("ours", "comlrl"), 'ours, tokenAccounting "comlrl"', "#2ca02c"),
]


def mean_se(values):
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else float("nan")
    return mean, sd / math.sqrt(n)


def groups(data):
    """(trainer, side, accounting) → the runs' curves, for the one epoch count of the file."""
    out = {}
    for run in data["runs"]:
        out.setdefault((run["trainer"], run["side"], run["accounting"]), []).append(run["curve"])
    return out


def table(data, end_epochs):
    by = groups(data)
    epochs = max(len(r["curve"]) for r in data["runs"])
    lines = [f"| trainer | side | seeds | first epoch, mean ± s.e. | end reward (epochs {epochs - end_epochs + 1}–{epochs}), mean ± s.e. | "
             "rise (end − first) | CoMLRL − this side | in s.e. of the difference |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for trainer in TRAINERS:
        comlrl = by.get((trainer, "comlrl", "comlrl-1.4.3"))
        ends = {key: [sum(c[-end_epochs:]) / end_epochs for c in curves] for key, curves in by.items() if key[0] == trainer}
        if not ends:
            continue
        # Without CoMLRL runs (a study whose CoMLRL side did not finish) the rows say so instead of a difference.
        c_mean, c_se = mean_se(ends[(trainer, "comlrl", "comlrl-1.4.3")]) if comlrl else (None, None)
        for (side, accounting), label, _ in SERIES:
            values = ends.get((trainer, side, accounting))
            if not values:
                continue
            m, se = mean_se(values)
            first_m, first_se = mean_se([c[0] for c in by[(trainer, side, accounting)]])
            start = f"{NAMES[trainer]} | {label} | {len(values)} | {first_m:.3f} ± {first_se:.3f} | {m:.3f} ± {se:.3f} | {m - first_m:+.3f}"
            if side == "comlrl":
                lines.append(f"| {start} | | |")
            elif c_mean is None:
                lines.append(f"| {start} | no CoMLRL runs | |")
            else:
                diff, diff_se = c_mean - m, math.sqrt(c_se ** 2 + se ** 2)
                lines.append(f"| {start} | {diff:+.3f} ± {diff_se:.3f} | {diff / diff_se:+.1f} |")
    shifts = []
    for trainer in TRAINERS:
        exact, comlrl = (by.get((trainer, "ours", a)) for a in ("exact", "comlrl"))
        if exact and comlrl:
            (m1, se1), (m2, se2) = (mean_se([sum(c[-end_epochs:]) / end_epochs for c in curves]) for curves in (exact, comlrl))
            diff, diff_se = m2 - m1, math.sqrt(se1 ** 2 + se2 ** 2)
            shifts.append(f"- {NAMES[trainer]}: ours with tokenAccounting \"comlrl\" minus ours exact, {diff:+.3f} ± {diff_se:.3f} ({diff / diff_se:+.1f} s.e.)")
    return "\n".join(lines + ([""] + shifts if shifts else []))


def svg(data):
    by = groups(data)
    trainers = [t for t in TRAINERS if any(key[0] == t for key in by)]
    epochs = max(len(r["curve"]) for r in data["runs"])
    cols, panel_w, panel_h, top, left = 3, 300, 220, 56, 46
    rows = math.ceil(len(trainers) / cols)
    width, height = cols * panel_w + 20, top + rows * panel_h + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">Mean task reward per epoch on {TASKS[data.get("size", "demo")]}, ± 1 s.e. over seeds</text>']
    for i, ((side, accounting), label, colour) in enumerate(SERIES):
        x = 20 + i * 240
        out.append(f'<line x1="{x}" y1="38" x2="{x + 18}" y2="38" stroke="{colour}" stroke-width="2"/><text x="{x + 24}" y="42">{label}</text>')
    for p, trainer in enumerate(trainers):
        ox, oy = 10 + (p % cols) * panel_w + left, top + (p // cols) * panel_h
        w, h = panel_w - left - 14, panel_h - 46
        sx = lambda e: ox + (e - 1) / max(epochs - 1, 1) * w  # noqa: E731
        sy = lambda r: oy + 18 + (1 - r) * h  # noqa: E731
        seeds = ", ".join(f"{len(curves)} {side}" for (t, side, _), curves in sorted(by.items()) if t == trainer)
        out.append(f'<text x="{ox + w / 2}" y="{oy + 10}" text-anchor="middle" font-weight="bold">{NAMES[trainer]} (seeds: {seeds})</text>')
        for r in (0, 0.25, 0.5, 0.75, 1.0):
            out.append(f'<line x1="{ox}" y1="{sy(r):.1f}" x2="{ox + w}" y2="{sy(r):.1f}" stroke="#e5e5e5"/>'
                       f'<text x="{ox - 4}" y="{sy(r) + 4:.1f}" text-anchor="end">{r:.2f}</text>')
        for e in range(1, epochs + 1, 2):
            out.append(f'<text x="{sx(e):.1f}" y="{oy + h + 32}" text-anchor="middle">{e}</text>')
        out.append(f'<text x="{ox + w / 2}" y="{oy + h + 44}" text-anchor="middle">epoch</text>')
        for (side, accounting), label, colour in SERIES:
            curves = by.get((trainer, side, accounting))
            if not curves:
                continue
            stats = [mean_se([c[e] for c in curves]) for e in range(epochs)]
            upper = [f"{sx(e + 1):.1f},{sy(m + se):.1f}" for e, (m, se) in enumerate(stats)]
            lower = [f"{sx(e + 1):.1f},{sy(m - se):.1f}" for e, (m, se) in reversed(list(enumerate(stats)))]
            out.append(f'<polygon points="{" ".join(upper + lower)}" fill="{colour}" fill-opacity="0.15" stroke="none"/>')
            line = " ".join(f"{sx(e + 1):.1f},{sy(m):.1f}" for e, (m, _) in enumerate(stats))
            out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=os.path.join(ROOT, "docs", "data", "learning-parity.json"))
    parser.add_argument("--page", default=os.path.join(ROOT, "docs", "learning-parity.md"))
    parser.add_argument("--svg", default=os.path.join(ROOT, "docs", "learning-parity.svg"))
    parser.add_argument("--end-epochs", type=int, default=3, help="the last epochs whose mean is a run's end reward")
    parser.add_argument("--marker", default="learning-table", help="the page's block to rewrite: <!-- MARKER --> … <!-- /MARKER -->")
    options = parser.parse_args()
    with open(options.data) as f:
        data = json.load(f)
    with open(options.svg, "w") as f:
        f.write(svg(data))
    text = table(data, options.end_epochs)
    if os.path.exists(options.page):
        with open(options.page) as f:
            page = f.read()
        marker = re.escape(options.marker)
        block = re.compile(rf"(<!-- {marker} -->\n).*?(<!-- /{marker} -->)", re.S)
        if not block.search(page):
            raise SystemExit(f"{options.page}: no <!-- {options.marker} --> … <!-- /{options.marker} --> block")
        with open(options.page, "w") as f:
            f.write(block.sub(lambda m: m.group(1) + text + "\n" + m.group(2), page))
    print(text)


if __name__ == "__main__":
    main()
