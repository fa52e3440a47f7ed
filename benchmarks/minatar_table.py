"""The MinAtar table and figure of docs/benchmarks.md from the run dirs ``benchmarks/minatar.sh`` writes.

    python benchmarks/minatar_table.py bench-results/minatar-<stamp> [--png curves.png]

Per game, over its seeds: median [min-max] of the greedy evaluation at 5 minutes, the best and the last
evaluation, and the time of the first evaluation >= 10; random play from ``<game>-random.txt``.
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

import yaml


def evals(run: Path) -> tuple[list[tuple[float, int, float]], dict]:
    from apexrl.plot import read_records

    recs = read_records(run / "metrics.jsonl")
    ev = [(r["time_s"], r["env_steps"], r["eval_return_mean"]) for r in recs if r.get("eval_return_mean") is not None]
    return ev, recs[-1]


def spread(values: list[float | None], fmt: str = ".1f", unit: str = "") -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "—"
    med = format(statistics.median(got), fmt) + unit
    miss = f", {len(values) - len(got)} of {len(values)} not reached" if len(got) < len(values) else ""
    if len(got) == 1:
        return med + miss
    return f"{med} [{format(min(got), fmt)}–{format(max(got), fmt)}]{miss}"


def figure(runs: dict[str, list[Path]], random: dict[str, float], png: Path) -> None:
    """One column per game: greedy eval against env steps (top) and wall time (bottom), median over
    seeds with the min-max band, random play dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from apexrl import plot

    fig, axes = plt.subplots(2, len(runs), figsize=(3.2 * len(runs), 5.6), constrained_layout=True, squeeze=False)
    for col, (game, members) in enumerate(runs.items()):
        curves = [plot.load_curve(r, "eval") for r in members]
        for row, x_of in enumerate(("env_steps", "time_s")):
            ax = axes[row][col]
            x, med, lo, hi = plot.band(curves, x_of, stat="median")
            ax.plot(x, med, color="tab:blue", lw=1.6, label=f"apexrl, median of {len(curves)}")
            if len(curves) > 1:
                ax.fill_between(x, lo, hi, color="tab:blue", alpha=0.2, lw=0)
            if game in random:
                ax.axhline(random[game], color="gray", ls="--", lw=1, label="random play")
            ax.set_xlabel("env steps" if row == 0 else "wall time (s)")
            ax.grid(alpha=0.3)
            if row == 0:
                ax.set_title(game)
            if col == 0:
                ax.set_ylabel("greedy eval return")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle("MinAtar, one preset: median over seeds, band = min-max (2 CPU cores)")
    fig.savefig(png, dpi=100)
    plt.close(fig)


def main(out: Path, png: Path | None = None) -> None:
    runs: dict[str, list[Path]] = {}
    seed: dict[Path, int] = {}
    for run in sorted(p for p in out.iterdir() if (p / "metrics.jsonl").is_file()):
        cfg = yaml.safe_load((run / "config.yaml").read_text())
        runs.setdefault(cfg["env"]["id"].split("/")[-1].removesuffix("-v1"), []).append(run)
        seed[run] = cfg["seed"]
    random: dict[str, float] = {}
    print("| game | seeds | budget, env steps | eval at 5 min | best eval | last eval | first eval ≥ 10 | random play |")
    print("|---|---|---|---|---|---|---|---|")
    for game, members in runs.items():
        at5, best, last, first10, steps, budget = [], [], [], [], [], []
        for run in members:
            ev, end = evals(run)
            before = [e for t, _, e in ev if t <= 310]
            at5.append(before[-1] if before else None)
            best.append(max(e for _, _, e in ev))
            last.append(ev[-1][2])
            first10.append(next((t for t, _, e in ev if e >= 10), None))
            steps.append(end["env_steps"])
            budget.append(end["time_s"])
        rnd = out / f"{game.lower()}-random.txt"
        m = re.search(r"return mean ([-\d.]+)", rnd.read_text()) if rnd.is_file() else None
        if m:
            random[game] = float(m.group(1))
        seeds = ", ".join(str(seed[r]) for r in members)
        print(f"| {game} | {seeds} | {min(budget):.0f} s, {spread(steps, ',.0f')} | {spread(at5)} | {spread(best)} | "
              f"{spread(last)} | {spread(first10, '.0f', ' s')} | {m.group(1) if m else '—'} |")
    if png is not None:
        figure(runs, random, png)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(Path(args[0]), Path(args[2]) if args[1:2] == ["--png"] else None)
