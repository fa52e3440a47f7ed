"""One replay shard: a prioritized buffer plus the bookkeeping a distributed learner needs.

The learner picks a shard per batch with probability proportional to the shard's priority mass
(sum of p^alpha), which the shard reports with every sample; within the shard, sampling is
proportional to p^alpha, so P(i) over all shards is p_i^alpha / sum_all p^alpha as in a single buffer.
The combined ``update_and_sample`` call halves the learner's round trips, and ``num_batches`` > 1
amortizes one round trip (~1 ms of Ray overhead on each side) over several learner updates.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from apexrl.core import Batch
from apexrl.replay.rate_limiter import RateLimiter


class ReplayShard:
    def __init__(self, capacity: int, alpha: float = 0.6, seed: int | None = None, min_size: int = 1,
                 frames: bool = False, samples_per_insert: float | None = None,
                 error_buffer: float = 0.0, max_lead: float | None = None,
                 batch_size: int | None = None, reuse_batches: bool = False) -> None:
        """``reuse_batches``: answers are valid until the next ``sample`` only (a Ray shard, whose answers are
        copied out before the next request runs); in one process they are fresh arrays."""
        if frames:
            from apexrl.replay.frame_replay import FramePrioritizedReplay

            self.buffer: Any = FramePrioritizedReplay(capacity, alpha=alpha, seed=seed)
        else:
            from apexrl.replay import PrioritizedReplay

            self.buffer = PrioritizedReplay(capacity, alpha=alpha, seed=seed)
        self.reuse_batches = reuse_batches
        self.min_size = max(1, min_size)
        self.limiter = RateLimiter(samples_per_insert, self.min_size, error_buffer, max_lead, batch_size)
        self.throttled_samples = 0
        self.inserted = 0
        self.sampled = 0
        self.priority_updates = 0
        # Seconds this shard spent drawing/gathering batches and applying priorities: what `bench feed`
        # subtracts from the shard process's CPU to find Ray's share (serialization, task overhead).
        self.timing = {"sample_s": 0.0, "gather_s": 0.0, "update_s": 0.0}

    def add(self, batch: Batch, priorities: np.ndarray) -> bool:
        """Store a batch; return whether the sender may go on inserting (False: wait, see rate_limiter)."""
        self.buffer.add(batch, priorities)
        self.inserted += len(priorities)
        return self.insert_allowed()

    def insert_allowed(self) -> bool:
        return self.limiter.can_insert(len(self.buffer), self.inserted, self.sampled)

    def stop_rate_limiting(self) -> None:
        """At the end of a run: an actor waiting for the learner would otherwise wait for nobody."""
        self.limiter.ratio = None

    def sample(self, batch_size: int, beta: float, num_batches: int = 1) -> dict[str, Any]:
        """A batch with indices and IS weights plus shard stats; only the stats (no ``batch`` key) while
        the shard is warming up or the learner is ahead of the samples-per-insert ratio.

        With ``num_batches`` = k > 1, up to k independent batches (each drawn as by a separate call, so
        each is stratified over the whole tree) are stacked along the first axis: ``batch`` arrays have
        ``n * batch_size`` rows where ``n = result["num_batches"]`` <= k is what the rate limiter allows.
        """
        n = self.limiter.batches_allowed(len(self.buffer), self.inserted, self.sampled, batch_size,
                                         max(1, num_batches))
        if n == 0:
            if len(self.buffer) >= self.min_size:
                self.throttled_samples += 1
            return self.stats()
        t0 = time.perf_counter()
        indices, weights = self.buffer.draw(batch_size, beta, n)
        t1 = time.perf_counter()
        batch = self.buffer.gather(indices, reuse=self.reuse_batches)
        self.sampled += len(indices)
        self.timing["sample_s"] += t1 - t0
        self.timing["gather_s"] += time.perf_counter() - t1
        return {"batch": batch, "indices": indices, "weights": weights, "num_batches": n, **self.stats()}

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        t0 = time.perf_counter()
        self.buffer.update_priorities(indices, priorities)
        self.timing["update_s"] += time.perf_counter() - t0
        self.priority_updates += len(indices)

    def update_and_sample(self, indices: np.ndarray | None, priorities: np.ndarray | None, batch_size: int,
                          beta: float, num_batches: int = 1) -> dict[str, Any]:
        if indices is not None and priorities is not None:
            self.update_priorities(indices, priorities)
        return self.sample(batch_size, beta, num_batches)

    def stats(self) -> dict[str, Any]:
        return {
            "size": len(self.buffer),
            "mass": float(self.buffer.total_priority),
            "inserted": self.inserted,
            "sampled": self.sampled,
            "throttled": self.throttled_samples,
        }

    def state_dict(self) -> dict[str, Any]:
        return {"buffer": self.buffer.state_dict(), "inserted": self.inserted, "sampled": self.sampled,
                "priority_updates": self.priority_updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffer.load_state_dict(state["buffer"])
        self.inserted = int(state["inserted"])
        self.sampled = int(state["sampled"])
        self.priority_updates = int(state.get("priority_updates", 0))
