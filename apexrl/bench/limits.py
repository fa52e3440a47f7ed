"""Throughput against its limit: what the distributed system gets out of the env and the learner, next to
what each could do alone on one core.

    apexrl bench limits --envs CartPole-v1,MinAtar/Breakout-v1,ALE/Pong-v5 --seconds 10

Per env (its preset: cartpole, minatar or atari, with the overrides given):
  env ceiling       one env, random actions, one process: env steps/s (the most an actor core could do);
                    for Atari the gymnasium env (Python wrappers), and beside it ale-py's C++ vector env
                    with one env on one thread ("ale ceiling"), the path actors use with env.vector=ale
  actor alone       the actor's loop in-process (``System.make_actor``: the preset's envs per actor, acting
                    with its network, n-step, priorities, send batching) into a sink that drops the data
  actor in a run    env steps/s of one actor in a real ``train()`` run (1 actor, 1 learner, 1 shard)
  learner alone     ``Learner.update`` on one fixed batch of the preset's size, one process, one thread
  learner in a run  updates/s of that run's learner, free-running (no rate limiter, so the learner
                    is never held back on purpose), over the reports after learning started
The "tax" columns are run / alone. The run and the alone figures are taken one after the other on the
same host, so a noisy neighbour hits both; each figure is the median of ``--repeats`` blocks.
Writes bench-results/limits-<date>.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any

import numpy as np

from apexrl.bench._results import write_result


def preset_for(env_id: str, overrides: list[str]) -> Any:
    from apexrl.config import EnvConfig, load
    from apexrl.envs import is_atari

    name = "atari" if is_atari(EnvConfig(id=env_id)) else "minatar" if env_id.startswith("MinAtar/") else "cartpole"
    return load(name, [f"env.id={env_id}", *overrides])


def _rate(fn: Any, seconds: float, repeats: int) -> float:
    """Median over ``repeats`` blocks of ``fn() -> units done`` run for ``seconds`` each."""
    rates = []
    for _ in range(repeats):
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < seconds:
            n += fn()
        rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates)


def env_ceiling(cfg: Any, seconds: float, repeats: int) -> float:
    from apexrl.envs import make_env

    env = make_env(cfg.env, seed=0)
    env.reset(seed=0)
    env.action_space.seed(0)

    def block() -> int:
        for _ in range(100):
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            if term or trunc:
                env.reset()
        return 100

    return _rate(block, seconds, repeats)


class _DropSink:
    def add(self, batch: Any, priorities: np.ndarray) -> None:
        pass

    def flush(self) -> None:
        pass


def ale_ceiling(cfg: Any, seconds: float, repeats: int) -> float | None:
    from apexrl.envs.factory import uses_ale_vector

    if not uses_ale_vector(cfg.env):
        return None
    from apexrl.envs.atari_vector import make_ale_vector

    env = make_ale_vector(cfg.env, 1, threads=1)
    env.reset(seed=np.zeros(1, dtype=np.int64))
    rng = np.random.default_rng(0)
    n_actions = int(env.single_action_space.n)

    def block() -> int:
        for a in rng.integers(n_actions, size=100):
            env.step(np.array([a]))
        return 100

    try:
        return _rate(block, seconds, repeats)
    finally:
        env.close()


def actor_alone(cfg: Any, seconds: float, repeats: int) -> float:
    import torch

    from apexrl.runtime.assembly import assemble

    torch.set_num_threads(1)
    actor = assemble(cfg, num_actors=1).make_actor(0, _DropSink())
    steps = max(1, 256 // cfg.actors.envs_per_actor)
    return _rate(lambda: actor.run(steps)["env_steps"], seconds, repeats)


def learner_alone(cfg: Any, seconds: float, repeats: int) -> float:
    import torch

    from apexrl.runtime.assembly import assemble

    torch.set_num_threads(1)
    system = assemble(cfg, num_actors=1)
    learner = system.make_learner()
    obs, act = system.observation_space, system.action_space
    B, rng = cfg.learner.batch_size, np.random.default_rng(0)

    def observations() -> np.ndarray:
        if obs.dtype == np.uint8:
            return rng.integers(0, int(obs.high.max()) + 1, size=(B, *obs.shape), dtype=np.uint8)
        return rng.normal(size=(B, *obs.shape)).astype(obs.dtype)

    action = (rng.integers(act.n, size=B) if hasattr(act, "n")
              else rng.uniform(act.low, act.high, size=(B, *act.shape)).astype(act.dtype))
    batch = {"obs": observations(), "next_obs": observations(), "action": action,
             "reward": rng.normal(size=B).astype(np.float32), "discount": np.full(B, 0.97, np.float32)}
    w = np.ones(B, np.float32)
    learner.update(batch, w)

    def block() -> int:
        for _ in range(5):
            learner.update(batch, w)
        return 5

    return _rate(block, seconds, repeats)


def in_a_run(cfg: Any, seconds: float) -> tuple[float, float]:
    """(env steps/s of the one actor, learner updates/s) of a free-running ``train()`` run, medians over
    the reports after learning started."""
    from apexrl.runtime.driver import train

    warm = max(1000, cfg.learner.batch_size * 4)
    run_cfg = cfg.replace(**{"actors.num_actors": 1, "replay.samples_per_insert": None,
                             "replay.learning_starts": warm, "stop.max_time_s": seconds,
                             "evaluation.interval_s": 0, "logging.console": "off", "logging.tensorboard": False,
                             "logging.report_interval_s": max(1.0, seconds / 12), "checkpoint.every_reports": 0})
    with tempfile.TemporaryDirectory() as tmp:
        train(run_cfg, run_dir=os.path.join(tmp, "run"))
        with open(os.path.join(tmp, "run", "metrics.jsonl")) as f:
            recs = [json.loads(line) for line in f if line.strip()]
    learning = [r for r in recs if r.get("learner_updates", 0) > 0 and r.get("updates_per_s")][1:]
    steps = statistics.median([r["env_steps_per_s"] for r in learning]) if learning else float("nan")
    updates = statistics.median([r["updates_per_s"] for r in learning]) if learning else float("nan")
    return steps, updates


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="apexrl bench limits", description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", default="CartPole-v1,MinAtar/Breakout-v1")
    p.add_argument("--seconds", type=float, default=5.0, help="seconds per timed block (alone figures)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--run-seconds", type=float, default=40.0, help="length of the real run per env")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    rows = []
    for env_id in [e.strip() for e in a.envs.split(",") if e.strip()]:
        cfg = preset_for(env_id, a.set)
        row: dict[str, Any] = {"env": env_id, "envs_per_actor": cfg.actors.envs_per_actor,
                               "batch_size": cfg.learner.batch_size}
        row["env_ceiling"] = env_ceiling(cfg, a.seconds, a.repeats)
        row["ale_ceiling"] = ale_ceiling(cfg, a.seconds, a.repeats)
        row["actor_alone"] = actor_alone(cfg, a.seconds, a.repeats)
        row["learner_alone"] = learner_alone(cfg, a.seconds, a.repeats)
        row["actor_in_run"], row["learner_in_run"] = in_a_run(cfg, a.run_seconds)
        rows.append(row)
        print(json.dumps(row), flush=True)
    hdr = (f"{'env':22} {'env ceiling':>12} {'ale ceiling':>12} {'actor alone':>12} {'in a run':>10} {'tax':>6} "
           f"{'run/ceiling':>12}   {'learner alone':>13} {'in a run':>9} {'tax':>6}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        ale = "-" if r["ale_ceiling"] is None else f"{r['ale_ceiling']:,.0f}"
        print(f"{r['env']:22} {r['env_ceiling']:12,.0f} {ale:>12} {r['actor_alone']:12,.0f} {r['actor_in_run']:10,.0f} "
              f"{r['actor_in_run'] / r['actor_alone']:6.2f} {r['actor_in_run'] / r['env_ceiling']:12.2f}   "
              f"{r['learner_alone']:13,.1f} {r['learner_in_run']:9,.1f} {r['learner_in_run'] / r['learner_alone']:6.2f}")
    print("env steps/s (actor: all its envs together, 1 process); learner updates/s (1 thread); tax = run / alone; "
          "run/ceiling = actor in a run / env ceiling")
    write_result("limits", {"seconds": a.seconds, "repeats": a.repeats, "run_seconds": a.run_seconds,
                            "overrides": a.set, "host": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()},
                            "rows": rows}, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
