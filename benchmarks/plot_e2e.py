"""Learning curves of an ``apexrl bench e2e`` result: greedy eval return vs env steps and vs wall time, one
line per (peer, seed), all peers on one figure.

    python benchmarks/plot_e2e.py bench-results/e2e-<date>.json -o docs/lunarlander-continuous-curves.png
"""

from __future__ import annotations

import argparse
import json


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("result")
    p.add_argument("-o", "--output", default="e2e-curves.png")
    p.add_argument("--title", default=None)
    p.add_argument("--line", type=float, default=None,
                   help="a reference return to draw (default: the run's target, when inside the curves' range)")
    a = p.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = json.load(open(a.result))
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = {"apexrl": "tab:orange", "sb3": "tab:blue", "rllib": "tab:green"}
    returns = [e[2] for run in data["runs"] for e in run.get("evals") or []]
    line = a.line
    if line is None and returns and min(returns) <= data["target"] <= max(returns) + abs(max(returns)):
        line = data["target"]
    for run in data["runs"]:
        evals = run.get("evals") or []
        if not evals:
            continue
        t, steps, ret = zip(*evals)
        label = f"{run['peer']} (seed {run['seed']})"
        kw = dict(color=colors.get(run["peer"]), marker=".", label=label)
        left.plot(steps, ret, **kw)
        right.plot(t, ret, **kw)
    for ax, xlabel in ((left, "env steps"), (right, "wall time (s), start-up included")):
        if line is not None:
            ax.axhline(line, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"greedy eval return ({data.get('eval_episodes', 10)} episodes)")
        ax.grid(alpha=0.3)
    left.legend()
    fig.suptitle(a.title or f"{data['env']}: {data.get('command', '')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(a.output, dpi=100)
    print(f"wrote {a.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
