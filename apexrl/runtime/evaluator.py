"""Periodic greedy evaluation in a thread of the driver process.

The driver spends its time blocked in ``ray.wait``, so evaluating there costs no worker process: a
separate Ray evaluator imported torch (~2 s of CPU) just as the learner started updating, and on a
2-core host that time came out of the learner's core. An evaluation is one batched forward pass per
step for all episodes (~0.1 s for ten 500-step CartPole episodes), in numpy where the agent allows.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

import ray

from apexrl.evaluation import evaluate
from apexrl.runtime.assembly import System

log = logging.getLogger(__name__)


@contextmanager
def _one_thread() -> Iterator[None]:
    """One intra-op thread while evaluating: with torch's default of one per core, OpenMP workers spun
    after every small forward pass and took ~10 % of the learner's core on 2 cores (learner CPU share
    0.87 -> 0.96); numpy's OpenBLAS threads do the same for an MLP evaluated in numpy. Restored after, as
    the settings are process-wide (the driver may be a user's process)."""
    from threadpoolctl import threadpool_limits

    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    if torch is not None:
        torch.set_num_threads(1)
    try:
        with threadpool_limits(1, user_api="blas"):
            yield
    finally:
        if torch is not None:
            torch.set_num_threads(threads)


class DriverEvaluator:
    """Evaluates the newest published weights, in the caller's thread or on a background one."""

    def __init__(self, system: System, ps: Any) -> None:
        self.system, self.cfg, self.ps = system, system.cfg, ps
        self.net = system.make_acting_network(system.cfg.seed, role="eval")
        self.round = 0
        self.last_weights: tuple[int, dict[str, Any]] | None = None  # a copy the driver holds

    def submit(self) -> Future[dict[str, Any]]:
        """Start an evaluation on a daemon thread (a long Atari evaluation must not hold up the exit)."""
        fut: Future[dict[str, Any]] = Future()

        def run() -> None:
            try:
                with _one_thread():
                    res = self.evaluate()
            except BaseException as e:  # noqa: BLE001 - handed to the driver through the future
                fut.set_exception(e)
            else:
                fut.set_result(res)

        threading.Thread(target=run, name="apexrl-eval", daemon=True).start()
        return fut

    def evaluate(self) -> dict[str, Any]:
        got = ray.get(self.ps.get.remote(-1), timeout=60)
        if got is None:
            return {"eval_returns": [], "weights_version": -1}
        version, [ref] = got
        ev = self.cfg.evaluation
        self.round += 1
        seed = self.cfg.seed * 7 + 1_000_000 + self.round
        policy = self.system.make_eval_policy(self.net, ev.episodes, seed)
        weights = ray.get(ref, timeout=60)
        self.last_weights = (version, weights)
        policy.set_weights(weights)
        t0 = time.perf_counter()
        returns = evaluate(policy, self.cfg.env, ev.episodes, seed=seed)
        return {"eval_returns": returns, "weights_version": version, "eval_time_s": time.perf_counter() - t0,
                "weights": weights, "seed": seed, "episodes": ev.episodes}
