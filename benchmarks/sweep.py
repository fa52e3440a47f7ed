"""Learning speed of config variants, measured in learner updates (not seconds) to a greedy target.

    apexrl bench sweep --seeds 5 --variant "" --variant "network.hidden_sizes=[128,128]"

Each (variant, seed) runs the Ray-free roles in one process (``runtime.local.build_local``: the classes
the Ray runtime wraps) with the samples-per-insert ratio of the config enforced exactly: after each round of
env steps the learner owes ``env_steps * samples_per_insert / batch_size`` updates. Every ``--eval-every``
updates the current network plays 10 greedy episodes (``apexrl.evaluation.evaluate``, the code every run and
``bench e2e`` use); the run stops at the first mean >= ``--target`` or after ``--max-updates``.

``--pipelined`` draws batches in the Ray learner's order instead (``batches_per_request`` at a time,
``prefetch`` requests ahead, priorities written back with the next request); ``--lead N`` lets the learner
start N updates ahead of the ratio the moment replay is warm, as a rate limiter whose band lets it run that
far ahead does; ``--actor-lead N`` has the actors take N env steps with the first network once replay is
warm, before any update, as an actor with many sends in flight did. They showed why Ray runs needed more
updates than this benchmark's (results/lead-20261203): the pipeline's stale priorities did not hurt, both
leads did.

Counting updates instead of seconds makes the result independent of the host's load, so variants can run
side by side (``--jobs``). Seconds are what users feel: ``bench e2e`` measures those; this benchmark is how
the CartPole preset's network width, learning rate and envs per actor were chosen (docs in the preset).

Prints, per variant: how many seeds reached the target, the median and each seed's updates and env steps
(not reached = counted as infinitely many for the median); writes benchmarks/results/sweep-<date>.json.
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

from benchmarks._results import ROOT, write_result
from benchmarks._variants import add_variant_args, label, variant_list


def run_variant(preset: str, overrides: list[str], seed: int, target: float, eval_every: int,
                max_updates: int, pipelined: bool = False, lead: int = 0, actor_lead: int = 0) -> dict[str, Any]:
    import numpy as np
    import torch

    from apexrl.config import load
    from apexrl.evaluation import evaluate
    from apexrl.runtime.local import build_local

    torch.set_num_threads(1)
    cfg = load(preset, [f"seed={seed}", *overrides])
    spi = cfg.replay.samples_per_insert
    if spi is None:
        raise SystemExit("bench sweep needs replay.samples_per_insert (it fixes the updates per env step)")
    topo = build_local(cfg, cfg.actors.num_actors or 1)
    learner, batch_size = topo.learner, cfg.learner.batch_size
    if pipelined and len(topo.shards) > 1:
        raise SystemExit("bench sweep --pipelined models one shard (replay.num_shards=1)")
    pipe = _Pipeline(topo, cfg) if pipelined else None  # it imports Ray's worker module: only when asked
    t0 = time.perf_counter()
    env_steps, owed, ahead = 0, 0.0, 0
    evals: list[tuple[int, int, float]] = []
    reached: tuple[int, int] | None = None
    while learner.updates < max_updates and reached is None:
        for a in topo.actors:
            n = a.run(8)["env_steps"]
            env_steps += n
            owed += n * spi / batch_size
        if any(len(s.buffer) < s.min_size for s in topo.shards):
            owed = float(lead)
            continue
        while ahead < actor_lead:  # actors run on that far with the first weights before the learner starts
            for a in topo.actors:
                n = a.run(8)["env_steps"]
                env_steps += n
                ahead += n
                owed += n * spi / batch_size
        while owed >= 1 and reached is None:
            owed -= 1
            if pipe is not None:
                if not pipe.step():
                    break
            elif topo.learn_once(topo.shards[learner.updates % len(topo.shards)]) is None:
                break
            if learner.updates % eval_every == 0:
                mean = float(np.mean(evaluate(learner.net, cfg.env, 10, seed=seed * 7 + 1_000_000 + learner.updates)))
                evals.append((learner.updates, env_steps, round(mean, 1)))
                if mean >= target:
                    reached = (learner.updates, env_steps)
    topo.close()
    return {"overrides": overrides, "seed": seed, "reached": reached is not None,
            "updates_to_target": reached[0] if reached else None,
            "env_steps_to_target": reached[1] if reached else None,
            "cpu_wall_s": round(time.perf_counter() - t0, 2), "evals": evals}


class _Pipeline:
    """The Ray learner's sampling order, in process (``runtime.workers.LearnerWorker``): each request
    draws ``batches_per_request`` batches at once, ``prefetch`` requests are drawn ahead of the update
    that uses them, and new priorities reach the shard with the next request, so an update sees
    priorities up to ``prefetch * batches_per_request`` updates old. Only one shard."""

    def __init__(self, topo: Any, cfg: Any) -> None:
        from apexrl.runtime.workers import default_batches_per_request

        self.topo, self.cfg = topo, cfg
        self.k = default_batches_per_request(cfg)
        self.inflight: list[dict[str, Any]] = []
        self.pending: list[tuple[Any, Any]] = []
        self.ready: list[tuple[dict[str, Any], Any, Any]] = []

    def _request(self) -> None:
        import numpy as np

        shard = self.topo.shards[0]
        if self.pending:
            shard.update_priorities(np.concatenate([p[0] for p in self.pending]),
                                    np.concatenate([p[1] for p in self.pending]))
            self.pending = []
        self.inflight.append(shard.sample(self.cfg.learner.batch_size, self.topo.learner.beta(), self.k))

    def step(self) -> bool:
        """One update in the pipeline's order; False when the shard refused to sample."""
        if not self.ready:
            while len(self.inflight) < self.cfg.learner.prefetch:
                self._request()
            res = self.inflight.pop(0)
            if "batch" not in res:
                return False
            B = self.cfg.learner.batch_size
            for j in range(int(res["num_batches"])):
                rows = slice(j * B, (j + 1) * B)
                self.ready.append(({k: v[rows] for k, v in res["batch"].items()}, res["weights"][rows],
                                   res["indices"][rows]))
        batch, weights, indices = self.ready.pop(0)
        learner = self.topo.learner
        prios, _ = learner.update(batch, weights)
        if prios is not None:
            self.pending.append((indices, prios))
        if learner.updates % self.cfg.learner.publish_period == 0:
            self.topo.hub.publish(learner.updates, learner.weights())
        return True


def _child(preset: str, variant: str, seed: int, a: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.sweep", "--_child", variant, "--preset", preset, "--seed", str(seed),
           "--target", str(a.target), "--eval-every", str(a.eval_every), "--max-updates", str(a.max_updates)]
    if a.pipelined:
        cmd.append("--pipelined")
    cmd += ["--lead", str(a.lead), "--actor-lead", str(a.actor_lead)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
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
    p.add_argument("--pipelined", action="store_true",
                   help="sample as the Ray learner does (batches per request, prefetch, delayed priorities)")
    p.add_argument("--lead", type=int, default=0, help="updates the learner may run ahead of the ratio")
    p.add_argument("--actor-lead", type=int, default=0,
                   help="env steps the actors take with the first weights once replay is warm, before any update")
    p.add_argument("--out", default=None)
    p.add_argument("--_child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a._child is not None:
        res = run_variant(a.preset, a._child.split(), a.seed, a.target, a.eval_every, a.max_updates,
                          a.pipelined, a.lead, a.actor_lead)
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
                           "max_updates": a.max_updates, "pipelined": a.pipelined, "lead": a.lead,
                           "actor_lead": a.actor_lead,
                           "seeds": list(seeds), "summary": summary,
                           "runs": results}, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
