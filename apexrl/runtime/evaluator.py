"""Periodic greedy evaluation: in a thread of the driver process, or in a Ray worker of its own.

On a laptop the driver spends its time blocked in ``ray.wait``, so evaluating there costs no worker
process: a separate Ray evaluator imported torch (~2 s of CPU) just as the learner started updating, and
on a 2-core host that time came out of the learner's core. An evaluation is one batched forward pass per
step for all episodes (~0.1 s for ten 500-step CartPole episodes), in numpy where the agent allows. On a
cluster the driver's process is the control plane of every actor: evaluations go to a worker.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any

import ray
from ray.exceptions import RayActorError

from apexrl.evaluation import evaluate_system
from apexrl.runtime.assembly import System

log = logging.getLogger(__name__)
Again = tuple[int, Any, int]  # (weights version, weights, episodes): the same weights played again


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

    def submit(self, again: Again | None = None) -> Future[dict[str, Any]]:
        """Start an evaluation on a daemon thread (a long Atari evaluation must not hold up the exit)."""
        fut: Future[dict[str, Any]] = Future()

        def run() -> None:
            try:
                with _one_thread():
                    res = self.evaluate(again)
            except BaseException as e:  # noqa: BLE001 - handed to the driver through the future
                fut.set_exception(e)
            else:
                fut.set_result(res)

        threading.Thread(target=run, name="apexrl-eval", daemon=True).start()
        return fut

    def evaluate(self, again: Again | None = None) -> dict[str, Any]:
        """The newest published weights played for ``evaluation.episodes`` greedy episodes; ``again``:
        ``(version, weights, episodes)`` played instead, on episodes of their own (a confirmation)."""
        if again is None:
            got = ray.get(self.ps.get.remote(-1), timeout=60)
            if got is None:
                return {"eval_returns": [], "weights_version": -1}
            version, [ref] = got
            weights, episodes = ray.get(ref, timeout=60), self.cfg.evaluation.episodes
            self.last_weights = (version, weights)
        else:
            version, weights, episodes = again
        self.round += 1
        seed = self.cfg.seed * 7 + 1_000_000 + self.round
        t0 = time.perf_counter()
        res = evaluate_system(self.system, self.net, weights, episodes, seed)
        return {**res, "weights_version": version, "eval_time_s": time.perf_counter() - t0,
                "weights": weights, "seed": seed, "episodes": episodes}


@ray.remote(num_cpus=0)
class EvaluatorWorker:
    def __init__(self, system: System, ps: Any) -> None:
        self.evaluator = DriverEvaluator(system, ps)

    def evaluate(self, again: Again | None = None) -> dict[str, Any]:
        with _one_thread():
            return self.evaluator.evaluate(again)

    def last_weights(self) -> tuple[int, dict[str, Any]] | None:
        return self.evaluator.last_weights


class _RefFuture:
    """A Ray reference read as the driver reads a thread's future."""

    def __init__(self, ref: Any, on_lost: Callable[[], None] = lambda: None) -> None:
        self.ref, self.on_lost = ref, on_lost

    def done(self) -> bool:
        return bool(ray.wait([self.ref], timeout=0)[0])

    def result(self, timeout: float | None = None) -> dict[str, Any]:
        try:
            return ray.get(self.ref, timeout=timeout)
        except RayActorError:
            self.on_lost()
            raise


class WorkerEvaluator:
    """:class:`DriverEvaluator`'s interface, run by an :class:`EvaluatorWorker`. A worker that died (its
    node went) is replaced before the next evaluation; the one that failed is reported as failed."""

    def __init__(self, system: System, ps: Any) -> None:
        self.system, self.ps = system, ps
        self.worker = EvaluatorWorker.remote(system, ps)
        self.lost = False

    def _live_worker(self) -> Any:
        if self.lost:
            log.warning("evaluation worker lost; starting a new one")
            self.kill()
            self.worker, self.lost = EvaluatorWorker.remote(self.system, self.ps), False
        return self.worker

    def _on_lost(self) -> None:
        self.lost = True

    def submit(self, again: Again | None = None) -> _RefFuture:
        return _RefFuture(self._live_worker().evaluate.remote(again), self._on_lost)

    def evaluate(self) -> dict[str, Any]:
        return _RefFuture(self._live_worker().evaluate.remote(), self._on_lost).result(timeout=600)

    @property
    def last_weights(self) -> tuple[int, dict[str, Any]] | None:
        try:
            return ray.get(self.worker.last_weights.remote(), timeout=60)
        except Exception:  # noqa: BLE001 - a dead evaluator has no copy to offer
            return None

    def kill(self) -> None:
        try:
            ray.kill(self.worker)
        except Exception:  # noqa: BLE001 - already gone
            pass


def make_evaluator(system: System, ps: Any, on_cluster: bool) -> DriverEvaluator | WorkerEvaluator | None:
    """The run's evaluator (None: evaluation off); ``evaluation.where`` "auto" picks a worker on a cluster."""
    ev = system.cfg.evaluation
    if ev.interval_s <= 0:
        return None
    worker = ev.where == "worker" or (ev.where == "auto" and on_cluster)
    return WorkerEvaluator(system, ps) if worker else DriverEvaluator(system, ps)
