"""``apexrl plot``: learning curves from runs' ``metrics.jsonl`` as one PNG.

Two panels: return against env steps and against wall time. Runs whose ``config.yaml`` is the same once
``seed`` and ``name`` are dropped form a group (the seeds of one setting): the group's mean (or median,
``--stat median``) is drawn as a line over a min-max band. Curves are resampled onto a common x grid that
ends where the shortest run of the group ends, so every point of the line takes all seeds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from apexrl.config import flatten

# Keys that do not change what is learned, left out when grouping runs and naming groups.
_NOT_SETTING = ("seed", "name", "stop.", "logging.", "checkpoint.", "evaluation.interval_s")


class PlotError(ValueError):
    """A run dir that cannot be plotted; the message names it and the fix."""


@dataclass
class Curve:
    run: Path
    setting: dict[str, Any]  # flat config without seed, name and bookkeeping keys
    seed: int | None
    env_steps: np.ndarray
    time_s: np.ndarray
    ret: np.ndarray  # NaN where the report had no value


def _is_setting(key: str) -> bool:
    return not any(key == p or (p.endswith(".") and key.startswith(p)) for p in _NOT_SETTING)


def read_records(path: Path) -> list[dict[str, Any]]:
    """Report lines of a metrics.jsonl; a torn last line (run still writing) is skipped."""
    out = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and "env_steps" in rec:
            out.append(rec)
    return out


def expand_runs(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Run dirs as given; a directory without metrics.jsonl stands for the run dirs directly under it."""
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.is_dir():
            raise PlotError(f"'{p}' is not a directory; give run dirs (runs/<name>) or a directory of them")
        if (p / "metrics.jsonl").is_file():
            out.append(p)
            continue
        kids = sorted(k for k in p.iterdir() if (k / "metrics.jsonl").is_file())
        if not kids:
            raise PlotError(f"'{p}' has no metrics.jsonl and no run dirs under it; give runs written by "
                            "'apexrl train' or 'apexrl tune'")
        out.extend(kids)
    return out


def load_curve(run: str | os.PathLike[str], metric: str) -> Curve:
    run = Path(run)
    mpath = run / "metrics.jsonl"
    if not mpath.is_file():
        raise PlotError(f"'{run}' has no metrics.jsonl; give run dirs written by 'apexrl train' (runs/<name>)")
    recs = read_records(mpath)
    if not recs:
        raise PlotError(f"'{mpath}' has no report lines yet; wait for the run's first report")
    cfg: dict[str, Any] = {}
    if (run / "config.yaml").is_file():
        cfg = yaml.safe_load((run / "config.yaml").read_text()) or {}
    flat = flatten(cfg)
    key = f"{metric}_return_mean"

    def col(name: str) -> np.ndarray:
        return np.array([np.nan if r.get(name) is None else float(r[name]) for r in recs], dtype=np.float64)

    return Curve(run=run, setting={k: v for k, v in flat.items() if _is_setting(k)},
                 seed=cfg.get("seed"), env_steps=col("env_steps"), time_s=col("time_s"), ret=col(key))


def group_curves(curves: Sequence[Curve], each: bool = False) -> list[tuple[str, list[Curve]]]:
    """Runs of one setting together, in first-seen order, labelled by the keys on which settings differ;
    ``each``: every run its own group (seeds that diverge are hidden by a mean over the common range)."""
    groups: dict[str, list[Curve]] = {}
    for i, c in enumerate(curves):
        key = json.dumps(c.setting, sort_keys=True, default=str)
        groups.setdefault(f"{key}#{i}" if each else key, []).append(c)
    settings = [g[0].setting for g in groups.values()]
    differ = sorted({k for s in settings for k in s if any(t.get(k) != s.get(k) for t in settings)})
    out = []
    for members in groups.values():
        s = members[0].setting
        if differ:
            label = ", ".join(f"{k}={s.get(k)}" for k in differ)
        else:
            label = str(s.get("env.id", members[0].run.name))
        seeds = {str(c.seed) for c in members}
        if len(members) == 1:
            label += f" (seed {members[0].seed})"
        else:
            label += f" ({len(members)} seeds)" if len(seeds) == len(members) else f" ({len(members)} runs)"
        out.append((label, members))
    return out


def band(members: Sequence[Curve], x_of: str, points: int = 200, stat: str = "mean") -> tuple[np.ndarray, ...]:
    """(x, center, min, max) of the group's return on a common grid up to the shortest run's end;
    ``stat`` picks the center: mean, or median (what seed comparisons report: one bad seed moves it less)."""
    xs, ys = [], []
    for c in members:
        x = getattr(c, x_of)
        ok = np.isfinite(c.ret) & np.isfinite(x)
        if ok.sum() >= 1:
            xs.append(x[ok])
            ys.append(c.ret[ok])
    if not xs:
        return (np.array([]),) * 4
    if len(xs) == 1:
        return xs[0], ys[0], ys[0], ys[0]
    lo, hi = max(x[0] for x in xs), min(x[-1] for x in xs)
    grid = np.linspace(lo, hi, points) if hi > lo else np.array([hi])
    stack = np.stack([np.interp(grid, x, y) for x, y in zip(xs, ys)])
    center = np.median(stack, 0) if stat == "median" else stack.mean(0)
    return grid, center, stack.min(0), stack.max(0)


def plot_runs(runs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], metric: str = "auto",
              title: str | None = None, each: bool = False, stat: str = "mean") -> Path:
    """Write the PNG and return its path. ``metric``: eval | train | auto (eval where any run has it);
    ``stat``: mean | median over a group's seeds."""
    try:
        import matplotlib
    except ImportError:
        raise PlotError("apexrl plot needs matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    if not runs:
        raise PlotError("give at least one run dir")
    if metric not in ("auto", "eval", "train"):
        raise PlotError(f"--metric {metric!r}: allowed: auto, eval, train")
    if stat not in ("mean", "median"):
        raise PlotError(f"--stat {stat!r}: allowed: mean, median")
    if metric == "auto":
        has_eval = any(np.isfinite(load_curve(r, "eval").ret).any() for r in runs)
        metric = "eval" if has_eval else "train"
    curves = [load_curve(r, metric) for r in runs]
    if not any(np.isfinite(c.ret).any() for c in curves):
        raise PlotError(f"no {metric} returns in these runs yet; try --metric "
                        f"{'train' if metric == 'eval' else 'eval'}")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    for (label, members), color in zip(group_curves(curves, each), _colors(len(curves))):
        for ax, x_of in zip(axes, ("env_steps", "time_s")):
            x, center, lo, hi = band(members, x_of, stat=stat)
            if not len(x):
                continue
            # markers: a short run may have only one or two evaluations, which a bare line would not show
            ax.plot(x, center, color=color, label=label, lw=1.6, marker="o" if len(x) <= 40 else None, ms=3)
            if len(members) > 1:
                ax.fill_between(x, lo, hi, color=color, alpha=0.2, lw=0)
    axes[0].set_xlabel("env steps")
    axes[1].set_xlabel("wall time (s)")
    for ax in axes:
        ax.set_ylabel(f"{metric} return (mean of its episodes)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="best")
    fig.suptitle(title or (f"{metric} return of each run" if each else
                           f"{metric} return: {stat} over seeds, band = min-max"))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _colors(n: int) -> list[Any]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return [cmap(i % 10) for i in range(max(1, n))]


def summary(runs: Sequence[str | os.PathLike[str]]) -> list[str]:
    """One line per group: best eval (mean over seeds of each run's best) and final env steps."""
    curves = [load_curve(r, "eval") for r in runs]
    lines = []
    for label, members in group_curves(curves):
        best = [np.nanmax(c.ret) for c in members if np.isfinite(c.ret).any()]
        steps = [int(np.nanmax(c.env_steps)) for c in members]
        b = f"{np.mean(best):.1f}" if best else "-"
        lines.append(f"{label}: best eval {b}, env steps {min(steps):,}-{max(steps):,}")
    return lines


__all__ = ["PlotError", "band", "expand_runs", "group_curves", "load_curve", "plot_runs", "summary"]

