"""Learning speed of config variants, measured in learner updates (not seconds) to a greedy target.

    apexrl bench sweep --seeds 5 --variant "" --variant "network.torso=[128,128]"

Each (variant, seed) runs the system in one process (``runtime.local.build_local``: the same System,
shards with their rate limiter, replay client and learner loop as ``apexrl train``, with direct calls for
transport), so the samples-per-insert ratio holds as in a Ray run. Every ``--eval-every`` updates the
current network plays 10 greedy episodes (``apexrl.evaluation.evaluate``, the code every run and ``bench
e2e`` use); the run stops at the first mean >= ``--target`` or after ``--max-updates``.

Counting updates instead of seconds makes the result independent of the host's load, so variants can run
side by side (``--jobs``). Seconds are what users feel: ``bench e2e`` measures those; this benchmark is how
the CartPole preset's network width, learning rate and envs per actor were chosen (docs in the preset).

Prints, per variant: how many seeds reached the target, the median and each seed's updates and env steps
(not reached = counted as infinitely many for the median); writes bench-results/sweep-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from apexrl.bench._results import ROOT, write_result
from apexrl.bench._variants import add_variant_args, label, variant_list


def run_variant(preset: str, overrides: list[str], seed: int, target: float, eval_every: int,
                max_updates: int) -> dict[str, Any]:
    import torch

    from apexrl.config import load
    from apexrl.runtime.local import build_local

    torch.set_num_threads(1)
    cfg = load(preset, [f"seed={seed}", *overrides])
    if cfg.replay.samples_per_insert is None:
        raise SystemExit("bench sweep needs replay.samples_per_insert (it fixes the updates per env step)")
    local = build_local(cfg, cfg.actors.num_actors or 1)
    learner = local.loop.learner
    t0 = time.perf_counter()
    env_steps = 0
    evals: list[tuple[int, int, float]] = []
    reached: tuple[int, int] | None = None
    while learner.updates < max_updates and reached is None:
        if local.inserting_allowed():
            env_steps += sum(r["env_steps"] for r in local.act(8))
        before = learner.updates
        local.learn(eval_every - learner.updates % eval_every)
        if learner.updates > before and learner.updates % eval_every == 0:
            mean = statistics.mean(local.evaluate(10, seed=seed * 7 + 1_000_000 + learner.updates))
            evals.append((learner.updates, env_steps, round(mean, 1)))
            if mean >= target:
                reached = (learner.updates, env_steps)
    local.close()
    return {"overrides": overrides, "seed": seed, "reached": reached is not None,
            "updates_to_target": reached[0] if reached else None,
            "env_steps_to_target": reached[1] if reached else None,
            "cpu_wall_s": round(time.perf_counter() - t0, 2), "evals": evals}


def _child(preset: str, variant: str, seed: int, a: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "apexrl.bench.sweep", "--_child", variant, "--preset", preset, "--seed", str(seed),
           "--target", str(a.target), "--eval-every", str(a.eval_every), "--max-updates", str(a.max_updates)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    line = next((ln for ln in reversed(r.stdout.splitlines()) if ln.startswith("SWEEP_RESULT ")), None)
    if r.returncode != 0 or line is None:
        err = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return {"overrides": variant.split(), "seed": seed, "reached": False, "error": err[:300]}
    return json.loads(line[len("SWEEP_RESULT "):])


def _median_inf(xs: list[int | None]) -> float:
    return statistics.median([float("inf") if x is None else float(x) for x in xs])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="apexrl bench sweep", description=__doc__.split("\n\n")[0])
    add_variant_args(p)
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    p.add_argument("--seed-offset", type=int, default=0, help="first seed")
    p.add_argument("--target", type=float, default=475.0)
    p.add_argument("--eval-every", type=int, default=250, help="updates between greedy evaluations")
    p.add_argument("--max-updates", type=int, default=6000)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="runs side by side")
    p.add_argument("--out", default=None)
    p.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a._child is not None:
        res = run_variant(a.preset, a._child.split(), a.seed, a.target, a.eval_every, a.max_updates)
        print("SWEEP_RESULT " + json.dumps(res), flush=True)
        return 0

    variants = variant_list(a)
    seeds = range(a.seed_offset, a.seed_offset + a.seeds)
    jobs = [(v, s) for v in variants for s in seeds]
    print(f"{len(jobs)} runs ({len(variants)} variants x {a.seeds} seeds), {a.jobs} at a time...", flush=True)
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        results = list(pool.map(lambda j: _child(a.preset, j[0], j[1], a), jobs))
    summary = []
    print(f"{'variant':58} {'reached':>8} {'median updates':>15} {'median env steps':>17}  updates per seed")
    for v in variants:
        rs = [r for r in results if r["overrides"] == v.split()]
        ups = [r.get("updates_to_target") for r in rs]
        steps = [r.get("env_steps_to_target") for r in rs]
        mu, ms = _median_inf(ups), _median_inf(steps)
        row = {"variant": label(v), "reached": sum(r["reached"] for r in rs), "runs": len(rs),
               "median_updates": None if mu == float("inf") else mu,
               "median_env_steps": None if ms == float("inf") else ms, "updates": ups}
        summary.append(row)
        fmt = lambda x: "not reached" if x is None else f"{x:,.0f}"
        print(f"{row['variant'][:58]:58} {row['reached']:>4}/{len(rs):<3} {fmt(row['median_updates']):>15} "
              f"{fmt(row['median_env_steps']):>17}  {' '.join('-' if u is None else str(u) for u in ups)}")
        for r in rs:
            if r.get("error"):
                print(f"{'':4}seed {r['seed']}: {r['error']}")
    print(f"not reached = no greedy mean >= {a.target:g} within {a.max_updates:,} updates; median counts it as inf")
    write_result("sweep", {"preset": a.preset, "target": a.target, "eval_every": a.eval_every,
                           "max_updates": a.max_updates,
                           "seeds": list(seeds), "summary": summary,
                           "runs": results}, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
