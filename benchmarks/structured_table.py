"""The table of docs/envs.md from a benchmarks/structured.sh output folder: per task, the seeds' time to
the target (the driver's clock, and the command's wall time with start-up and shutdown), env steps, the
best greedy evaluation, and random legal play."""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path


def target(run: Path) -> float | None:
    m = re.search(r"target_return: (-?[\d.]+)", (run / "config.yaml").read_text())
    return float(m.group(1)) if m else None


def first_success(run: Path, goal: float) -> tuple[float, int] | None:
    for line in (run / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("eval_return_mean") is not None and r["eval_return_mean"] >= goal:
            return r["time_s"], r["env_steps"]
    return None


def main(out: str) -> None:
    root = Path(out)
    print("| task | seeds at target | time to target, s (driver) | wall, s (command) | env steps | best eval | random legal play |")
    print("|---|---|---|---|---|---|---|")
    for task in dict.fromkeys(p.name.rsplit("-s", 1)[0] for p in sorted(root.glob("*-s*")) if p.is_dir()):
        runs = sorted(p for p in root.glob(f"{task}-s*") if p.is_dir())
        goal = target(runs[0])
        hits = [first_success(r, goal) for r in runs]
        times = [h[0] for h in hits if h]
        steps = [h[1] for h in hits if h]
        walls = [float((r.parent / f"{r.name}.wall_s").read_text()) for r, h in zip(runs, hits) if h]
        best = [max((json.loads(x).get("eval_return_mean") or -1e9) for x in (r / "metrics.jsonl").read_text().splitlines())
                for r in runs]
        rand = (root / f"{task}-random.txt")
        m = re.search(r"mean (-?[\d.]+)", rand.read_text()) if rand.exists() else None

        def med(xs: list[float], fmt: str = "{:.0f}") -> str:
            return f"{fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}–{fmt.format(max(xs))}]" if xs else "—"

        print(f"| {task} (≥ {goal:g}) | {len(times)} of {len(runs)} | {med(times)} | {med(walls)} | {med(steps)} | "
              f"{med(best, '{:.2f}')} | {m.group(1) if m else '—'} |")


if __name__ == "__main__":
    main(sys.argv[1])
