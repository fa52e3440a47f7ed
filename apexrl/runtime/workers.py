"""Thin Ray shells around the Ray-free roles: construction from the :class:`System`, torch threading,
and transport. What each role does lives in ``runtime/actor.py`` and ``runtime/learning.py``."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from apexrl.agents.base import Learner
from apexrl.runtime.assembly import System
from apexrl.runtime.transport import RayControl, RayReplaySink, RayWeightSource

log = logging.getLogger(__name__)
__all__ = ["ActorWorker", "LearnerWorker", "RayShards", "ReplayShardWorker"]  # noqa: F822 (lazy, see __getattr__)


def __getattr__(name: str) -> Any:
    # Re-exported lazily: the shard's module pulls in numba, which actor and learner processes never need.
    if name == "ReplayShardWorker":
        from apexrl.runtime.shard_worker import ReplayShardWorker

        return ReplayShardWorker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _quiet_worker() -> None:
    logging.basicConfig(level=os.environ.get("APEXRL_LOG_LEVEL", "WARNING"))


def _one_thread() -> None:
    """An actor computes on its one CPU: one torch thread where it loaded torch, and one BLAS thread for
    numpy (an MLP acting in numpy: OpenBLAS's threads, one per core, spun after each small product and took
    half the learner's core on 2 cores, 1,029 -> 497 updates/s)."""
    from threadpoolctl import threadpool_limits

    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    threadpool_limits(1, user_api="blas")  # for the life of this worker process


@ray.remote(concurrency_groups={"acting": 1, "control": 1})
class ActorWorker:
    """One actor for the life of the run: ``loop`` holds the "acting" thread from start to stop; ``pause``,
    ``resume``, ``stop`` and ``set_shards`` reach it from the one thread of the "control" group, in the
    order they were sent, while it acts; the default thread stays free for Ray's readiness ping."""

    def __init__(self, system: System, index: int, shards: list[Any], ps: Any, board: Any = None) -> None:
        from apexrl.runtime.actor_loop import ActorLoop
        from apexrl.runtime.board import push_period

        _quiet_worker()
        from apexrl.runtime.policy_set import actor_sink

        inflight = system.cfg.actors.max_inflight_sends
        self.sink = actor_sink(system, lambda group: RayReplaySink(group, inflight, start=index), shards)
        self.actor = system.make_actor(index, self.sink, RayWeightSource(ps))
        _one_thread()
        self._loop = None
        if board is not None:
            self._loop = ActorLoop(self.actor, RayControl(board, index),
                                   push_period(system.num_actors, system.cfg.logging.report_interval_s),
                                   stats=self._sink_stats, acknowledge=self.sink.acknowledge)

    def _sink_stats(self) -> dict[str, Any]:
        return {"dropped_sends": self.sink.dropped, "blocked_s": self.sink.blocked_s}

    @ray.method(concurrency_group="acting")
    def loop(self) -> str:
        """Act until ``stop`` or the budget is spent; the reason it ended."""
        return self._loop.run()

    @ray.method(concurrency_group="control")
    def pause(self, timeout_s: float = 60.0) -> bool:
        return self._loop.pause(timeout_s)

    @ray.method(concurrency_group="control")
    def resume(self) -> None:
        self._loop.resume()

    @ray.method(concurrency_group="control")
    def stop(self) -> None:
        self._loop.stop()

    def run(self, num_steps: int, global_env_steps: int | None = None) -> dict[str, Any]:
        """``num_steps`` vector steps, called from outside (benchmarks of the actor alone)."""
        stats = self.actor.run(num_steps, global_env_steps)
        stats.update(self._sink_stats())
        return stats

    @ray.method(concurrency_group="control")
    def set_shards(self, shards: list[Any]) -> None:
        self.sink.set_shards(shards)


class RayShards:
    """The replay client's transport to shard actors; a shard that does not answer within 30 s, or died,
    counts as failed (the driver replaces it)."""

    TIMEOUT_S = 30.0

    def __init__(self, shards: list[Any]) -> None:
        self.shards = list(shards)

    def request(self, s: int, indices: np.ndarray | None, priorities: np.ndarray | None, batch_size: int,
                beta: float, num_batches: int) -> Any:
        return self.shards[s].update_and_sample.remote(indices, priorities, batch_size, beta, num_batches)

    def result(self, handle: Any) -> dict[str, Any] | None:
        try:
            return ray.get(handle, timeout=self.TIMEOUT_S)
        except (GetTimeoutError, RayActorError, RayTaskError) as e:
            log.warning("a replay shard did not answer: %s", type(e).__name__)
            return None


@ray.remote
class LearnerWorker:
    """The learner loop with ``learner.prefetch`` sample requests always in flight, so an update never
    waits for a full round trip; weights are published to the parameter server by reference."""

    def __init__(self, system: System, shards: list[Any], ps: Any, threads: int = 1,
                 make_learner: Callable[[System], Learner] | None = None) -> None:
        """``make_learner``: another learner in the same loop (``bench feed``'s null learner); default the agent's."""
        import torch

        _quiet_worker()
        torch.set_num_threads(threads)
        self.ps = ps
        self.transport = RayShards(shards)
        learner = make_learner(system) if make_learner is not None else None
        self.loop = system.make_learner_loop(self.transport, self._publish, learner=learner)

    def _publish(self, version: int, weights: dict[str, np.ndarray]) -> None:
        self._weights_ref = ray.put(weights)  # held here: this process owns the newest weights' object
        self.ps.set.remote(version, [self._weights_ref])

    def train(self, duration_s: float, max_updates: int | None = None) -> dict[str, Any]:
        return self.loop.train(duration_s, max_updates)

    def publish(self) -> int:
        """Publish the current weights now and return once the parameter server holds them (the trainer
        holds still with exactly these)."""
        self.loop.publish()
        ray.get(self.ps.get.remote(self.loop.version - 1, 30.0), timeout=60)
        return self.loop.version

    def state_dict(self) -> dict[str, Any]:
        return self.loop.learner.state_dict()

    def checkpoint(self, header: dict[str, Any]) -> bytes:
        """A checkpoint file's bytes, composed here where torch is (the driver has none): this learner's
        state and the driver's ``header`` (counters, config) with the learner's own update count."""
        from apexrl import checkpoint as ckpt

        learner = self.loop.learner.state_dict()
        counters = {**header["counters"], "learner_updates": int(learner.get("updates", 0))}
        return ckpt.to_bytes({**header, "counters": counters, "learner": learner})

    def serialize(self, state: dict[str, Any]) -> bytes:
        """``state`` as a checkpoint file's bytes (``best.pt``: published weights and their evaluation)."""
        from apexrl import checkpoint as ckpt

        return ckpt.to_bytes(state)

    def set_weights(self, weights: dict[str, np.ndarray]) -> int:
        """Replace the network's weights (a trainer's ``set_weights``; several policies: every policy's, named
        ``<policy>/``) and publish them as a newer version than any before, so actors take them."""
        import torch

        learner = self.loop.learner
        state = learner.state_dict()
        state["net"] = {k: torch.as_tensor(np.array(v)) for k, v in weights.items()}
        learner.load_state_dict(state)
        self.loop.version += 1
        self._publish(self.loop.version, learner.weights())
        ray.get(self.ps.get.remote(self.loop.version - 1, 30.0), timeout=60)
        return self.loop.version

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take a checkpoint's state and return once the parameter server holds its weights: a restored
        trainer asked for its weights right away read the fresh network's under load (the publication was
        still on its way)."""
        self.loop.learner.load_state_dict(state)
        self.publish()

    def recover(self, state: dict[str, Any] | bytes | None, weights: dict[str, np.ndarray] | None,
                version: int) -> None:
        """Take over from a dead learner: optimizer, target network and counters from ``state`` (the last
        checkpoint's learner state, if any, or that checkpoint file's bytes), the network from the newest
        published ``weights``, and the update count from their ``version``, so that publications stay newer
        than what actors hold."""
        if isinstance(state, bytes):
            import io

            from apexrl import checkpoint as ckpt

            state = ckpt.safe_load(io.BytesIO(state))["learner"]
        learner = self.loop.learner
        merged = dict(state) if state is not None else learner.state_dict()
        if weights is not None:
            import torch

            merged["net"] = {k: torch.as_tensor(np.array(v)) for k, v in weights.items()}
        merged["updates"] = max(int(merged.get("updates", 0)), version)
        learner.load_state_dict(merged)
        self.loop.publish()

    def set_shards(self, shards: list[Any]) -> None:
        """Point at a new shard set (a dead shard was replaced)."""
        changed = [j for j, (old, new) in enumerate(zip(self.transport.shards, shards)) if old != new]
        self.transport.shards = list(shards)
        self.loop.client.replaced(changed)
