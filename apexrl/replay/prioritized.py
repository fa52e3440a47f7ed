"""Prioritized experience replay = ArrayStorage (what) x PrioritizedSampler (which).

Used by every Ape-X replay shard (Horgan et al., 2018): actors ``add`` batches of n-step
transitions with the priorities they computed locally; the learner ``sample``s batches of 512,
trains with the importance weights and writes new priorities back with ``update_priorities``
using the indices it was given, possibly after actors have overwritten some of those slots
(such stale indices are detected and skipped, see :mod:`apexrl.replay.sampler`).

    >>> buf = PrioritizedReplay(capacity=1000, alpha=0.6, seed=0)
    >>> ids = buf.add({"obs": np.zeros((8, 4), np.float32), "action": np.zeros(8, np.int64)},
    ...               priorities=np.full(8, 0.5))
    >>> batch, indices, weights = buf.sample(4, beta=0.4)
    >>> buf.update_priorities(indices, np.full(4, 2.0))
    4
    >>> len(buf), batch["obs"].shape, weights.dtype
    (8, (4, 4), dtype('float32'))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from apexrl.replay.sampler import PrioritizedSampler, SamplerViews, check_priorities
from apexrl.replay.storage import ArrayStorage
from apexrl.replay.sum_tree import Backend


class PrioritizedReplay(SamplerViews):
    """FIFO ring of transitions sampled ∝ priority^alpha, with importance weights.

    Args:
        capacity: transitions kept; the oldest are overwritten first.
        alpha: prioritization exponent (0 = uniform, 1 = fully proportional).
        seed: seed of the sampling RNG (its state is part of ``state_dict``).
        backend: sum-tree backend, "auto" or "numpy" (numpy blocks), or "numba" (a compiled binary tree).
    """

    def __init__(self, capacity: int, alpha: float = 0.6, seed: int | None = None,
                 backend: Backend = "auto") -> None:
        self._sampler = PrioritizedSampler(capacity, alpha, seed, backend=backend)
        self._storage = ArrayStorage(capacity)

    # ----------------------------------------------------------------- introspection
    @property
    def nbytes(self) -> int:
        """Bytes of preallocated transition storage (excluding the trees)."""
        return self._storage.nbytes

    # ----------------------------------------------------------------- API
    def add(self, batch: Mapping[str, Any], priorities: np.ndarray | None = None) -> np.ndarray:
        """Store B transitions (every array has leading dim B); return their B int64 indices.

        ``priorities`` are raw (|TD error| + eps), shape [B]; None gives each transition the
        largest priority seen so far, so new data is sampled at least once soon (Schaul et al.).
        """
        arrays, n = self._storage.validate(batch)
        p = None if priorities is None else check_priorities(priorities, n)
        start = self._sampler.next_id % self.capacity
        ids = self._sampler.insert(n, p)
        self._storage.write(start, arrays, n)
        return ids

    def gather(self, ids: np.ndarray, reuse: bool = False) -> dict[str, np.ndarray]:
        """The stored arrays of ``ids`` (from ``draw``), fresh (``reuse`` matters only for frame replay)."""
        return self._storage.read(ids % self.capacity)

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> int:
        """Set new raw priorities; indices whose slot was overwritten since sampling are ignored.

        Duplicated indices in one call: the last priority wins. Returns how many were applied.
        """
        return self._sampler.update(indices, priorities)

    # ----------------------------------------------------------------- checkpoint
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit-exactly: contents, priorities, counters, RNG state."""
        filled = min(self.total_added, self.capacity)
        return {"sampler": self._sampler.state_dict(), "storage": self._storage.state_dict(filled)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._sampler.load_state_dict(state["sampler"])
        self._storage.load_state_dict(state["storage"])
