"""Throughput of the Ape-X topology on this host: learner round trips, and actors 1, 2, 4, 8.

    apexrl bench scaling learner [--seconds 8] [--k 1,2,4,8]
    apexrl bench scaling actors  [--actors 1,2,4,8] [--total-envs 16] [--seconds 40] [--config atari-gpu]
    apexrl bench scaling calls   (per-call Ray costs used by the model in docs/scaling.md)

``learner``: one shard prefilled with 20k CartPole-shaped transitions, no actors, no rate limit; the learner
runs with k batches per shard round trip. Reports updates/s and updates per learner CPU second (the
second survives a busy host: on 2 shared cores wall rates move with the neighbours' load).

``actors``: the real ``train`` with N actors x (total_envs / N) envs (``--total-envs 0``: the preset's envs
per actor, so the system grows with N), free-running (samples_per_insert null), evaluation off; rates are
averaged over the reports after replay is warm (learner updating): env steps/s, inserts/s (one n-step transition per env step), updates/s, learner idle fraction; where fewer
than two reports came after learning started, env steps/s is taken over the reports with env steps flowing.

Results go to bench-results/scaling-<mode>-<date>.json. See docs/scaling.md for the model built on them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from apexrl.bench._results import write_result
from apexrl.runtime.cluster import shutdown_ray


def _cartpole_batch(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"obs": rng.standard_normal((n, 4)).astype(np.float32),
            "action": rng.integers(0, 2, n).astype(np.int64),
            "reward": np.ones(n, np.float32),
            "discount": np.full(n, 0.99**3, np.float32),
            "next_obs": rng.standard_normal((n, 4)).astype(np.float32)}


def _ray_up(num_cpus: int = 2) -> None:
    from apexrl.runtime.cluster import init_ray

    init_ray(None, num_cpus=num_cpus)


def bench_learner(seconds: float, ks: list[int], batch: int) -> dict[str, Any]:
    import ray

    from apexrl.config import load
    from apexrl.runtime.assembly import assemble
    from apexrl.runtime.transport import ParameterServer
    from apexrl.runtime.workers import LearnerWorker, ReplayShardWorker

    _ray_up()
    out: dict[str, Any] = {"batch_size": batch, "seconds": seconds, "runs": []}
    try:
        rng = np.random.default_rng(0)
        for k in ks:
            system = assemble(load("cartpole", [f"learner.batch_size={batch}", f"learner.batches_per_request={k}",
                                                "replay.samples_per_insert=null", "replay.capacity=50000",
                                                "replay.learning_starts=1000"]), num_actors=1)
            shard = ReplayShardWorker.remote(**system.shard_kwargs(0))
            ray.get([shard.add.remote(_cartpole_batch(1000, rng), np.full(1000, 1.0)) for _ in range(20)])
            ps = ParameterServer.remote()
            lw = LearnerWorker.remote(system, [shard], ps, threads=1)
            ray.get(lw.train.remote(1.0))  # warm up: first sample, numba, torch
            rs = [ray.get(lw.train.remote(seconds / 4)) for _ in range(4)]
            ups = sum(r["updates"] for r in rs)
            wall = sum(r["time_s"] for r in rs)
            cpu = sum(r["cpu_s"] for r in rs)
            row = {"k": k, "updates_per_s": ups / wall, "updates_per_cpu_s": ups / max(cpu, 1e-9),
                   "cpu_ms_per_update": 1e3 * cpu / max(ups, 1),
                   "idle_fraction": sum(r["idle_s"] for r in rs) / wall, "load_avg": os.getloadavg()[0]}
            print(f"k={k}: {row['updates_per_s']:.0f} updates/s wall, {row['updates_per_cpu_s']:.0f} per learner "
                  f"CPU s ({row['cpu_ms_per_update']:.2f} ms CPU/update), idle {row['idle_fraction']:.1%}, "
                  f"load {row['load_avg']:.1f}", flush=True)
            out["runs"].append(row)
            for h in (lw, shard, ps):
                ray.kill(h)
    finally:
        shutdown_ray()
    return out


def bench_calls(reps: int = 300) -> dict[str, Any]:
    """Round-trip wall and caller CPU of the calls the model in docs/scaling.md prices."""
    import ray

    from apexrl.runtime.workers import ReplayShardWorker

    _ray_up()
    out: dict[str, Any] = {}
    try:
        rng = np.random.default_rng(0)
        shard = ReplayShardWorker.remote(capacity=200_000, alpha=0.6, seed=0, min_size=1000)
        ray.get(shard.add.remote(_cartpole_batch(5000, rng), np.ones(5000)))
        for n in (64, 256, 1024):
            b, p = _cartpole_batch(n, rng), np.ones(n)
            t, c = time.perf_counter(), time.process_time()
            for _ in range(reps):
                ray.get(shard.add.remote(b, p))
            out[f"add_{n}_ms"] = 1e3 * (time.perf_counter() - t) / reps
            out[f"add_{n}_caller_cpu_ms"] = 1e3 * (time.process_time() - c) / reps
        for k in (1, 4):
            t, c = time.perf_counter(), time.process_time()
            for _ in range(reps):
                ray.get(shard.update_and_sample.remote(None, None, 64, 0.4, k))
            out[f"sample_64x{k}_ms"] = 1e3 * (time.perf_counter() - t) / reps
            out[f"sample_64x{k}_caller_cpu_ms"] = 1e3 * (time.process_time() - c) / reps
        out["load_avg"] = os.getloadavg()[0]
        for key, v in out.items():
            print(f"{key}: {v:.3f}")
    finally:
        shutdown_ray()
    return out


def bench_actors(actors: list[int], total_envs: int, seconds: float, extra: list[str],
                 config: str = "cartpole") -> dict[str, Any]:
    from apexrl.config import load
    from apexrl.runtime.driver import train

    out: dict[str, Any] = {"config": config, "total_envs": total_envs, "seconds": seconds, "runs": []}
    preset_envs = load(config, extra).actors.envs_per_actor
    for n in actors:
        envs = max(1, total_envs // n) if total_envs else preset_envs
        run_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"apexrl-scaling-{os.getpid()}-{n}"
        cfg = load(config, [f"actors.num_actors={n}", f"actors.envs_per_actor={envs}",
                            "replay.samples_per_insert=null", "evaluation.interval_s=0",
                            f"stop.max_time_s={seconds}", "logging.console=plain", "logging.tensorboard=false",
                            "checkpoint.every_reports=0", *extra])
        train(cfg, run_dir=run_dir)
        rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
        warm = [r for r in rows if r.get("learner_updates", 0) > 0 and r.get("updates_per_s", 0) > 0][1:]
        if len(warm) < 2:  # a short run (a big preset's start-up): the reports where env steps flow
            warm = [r for r in rows if r.get("env_steps_per_s")][1:] or rows

        def med(key: str) -> float:
            vals = [r[key] for r in warm if r.get(key) is not None]
            return float(statistics.median(vals)) if vals else float("nan")

        row = {"actors": n, "envs_per_actor": envs, "env_steps_per_s": med("env_steps_per_s"),
               "inserts_per_s": med("env_steps_per_s"), "updates_per_s": med("updates_per_s"),
               "learner_idle_fraction": med("learner_idle_fraction"), "reports": len(warm),
               "load_avg": os.getloadavg()[0]}
        print(f"actors={n} x {envs} envs: {row['env_steps_per_s']:.0f} env steps/s, {row['updates_per_s']:.0f} "
              f"updates/s, learner idle {row['learner_idle_fraction']:.1%} (load {row['load_avg']:.1f})",
              flush=True)
        out["runs"].append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="apexrl bench scaling", description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["learner", "actors", "calls"])
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--k", default="1,2,4,8", help="learner: batches per round trip to try")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--actors", default="1,2,4,8")
    p.add_argument("--total-envs", type=int, default=16, help="actors: envs over all actors; 0 = preset's per actor")
    p.add_argument("--config", default="cartpole", help="actors: preset or YAML file (default cartpole)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="actors: config override")
    a = p.parse_args(argv)
    if a.mode == "learner":
        res = bench_learner(a.seconds or 8.0, [int(x) for x in a.k.split(",")], a.batch)
    elif a.mode == "calls":
        res = bench_calls()
    else:
        res = bench_actors([int(x) for x in a.actors.split(",")], a.total_envs, a.seconds or 40.0, a.set, a.config)
    res["mode"] = a.mode
    write_result(f"scaling-{a.mode}", res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
