"""End to end: wall time and env steps until the greedy evaluation first reaches a target return.

    apexrl bench e2e --seeds 3 --budget-s 600 --peers apexrl,sb3,rllib      # CartPole-v1 to 475 (DQN)
    apexrl bench e2e --config pendulum --seeds 3 --peers apexrl,sb3         # Pendulum-v1 to -200 (DPG vs TD3)
    apexrl bench e2e --peers apexrl,qrdqn --set network.distribution=quantile   # QR-DQN heads on CartPole

Each (peer, seed) runs alone, one after another (seed by seed: every peer runs seed k before any runs
seed k+1), in a child process (``--_child``) so that peak RSS is the child's process tree (psutil, sampled
every 0.2 s by the parent) and nothing leaks between runs. Every peer is judged by the same evaluation:
:func:`apexrl.evaluation.evaluate`, the mean of 10 greedy episodes with the peer's current Q-network, every
``--eval-interval-s`` wall seconds (default 1). apexrl evaluates on a thread of its driver while training
goes on; the in-loop peers (SB3, RLlib) pause training to evaluate, and that evaluation time is
subtracted from their clock so no peer pays for the benchmark's measurement. "not reached" is a result.

Peers (``pip install -e .[bench]``; a peer that does not import is skipped with the reason):
  apexrl  the task's preset (apexrl/configs/<task>.yaml) with ``seed`` and the target/budget as stop rules.
  sb3     Stable-Baselines3 with RL Zoo's published hyperparameters: DQN on CartPole-v1 (SB3_ZOO_CARTPOLE),
          TD3 on Pendulum-v1 (SB3_ZOO_PENDULUM_TD3).
  rllib   RLlib 2.60 DQNConfig, new API stack: PrioritizedEpisodeReplayBuffer (alpha 0.6, beta 0.4), double +
          dueling, n_step 3, as many env runners as apexrl has actors, otherwise RLlib's defaults (its default
          training intensity: one update of 32 per 3 sampled env steps). Updates are learner updates.

RLlib 2.60 pins gymnasium==1.2.2 (and needs dm-tree), so it lives in its own venv and only its child runs
with that interpreter; the parent and the other peers use the current one:

    bash benchmarks/make_rllib_venv.sh          # .venv-rllib: torch==2.13.0, apexrl (editable), ray[rllib]==2.60.0
    apexrl bench e2e --peers apexrl,sb3,rllib --rllib-python .venv-rllib/bin/python
    APEXRL_RLLIB_PYTHON=$PWD/.venv-rllib/bin/python apexrl bench e2e ...   # same, from the environment

Writes bench-results/e2e-<date>.json and prints a table (median and min-max over seeds).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from apexrl.bench._results import ROOT, write_result
from apexrl.bench.e2e_peers import EVAL_EPISODES, PEERS, TASKS, Task

# ------------------------------------------------------------------------------------------ parent
RLLIB_VENV_HINT = ("RLlib 2.60 pins gymnasium==1.2.2, so give it its own venv: bash benchmarks/make_rllib_venv.sh "
                   "(creates .venv-rllib), then pass --rllib-python .venv-rllib/bin/python or set "
                   "APEXRL_RLLIB_PYTHON")


def _skip_reason(peer: str, python: str = sys.executable, task: Task | None = None) -> str | None:
    if peer == "rllib" and task is not None and task.agent == "r2d2":
        return "RLlib 2.60 has no R2D2 (it left RLlib for the unmaintained rllib_contrib); compare with sb3"
    if peer == "qrdqn" and task is not None and task.preset != "cartpole":
        return "the qrdqn peer has RL Zoo's settings for CartPole-v1 only"
    if peer == "rllib" and task is not None and task.agent != "dqn":
        return "the rllib peer runs DQN only (RLlib removed Ape-X DDPG); compare continuous control with sb3"
    module = "sb3_contrib" if peer == "sb3" and task is not None and task.agent == "r2d2" else PEERS[peer][0]
    # Another interpreter also needs apexrl (config, shared evaluation) importable from this checkout.
    imports = [module] + ([] if python == sys.executable else ["apexrl.config", "apexrl.evaluation"])
    try:
        r = subprocess.run([python, "-c", f"import {', '.join(imports)}"], capture_output=True, text=True,
                           env=_child_env(python), timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        r = subprocess.CompletedProcess([], 1, "", f"cannot run {python}: {e}")
    if r.returncode == 0:
        return None
    last = (r.stderr.strip().splitlines() or ["import failed"])[-1]
    where = "" if python == sys.executable else f" with {python}"
    hint = RLLIB_VENV_HINT if peer == "rllib" else "install with: pip install -e '.[bench]'"
    return f"cannot import {', '.join(imports)}{where} ({last}); {hint}"


def _child_env(python: str = sys.executable) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    if python != sys.executable:
        # Run as if that interpreter's venv were activated (Ray starts helpers found on PATH).
        bin_dir = os.path.dirname(python)
        env["PATH"] = os.pathsep.join([bin_dir, *filter(None, [env.get("PATH")])])
        venv = os.path.dirname(bin_dir)
        if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):
            env["VIRTUAL_ENV"] = venv
        else:
            env.pop("VIRTUAL_ENV", None)
    return env


def _peer_python(peer: str, rllib_python: str | None) -> str:
    """The interpreter a peer's child runs with: RLlib's may be a separate venv (see RLLIB_VENV_HINT)."""
    if peer == "rllib" and rllib_python:
        # abspath, not resolve: a venv's python is a symlink, and resolving it would leave the venv.
        return os.path.abspath(os.path.expanduser(rllib_python))
    return sys.executable


def _tree_rss(proc: Any) -> int:
    import psutil

    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_one(peer: str, task: Task, seed: int, budget: float, eval_interval: float,
            overrides: list[str], python: str = sys.executable) -> dict[str, Any]:
    import psutil

    cmd = [python, "-m", "apexrl.bench.e2e", "--_child", peer, "--config", task.preset, "--env", task.env_id,
           "--target", repr(task.target), "--seed", str(seed),
           "--budget-s", str(budget), "--eval-interval-s", str(eval_interval),
           *[x for o in overrides for x in ("--set", o)]]
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, env=_child_env(python), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    peak = [0]
    ps = psutil.Process(child.pid)

    def watch() -> None:
        while child.poll() is None:
            peak[0] = max(peak[0], _tree_rss(ps))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out, err = child.communicate(timeout=budget * 2 + 180)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
    watcher.join(timeout=1)
    wall = time.perf_counter() - t0
    result: dict[str, Any] = {"peer": peer, "seed": seed, "process_wall_s": round(wall, 2),
                              "peak_rss_mb": round(peak[0] / 2**20, 1)}
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("E2E_RESULT ")), None)
    if child.returncode != 0 or line is None:
        result.update({"reached": False, "error": (err.strip().splitlines() or ["no output"])[-1][:300]})
    else:
        result.update(json.loads(line[len("E2E_RESULT "):]))
    return result


def _median_spread(values: list[float]) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{med:,.1f}" if len(values) == 1 else f"{med:,.1f} [{min(values):,.0f}-{max(values):,.0f}]"


def summarize(results: list[dict[str, Any]], peers: list[str], skipped: dict[str, str]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for peer in peers:
        if peer in skipped:
            summary[peer] = {"skipped": skipped[peer]}
            continue
        rs = [r for r in results if r["peer"] == peer]
        ok = [r for r in rs if r.get("reached")]
        summary[peer] = {
            "runs": len(rs), "reached": len(ok),
            "time_to_target_s": [r.get("time_to_target_s") for r in rs],
            "env_steps_to_target": [r.get("env_steps_to_target") for r in rs],
            # Median over seeds with "not reached" counted as +inf (so a half-failing peer has no median).
            "median_time_to_target_s": _median_inf([r.get("time_to_target_s") for r in rs]),
            "median_env_steps_to_target": _median_inf([r.get("env_steps_to_target") for r in rs]),
            "median_env_steps_per_s": _med([r.get("env_steps_per_s") for r in rs]),
            "median_updates_per_s": _med([r.get("updates_per_s") for r in rs]),
            "replay_20": [r.get("replay_20") for r in ok],
            "max_peak_rss_mb": max((r["peak_rss_mb"] for r in rs), default=None),
        }
    return summary


def _med(xs: list[Any]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _median_inf(xs: list[Any]) -> float | None:
    vals = [float("inf") if x is None else float(x) for x in xs]
    if not vals:
        return None
    m = statistics.median(vals)
    return None if m == float("inf") else m


def print_table(results: list[dict[str, Any]], peers: list[str], skipped: dict[str, str], budget: float,
                target: float = 475.0) -> None:
    hdr = f"{'peer':8} {'reached':>8} {f'time to {target:g} s':>20} {f'env steps to {target:g}':>22} {'env steps/s':>16} " \
          f"{'updates/s':>14} {'peak RSS MB':>16}"
    print(hdr)
    print("-" * len(hdr))
    for peer in peers:
        if peer in skipped:
            print(f"{peer:8} skipped: {skipped[peer]}")
            continue
        rs = [r for r in results if r["peer"] == peer]
        ok = [r for r in rs if r.get("reached")]
        print(f"{peer:8} {len(ok):>4}/{len(rs):<3} "
              f"{_median_spread([r['time_to_target_s'] for r in ok]):>20} "
              f"{_median_spread([r['env_steps_to_target'] for r in ok]):>22} "
              f"{_median_spread([r['env_steps_per_s'] for r in rs if r.get('env_steps_per_s')]):>16} "
              f"{_median_spread([r['updates_per_s'] for r in rs if r.get('updates_per_s')]):>14} "
              f"{_median_spread([r['peak_rss_mb'] for r in rs]):>16}")
        for r in rs:
            if not r.get("reached"):
                why = r.get("error") or f"not reached in {budget:g} s budget"
                print(f"{'':8}   seed {r['seed']}: {why}")
        replays = [r["replay_20"] for r in ok if r.get("replay_20") is not None]
        if replays:
            print(f"{'':8}   best.pt on 20 fresh episodes (apexrl eval RUN): "
                  + ", ".join(f"{x:.4g}" for x in replays) + f"; lowest {min(replays):.4g}, target {target:g}")
    print("median [min-max] over the seeds that reached the target; time includes start-up")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="apexrl bench e2e", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="cartpole", choices=sorted(TASKS),
                   help="task: apexrl's preset, its env and target (cartpole: DQN to 475; pendulum: DPG to -200; minatar: Breakout to 10)")
    p.add_argument("--env", default=None, help="env id (default: the task's)")
    p.add_argument("--target", type=float, default=None, help="greedy-eval mean that counts as solved "
                   "(default: the task's)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per peer (from --first-seed)")
    p.add_argument("--first-seed", type=int, default=0, help="first seed (to extend an earlier run's seeds)")
    p.add_argument("--budget-s", type=float, default=600.0, help="wall seconds per run before 'not reached'")
    p.add_argument("--peers", default="apexrl,sb3,rllib")
    p.add_argument("--eval-interval-s", type=float, default=1.0,
                   help="seconds between greedy evaluations, the same for every peer (apexrl: "
                        "evaluation.interval_s; 0 = preset's). Coarser than ~1/10 of the times measured "
                        "would make the interval, not the trainer, the result")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="apexrl config override")
    p.add_argument("--from-launch", action="store_true",
                   help="count time from each child process's launch (Python, imports and all), not from the "
                        "clock each peer starts after its imports")
    p.add_argument("--out", default=None, help="JSON path (default bench-results/e2e-<date>.json)")
    p.add_argument("--rllib-python", default=os.environ.get("APEXRL_RLLIB_PYTHON") or None, metavar="PATH",
                   help="interpreter for the rllib peer, e.g. .venv-rllib/bin/python from "
                        "benchmarks/make_rllib_venv.sh (default: $APEXRL_RLLIB_PYTHON, else this one)")
    p.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)

    base = TASKS[a.config]
    task = Task(base.preset, a.env or base.env_id, base.target if a.target is None else a.target, base.agent)
    if a._child:
        res = PEERS[a._child][1](task, a.seed, a.budget_s, a.eval_interval_s, a.set)
        if "clock_started_at" in res:
            from apexrl.runtime.footprint import process_start

            res["launch_s"] = round(res["clock_started_at"] - process_start(), 3)  # interpreter and imports
        print("E2E_RESULT " + json.dumps(res), flush=True)
        return 0

    peers = [x.strip() for x in a.peers.split(",") if x.strip()]
    unknown = [x for x in peers if x not in PEERS]
    if unknown:
        p.error(f"unknown peer(s) {unknown}; choose from {sorted(PEERS)}")
    pythons = {peer: _peer_python(peer, a.rllib_python) for peer in peers}
    skipped = {peer: why for peer in peers if (why := _skip_reason(peer, pythons[peer], task)) is not None}
    for peer, why in skipped.items():
        print(f"skipping {peer}: {why}", flush=True)
    results: list[dict[str, Any]] = []
    # Seed-major: every peer runs seed k before any runs seed k+1, so a shared host's slow spell falls on
    # all peers alike instead of on whichever ran then.
    for seed in range(a.first_seed, a.first_seed + a.seeds):
        for peer in peers:
            if peer in skipped:
                continue
            print(f"running {peer} seed {seed} (budget {a.budget_s:g} s)...", flush=True)
            r = run_one(peer, task, seed, a.budget_s, a.eval_interval_s, a.set, pythons[peer])
            if a.from_launch and r.get("time_to_target_s") is not None:
                r["time_to_target_s"] += r.get("launch_s", 0.0)
            print(f"  -> reached={r.get('reached')} time={r.get('time_to_target_s')} "
                  f"steps={r.get('env_steps_to_target')} {r.get('error', '')}", flush=True)
            results.append(r)
    print_table(results, peers, skipped, a.budget_s, task.target)
    write_result("e2e", {
        "task": a.config, "env": task.env_id, "target": task.target, "eval_episodes": EVAL_EPISODES, "budget_s": a.budget_s,
        "seeds": a.seeds, "first_seed": a.first_seed, "time_from": "launch" if a.from_launch else "clock", "host": {"cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg()},
        "skipped": skipped, "pythons": pythons, "summary": summarize(results, peers, skipped), "runs": results,
    }, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
