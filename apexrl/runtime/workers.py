"""Thin Ray shells around the Ray-free roles: construction, torch threading, and transport."""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import ray
import torch
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from apexrl.actor import Actor
from apexrl.config import Config
from apexrl.learner import Learner
from apexrl.runtime.transport import RayReplaySink, RayWeightSource

log = logging.getLogger(__name__)
__all__ = ["ActorWorker", "LearnerWorker", "ReplayShardWorker", "default_batches_per_request"]  # noqa: F822 (lazy, see __getattr__)
ModelFactory = Callable[[gym.Space, gym.Space], torch.nn.Module]


def __getattr__(name: str) -> Any:
    # Re-exported lazily: the shard's module pulls in numba, which actor and learner processes never need.
    if name == "ReplayShardWorker":
        from apexrl.runtime.shard_worker import ReplayShardWorker

        return ReplayShardWorker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _quiet_worker(threads: int = 1) -> None:
    torch.set_num_threads(threads)
    logging.basicConfig(level=os.environ.get("APEXRL_LOG_LEVEL", "WARNING"))


@ray.remote
class ActorWorker:
    def __init__(self, cfg: Config, index: int, num_actors: int, shards: list[Any], ps: Any,
                 model_factory: ModelFactory | None) -> None:
        _quiet_worker()
        self.sink = RayReplaySink(shards, cfg.actors.max_inflight_sends, start=index)
        self.actor = Actor(cfg, index, num_actors, self.sink, RayWeightSource(ps), model_factory)

    def run(self, num_steps: int) -> dict[str, Any]:
        stats = self.actor.run(num_steps)
        stats["dropped_sends"] = self.sink.dropped
        stats["blocked_s"] = self.sink.blocked_s
        return stats

    def set_shards(self, shards: list[Any]) -> None:
        self.sink.set_shards(shards)

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.actor.close()


def default_batches_per_request(cfg: Config) -> int:
    """Batches per learner -> shard round trip (see ``LearnerWorker``)."""
    k = cfg.learner.batches_per_request
    if k is None:
        k = min(8, max(1, 512 // cfg.learner.batch_size))
    return max(1, int(k))


@ray.remote
class LearnerWorker:
    """Runs the learner with ``prefetch`` sample requests always in flight, so an update never waits
    for a full round trip; new priorities ride along with the next request to the same shard.

    Each request asks for ``batches_per_request`` batches (config ``learner.batches_per_request`` when
    the config has it, else enough batches for ~512 transitions, at most 8): a Ray round trip costs
    ~1 ms of CPU on the learner and the shard, about as much as one CartPole update, so one trip per
    batch of 64 halved the learner's update rate (py-spy: 20% of learner time in ``.remote()``).
    """

    def __init__(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space, shards: list[Any],
                 ps: Any, model_factory: ModelFactory | None, threads: int = 1,
                 batches_per_request: int | None = None) -> None:
        _quiet_worker(threads)
        self.cfg = cfg
        self.learner = Learner(cfg, observation_space, action_space, model_factory)
        self.shards = list(shards)
        self.ps = ps
        self.rng = np.random.default_rng(cfg.seed + 17)
        self.mass = np.ones(len(shards))
        self.sizes = np.zeros(len(shards), dtype=np.int64)
        self.alive = np.ones(len(shards), dtype=bool)
        self.inserted = np.zeros(len(shards), dtype=np.int64)
        self.inflight: deque[tuple[int, Any]] = deque()
        self.pending: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in shards]
        self._weights_ref: Any = None
        self.version = 0
        self.batches_per_request = (max(1, batches_per_request) if batches_per_request
                                    else default_batches_per_request(cfg))
        self._last_end: float | None = None
        self.publish()

    def publish(self) -> None:
        self._weights_ref = ray.put(self.learner.weights())
        self.version = self.learner.updates
        self.ps.set.remote(self.version, [self._weights_ref])

    def _pick_shard(self) -> int:
        """A shard with probability proportional to its priority mass; a shard not heard from yet (new,
        or a replacement) is probed as if it had the average mass, a shard that failed is left out until
        the driver replaces it."""
        S = len(self.shards)
        if S == 1:
            return 0
        known = self.alive & (self.sizes > 0)
        fill = float(self.mass[known].mean()) if known.any() else 1.0
        mass = np.where(self.alive, np.where(self.sizes > 0, self.mass, fill), 0.0)
        if mass.sum() <= 0:
            return int(self.rng.integers(S))
        return int(self.rng.choice(S, p=mass / mass.sum()))

    def _request(self) -> None:
        s = self._pick_shard()
        idx = prio = None
        if self.pending[s]:
            idx = np.concatenate([p[0] for p in self.pending[s]])
            prio = np.concatenate([p[1] for p in self.pending[s]])
            self.pending[s] = []
        ref = self.shards[s].update_and_sample.remote(idx, prio, self.cfg.learner.batch_size, self.learner.beta(),
                                                      self.batches_per_request)
        self.inflight.append((s, ref))

    def train(self, duration_s: float, max_updates: int | None = None) -> dict[str, Any]:
        """Update for about ``duration_s`` seconds; return aggregated metrics for the driver's report."""
        lc = self.cfg.learner
        t0 = time.perf_counter()
        # Time since the last chunk ended: the learner sat waiting for the driver's next call.
        gap = 0.0 if self._last_end is None else t0 - self._last_end
        c0 = time.process_time()
        waited = 0.0
        sums: dict[str, float] = {}
        n = 0
        skipped = 0
        while time.perf_counter() - t0 < duration_s and (max_updates is None or n < max_updates):
            while len(self.inflight) < lc.prefetch:
                self._request()
            s, ref = self.inflight.popleft()
            tw = time.perf_counter()
            try:
                res = ray.get(ref, timeout=30.0)
            except (GetTimeoutError, RayActorError, RayTaskError) as e:
                log.warning("replay shard %d did not answer: %s", s, type(e).__name__)
                self.pending[s] = []
                res = None
            waited += time.perf_counter() - tw
            if res is None:
                self.sizes[s] = 0
                self.alive[s] = False
                time.sleep(0.01)
                waited += 0.01
                continue
            self.mass[s], self.sizes[s], self.inserted[s] = res["mass"], res["size"], res["inserted"]
            if "batch" not in res:  # warming up, or ahead of the samples-per-insert ratio
                tw = time.perf_counter()
                time.sleep(0.002)
                waited += time.perf_counter() - tw
                continue
            B = lc.batch_size
            for j in range(int(res.get("num_batches", 1))):
                rows = slice(j * B, (j + 1) * B)
                prios, m = self.learner.update({k: v[rows] for k, v in res["batch"].items()},
                                               res["weights"][rows])
                if prios is None:
                    skipped += 1
                    continue
                self.pending[s].append((res["indices"][rows], prios))
                n += 1
                for k, v in m.items():
                    sums[k] = sums.get(k, 0.0) + v
                if self.learner.updates % lc.publish_period == 0:
                    self.publish()
        elapsed = time.perf_counter() - t0
        out: dict[str, Any] = {k: v / n for k, v in sums.items()} if n else {}
        out["cpu_s"] = time.process_time() - c0  # this process's CPU: updates per CPU second survive a busy host
        out.update({
            "updates": n,
            "total_updates": self.learner.updates,
            "skipped_updates": self.learner.skipped_updates,
            "consecutive_skips": self.learner.consecutive_skips,
            "time_s": elapsed,
            "idle_s": waited,
            "gap_s": gap,
            "replay_size": int(self.sizes.sum()),
            "replay_inserted": int(self.inserted.sum()),
            "beta": self.learner.beta(),
            "weights_version": self.version,
        })
        self._last_end = time.perf_counter()
        return out

    def state_dict(self) -> dict[str, Any]:
        return self.learner.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state)
        self.publish()

    def set_shards(self, shards: list[Any]) -> None:
        """Point at a new shard set (a dead shard was replaced): priorities pending for a replaced shard
        refer to its old contents and are dropped."""
        for j, (old, new) in enumerate(zip(self.shards, shards)):
            if old != new:
                self.pending[j] = []
                self.sizes[j] = 0
                self.alive[j] = True
        self.shards = list(shards)
        self.inflight.clear()

    def pid(self) -> int:
        return os.getpid()
