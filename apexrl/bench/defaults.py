"""Out of the box: the plain ``apexrl train --set env.id=X`` (and ``--set agent=r2d2`` / ``dpg`` where the
task needs it) on a family of tasks, against the task's tuned preset where one ships.

    apexrl bench defaults                                   # every task, 3 seeds
    apexrl bench defaults --tasks acrobot,cliffwalking --seeds 1 --no-presets

Each run is one ``apexrl bench e2e`` child (its own process, start-up counted, the same greedy evaluation
and confirmation), so a figure here and one there mean the same thing. Prints per task: seeds solved,
median time to the target over the seeds (unsolved counted as never), and the ratio to the preset's median.
The goal is every seed of every task solved within its budget, and no task slower than 2x its preset.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from typing import Any

from apexrl.bench._results import write_result
from apexrl.bench.e2e import run_one
from apexrl.bench.e2e_common import Task


@dataclass(frozen=True)
class Case:
    env_id: str
    target: float  # greedy-evaluation mean that counts as solved
    budget_s: float
    agent: str = "dqn"
    preset: str | None = None  # the tuned preset for this env, if one ships
    needs: str = ""  # a module the env needs (its extra); the task is skipped without it


CASES: dict[str, Case] = {
    "cartpole": Case("CartPole-v1", 475.0, 120),  # the defaults are its preset
    "acrobot": Case("Acrobot-v1", -100.0, 300),
    "mountaincar": Case("MountainCar-v0", -110.0, 400),
    "lunarlander": Case("LunarLander-v3", 200.0, 900, needs="Box2D"),
    "taxi": Case("Taxi-v4", 7.0, 400, preset="taxi"),
    "frozenlake": Case("FrozenLake-v1", 0.6, 300),  # slippery 4x4: the optimal policy wins ~74%
    "cliffwalking": Case("CliffWalking-v1", -13.0, 300),  # the shortest safe path's return
    "pendulum": Case("Pendulum-v1", -200.0, 120, agent="dpg", preset="pendulum"),
    "cartpole-novel": Case("apexrl.envs.stateless:CartPoleNoVel-v1", 475.0, 300, agent="r2d2",
                           preset="cartpole-novel"),
    "breakout": Case("MinAtar/Breakout-v1", 10.0, 600, preset="minatar", needs="minatar"),
}


def _missing(case: Case) -> str | None:
    if not case.needs:
        return None
    import importlib.util

    return None if importlib.util.find_spec(case.needs) else f"needs {case.needs} (its extra is not installed)"


def _median_time(rs: list[dict[str, Any]]) -> float | None:
    vals = [float("inf") if r.get("time_to_target_s") is None else r["time_to_target_s"] for r in rs]
    m = statistics.median(vals) if vals else float("inf")
    return None if m == float("inf") else m


def run_case(name: str, case: Case, seeds: list[int], presets: bool, eval_interval: float) -> dict[str, Any]:
    out: dict[str, Any] = {"env": case.env_id, "target": case.target, "agent": case.agent, "budget_s": case.budget_s}
    plain = Task("cartpole", case.env_id, case.target, case.agent)  # cartpole's preset is the dataclass defaults
    agent = [] if case.agent == "dqn" else [f"agent={case.agent}"]
    runs = {"defaults": (plain, agent)}
    if presets and case.preset is not None and case.preset != "cartpole":
        runs["preset"] = (Task(case.preset, case.env_id, case.target, case.agent), [])
    for label, (task, overrides) in runs.items():
        rs = []
        for seed in seeds:
            print(f"{name}: {label} seed {seed} (budget {case.budget_s:g} s)...", flush=True)
            r = run_one("apexrl", task, seed, case.budget_s, eval_interval, overrides, sys.executable)
            print(f"  -> reached={r.get('reached')} time={r.get('time_to_target_s')} {r.get('error', '')}", flush=True)
            rs.append(r)
        out[label] = {"runs": rs, "solved": sum(bool(r.get("reached")) for r in rs),
                      "median_time_s": _median_time(rs)}
    return out


def print_table(results: dict[str, dict[str, Any]], skipped: dict[str, str]) -> None:
    hdr = f"{'task':16} {'agent':6} {'target':>8} {'solved':>7} {'median time s':>14} {'preset s':>9} {'ratio':>6}"
    print(hdr)
    print("-" * len(hdr))
    for name, res in results.items():
        d, p = res["defaults"], res.get("preset")
        t = d["median_time_s"]
        pt = p["median_time_s"] if p else None
        ratio = f"{t / pt:.2f}" if t is not None and pt else "-"
        print(f"{name:16} {res['agent']:6} {res['target']:>8g} {d['solved']:>3}/{len(d['runs']):<3} "
              f"{'-' if t is None else f'{t:.1f}':>14} {'-' if pt is None else f'{pt:.1f}':>9} {ratio:>6}")
    for name, why in skipped.items():
        print(f"{name:16} skipped: {why}")
    print("median over the seeds, an unsolved seed counted as never; time from the run's clock (start-up included)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="apexrl bench defaults", description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", default=",".join(CASES), help=f"comma-separated, from: {', '.join(CASES)}")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--no-presets", action="store_true", help="skip the tuned presets' runs (no ratio)")
    p.add_argument("--eval-interval-s", type=float, default=0.0,
                   help="seconds between greedy evaluations (0: what the config has, as a user gets it)")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    names = [x.strip() for x in a.tasks.split(",") if x.strip()]
    unknown = [x for x in names if x not in CASES]
    if unknown:
        p.error(f"unknown task(s) {unknown}; choose from {', '.join(CASES)}")
    seeds = list(range(a.first_seed, a.first_seed + a.seeds))
    skipped = {n: why for n in names if (why := _missing(CASES[n])) is not None}
    results = {n: run_case(n, CASES[n], seeds, not a.no_presets, a.eval_interval_s) for n in names if n not in skipped}
    print_table(results, skipped)
    write_result("defaults", {"tasks": names, "seeds": seeds, "skipped": skipped, "results": results}, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
