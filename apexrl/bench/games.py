"""``apexrl bench games``: self-play on a board game against its peer, time from launch until the greedy policy
loses at most a set rate against a uniform random legal player (1,000 games per seat), seed by seed.

    apexrl bench games --seeds 3 --peers apexrl,tianshou --tianshou-python .venv-tianshou/bin/python
    bash benchmarks/make_tianshou_venv.sh       # the peer's venv: tianshou==0.5.0, as its tutorial pins

  apexrl    ``apexrl train --config tictactoe``: one policy plays both seats; stops when the first seat loses
            <= 1% and the second <= 3% in an evaluation of 1,000 games per seat (every 10 s).
  tianshou  PettingZoo's Tianshou tutorial (``peer_tianshou.py``: its settings as published): a DQN learner in
            the second seat against random; stops when it loses <= 3% there, the same evaluation code, every
            10 s of its own clock, the evaluations' time taken off that clock.

Each run is a child process; its clock starts when the parent launches it (Python, imports, start-up count).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from apexrl.bench._results import ROOT, write_result

RATES = (0.01, 0.03)  # first seat, second seat
EPISODES = 1000
EVAL_EVERY_S = 10.0


def _apexrl_child(seed: int, budget: float, out: str) -> None:
    """In the child: train with the preset; write when the target was reached (wall clock) and the curve."""
    from apexrl.config import load
    from apexrl.metrics import Console
    from apexrl.runtime.driver import train

    cfg = load("tictactoe", [f"seed={seed}", f"stop.max_time_s={budget}", "logging.console=plain",
                             "logging.tensorboard=false", "checkpoint.every_reports=0",
                             f"stop.loss_rates=[{RATES[0]}, {RATES[1]}]", f"evaluation.episodes={EPISODES}",
                             f"evaluation.interval_s={EVAL_EVERY_S}"])

    class WallClock(Console):
        t_start: float | None = None  # the driver's clock zero, as wall time

        def update(self, record: dict[str, Any]) -> None:
            if self.t_start is None:
                self.t_start = time.time() - float(record["time_s"])
            super().update(record)

    console = WallClock("plain")
    run_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"apexrl-games-{os.getpid()}"
    res = train(cfg, run_dir=run_dir, console=console)
    with open(run_dir / "metrics.jsonl") as f:
        evals = [(r["time_s"], r["env_steps"], {k: v for k, v in r.items() if k.startswith("eval_seat_")})
                 for r in map(json.loads, filter(str.strip, f)) if r.get("eval_return_mean") is not None]
    reached_at = None if res.time_to_target_s is None else (console.t_start or 0.0) + res.time_to_target_s
    Path(out).write_text(json.dumps({"reached_at": reached_at, "evals": evals, "env_steps": res.env_steps,
                                     "updates": res.learner_updates, "run_dir": str(run_dir)}))


def run_apexrl(seed: int, budget: float) -> dict[str, Any]:
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"apexrl-games-{os.getpid()}-{seed}.json"
    launch = time.time()
    subprocess.run([sys.executable, "-m", "apexrl.bench.games", "--child", str(seed), str(budget), str(out)],
                   check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    data = json.loads(out.read_text())
    data["time_to_target_s"] = None if data["reached_at"] is None else round(data["reached_at"] - launch, 2)
    data["reached"] = data["reached_at"] is not None
    return data


def run_tianshou(seed: int, budget: float, python: str) -> dict[str, Any]:
    script = Path(__file__).with_name("peer_tianshou.py")
    done = subprocess.run([python, str(script), str(seed), str(budget), str(RATES[1]), str(EVAL_EVERY_S),
                           str(EPISODES)], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode != 0:
        raise SystemExit(f"the tianshou peer failed: {done.stderr.strip().splitlines()[-1:]} (its venv: "
                         "bash benchmarks/make_tianshou_venv.sh)")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _summary(runs: list[dict[str, Any]], budget: float) -> str:
    times = [r["time_to_target_s"] for r in runs if r["reached"]]
    if not times:
        return f"0/{len(runs)} in {budget:g} s"
    return f"{len(times)}/{len(runs)}  {statistics.median(times):.1f} s [{min(times):.0f}-{max(times):.0f}]"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="apexrl bench games", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--budget-s", type=float, default=300.0, help="wall seconds per run before 'not reached'")
    p.add_argument("--peers", default="apexrl,tianshou")
    p.add_argument("--tianshou-python", default=os.environ.get("APEXRL_TIANSHOU_PYTHON", ".venv-tianshou/bin/python"),
                   help="the peer's interpreter (benchmarks/make_tianshou_venv.sh)")
    p.add_argument("--out", default=None)
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        _apexrl_child(int(a.child[0]), float(a.child[1]), a.child[2])
        return 0
    results: dict[str, list[dict[str, Any]]] = {}
    for peer in a.peers.split(","):
        for seed in range(a.seeds):
            print(f"running {peer} seed {seed} (budget {a.budget_s:g} s)...", flush=True)
            r = run_apexrl(seed, a.budget_s) if peer == "apexrl" else run_tianshou(seed, a.budget_s, a.tianshou_python)
            print(f"  -> reached={r['reached']} time={r['time_to_target_s']}", flush=True)
            results.setdefault(peer, []).append(r)
    print(f"\ntic-tac-toe, time from launch until the greedy policy loses <= {RATES[0]:.0%} (first seat) and "
          f"<= {RATES[1]:.0%} (second) of {EPISODES} games against random (tianshou: second seat only)")
    for peer, runs in results.items():
        print(f"  {peer:<9} {_summary(runs, a.budget_s)}")
    ours, theirs = results.get("apexrl"), results.get("tianshou")
    if ours and theirs:
        t_ours = [r["time_to_target_s"] for r in ours if r["reached"]]
        t_theirs = [r["time_to_target_s"] for r in theirs if r["reached"]]
        if t_ours and t_theirs:
            print(f"  ratio apexrl / tianshou (medians): {statistics.median(t_ours) / statistics.median(t_theirs):.2f}x")
        elif t_ours:
            print(f"  ratio apexrl / tianshou: < {statistics.median(t_ours) / a.budget_s:.3f}x (tianshou: none in "
                  f"{a.budget_s:g} s)")
    write_result("games", {"rates": RATES, "episodes": EPISODES, "budget_s": a.budget_s, "results": results}, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
