"""The replay shard as a Ray actor, in a module of its own so that its worker process imports numpy,
numba and Ray but not torch or gymnasium (~2-3 s of CPU less per shard at start-up on a small host).

``apexrl.runtime.workers`` re-exports :class:`ReplayShardWorker`.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import numpy as np
import ray

from apexrl.replay.shard import ReplayShard
from apexrl.runtime.ray_worker import LIGHT


@ray.remote(num_cpus=0, **LIGHT)
class ReplayShardWorker:
    def __init__(self, capacity: int, alpha: float, seed: int, min_size: int, frames: bool = False,
                 samples_per_insert: float | None = None, error_buffer: float = 0.0,
                 max_lead: float | None = None, batch_size: int | None = None) -> None:
        logging.basicConfig(level=os.environ.get("APEXRL_LOG_LEVEL", "WARNING"))
        self.shard = ReplayShard(capacity, alpha=alpha, seed=seed, min_size=min_size, frames=frames,
                                 samples_per_insert=samples_per_insert, error_buffer=error_buffer,
                                 max_lead=max_lead, batch_size=batch_size, reuse_batches=True)

    def add(self, batch: dict[str, np.ndarray], priorities: np.ndarray) -> bool:
        return self.shard.add(batch, priorities)

    def insert_allowed(self) -> bool:
        return self.shard.insert_allowed()

    def stop_rate_limiting(self) -> None:
        self.shard.stop_rate_limiting()

    def update_and_sample(self, indices: np.ndarray | None, priorities: np.ndarray | None, batch_size: int,
                          beta: float, num_batches: int = 1) -> dict[str, Any]:
        return self.shard.update_and_sample(indices, priorities, batch_size, beta, num_batches)

    def profile(self) -> dict[str, float]:
        """This process's CPU seconds so far and the shard's own timing (``bench feed`` takes differences)."""
        return {"cpu_s": time.process_time(), **self.shard.timing}

    def stats(self) -> dict[str, Any]:
        return self.shard.stats()

    def state_dict(self) -> dict[str, Any]:
        return self.shard.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.shard.load_state_dict(state)
