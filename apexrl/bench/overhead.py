"""``apexrl bench overhead``: what a small run costs besides training, measured as a user runs it.

* **start-up and shutdown**: ``--runs`` times ``apexrl train --target-return 475`` (CartPole-v1, the
  default preset), each a fresh process started from a shell-like environment with no ``RAY_*`` variable.
  Start-up: the command's launch to its first env step (the run's own ``start-up:`` line, which measures
  from the command's start, ``footprint.command_start``; the launch-to-line time seen from here is also kept).
  Shutdown: the ``stopping:`` line (the stop condition met) to the process's exit, seen from here.
* **memory**: one ``apexrl train --max-env-steps N`` and then SB3's DQN with RL Zoo's CartPole-v1
  settings for the same N steps; the PSS of each process tree is sampled every second and the peak kept,
  with its breakdown per process role.

    apexrl bench overhead --runs 5 --memory-steps 40000
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from apexrl.bench._results import write_result
from apexrl.runtime.footprint import by_role, tree_pss

SAMPLE_S = 1.0  # reading a tree's PSS costs ~40 ms of kernel time on this host: often enough, not a load


def user_env() -> dict[str, str]:
    """This environment without ``RAY_*`` variables: what a user's shell gives the command."""
    return {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}


def watch(cmd: list[str], memory: bool = True) -> dict[str, Any]:
    """Run ``cmd``; return its output lines with arrival times (s after launch), exit time and (``memory``)
    peak PSS."""
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, env=user_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, bufsize=1)
    peak: dict[str, Any] = {"bytes": 0, "procs": []}

    def sample() -> None:
        while memory and child.poll() is None:
            procs = tree_pss(child.pid)
            total = sum(b for _, b in procs)
            if total > peak["bytes"]:
                peak.update(bytes=total, procs=procs)
            time.sleep(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    lines = []
    assert child.stdout is not None
    for line in child.stdout:
        lines.append((time.perf_counter() - t0, line.rstrip("\n")))
    child.wait()
    exit_s = time.perf_counter() - t0
    sampler.join(timeout=2)
    return {"lines": lines, "exit_s": exit_s, "returncode": child.returncode, "peak_bytes": peak["bytes"],
            "by_role": {r: {"processes": n, "mb": round(b / 2**20, 1)} for r, (n, b) in by_role(peak["procs"]).items()}}


def _line(res: dict[str, Any], prefix: str) -> tuple[float, str] | None:
    return next(((t, s) for t, s in res["lines"] if s.startswith(prefix)), None)


def timed_run(seed: int, run_dir: str) -> dict[str, Any]:
    res = watch([sys.executable, "-m", "apexrl", "train", "--target-return", "475", "--seed", str(seed),
                 "--console", "plain", "--run-dir", run_dir], memory=False)  # sampling would slow start-up
    out: dict[str, Any] = {"seed": seed, "returncode": res["returncode"], "wall_s": round(res["exit_s"], 2)}
    start, stop = _line(res, "start-up:"), _line(res, "stopping:")
    if start is not None:
        m = re.search(r"first env step ([\d.]+) s", start[1])
        out["startup_s"] = float(m.group(1)) if m else None
        out["startup_line_seen_s"] = round(start[0], 2)
        out["startup_parts"] = start[1].split("(", 1)[-1].rstrip(")")
    if stop is not None:
        out["shutdown_s"] = round(res["exit_s"] - stop[0], 2)
    done = _line(res, "done:")
    out["done"] = done[1] if done else "\n".join(s for _, s in res["lines"][-3:])
    return out


def sb3_child(steps: int) -> None:
    """SB3 DQN, RL Zoo's CartPole-v1 settings, ``steps`` env steps (run in a child process)."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN

    from apexrl.bench.e2e_peers import SB3_ZOO_CARTPOLE

    torch.set_num_threads(1)  # as bench e2e runs it
    DQN("MlpPolicy", gym.make("CartPole-v1"), seed=0, verbose=0, device="cpu",
        **SB3_ZOO_CARTPOLE).learn(total_timesteps=steps)


def memory_pair(steps: int, run_dir: str) -> dict[str, Any]:
    apex = watch([sys.executable, "-m", "apexrl", "train", "--max-env-steps", str(steps), "--console", "plain",
                  "--run-dir", run_dir])
    sb3 = watch([sys.executable, "-m", "apexrl.bench.overhead", "--_sb3", str(steps)])
    done = _line(apex, "done:")
    return {"steps": steps,
            "apexrl": {"peak_pss_mb": round(apex["peak_bytes"] / 2**20, 1), "by_role": apex["by_role"],
                       "returncode": apex["returncode"], "done": done[1] if done else None},
            "sb3": {"peak_pss_mb": round(sb3["peak_bytes"] / 2**20, 1), "by_role": sb3["by_role"],
                    "returncode": sb3["returncode"]}}


def _median(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def _fmt(x: float | None, unit: str = " s") -> str:
    return "-" if x is None else f"{x:.2f}{unit}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="apexrl bench overhead", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5, help="timed runs to CartPole 475 (0: none)")
    p.add_argument("--memory-steps", type=int, default=40_000, help="env steps of the memory pair (0: none)")
    p.add_argument("--out", default=None, help="result JSON (default bench-results/overhead-<time>.json)")
    p.add_argument("--_sb3", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args._sb3 is not None:
        sb3_child(args._sb3)
        return 0
    if any(k.startswith("RAY_") for k in os.environ):
        print("note: RAY_* variables are set here; the runs get none, as from a user's shell")
    tmp = tempfile.mkdtemp(prefix="apexrl-overhead-")
    try:
        runs = []
        for i in range(args.runs):
            r = timed_run(i, os.path.join(tmp, f"run{i}"))
            runs.append(r)
            print(f"run {i}: start-up {_fmt(r.get('startup_s'))} ({r.get('startup_parts', '-')}), "
                  f"shutdown {_fmt(r.get('shutdown_s'))}, wall {r['wall_s']:.1f} s; {r['done'][:90]}")
        summary: dict[str, Any] = {"runs": runs}
        if runs:
            summary["median_startup_s"] = _median([r.get("startup_s") for r in runs])
            summary["median_shutdown_s"] = _median([r.get("shutdown_s") for r in runs])
            print(f"\nmedian of {len(runs)}: start-up {_fmt(summary['median_startup_s'])}, "
                  f"shutdown {_fmt(summary['median_shutdown_s'])}")
        if args.memory_steps:
            mem = summary["memory"] = memory_pair(args.memory_steps, os.path.join(tmp, "memory"))
            a, b = mem["apexrl"]["peak_pss_mb"], mem["sb3"]["peak_pss_mb"]
            print(f"\npeak PSS, {args.memory_steps:,} CartPole steps: apexrl {a:,.0f} MB, SB3 DQN {b:,.0f} MB "
                  f"({a / max(b, 1e-9):.2f}x)")
            print(f"{'apexrl process (at its peak)':34s} {'n':>3s} {'MB':>7s}")
            for role, v in mem["apexrl"]["by_role"].items():
                print(f"{role:34s} {v['processes']:3d} {v['mb']:7.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write_result("overhead", summary, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
