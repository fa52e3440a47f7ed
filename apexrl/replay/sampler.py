"""Which items to read: proportional prioritized sampling over a FIFO window of insertion ids.

This is the "sampler" half of a replay buffer (storage x sampler, as in TorchRL); it knows
nothing about what is stored. Both :class:`~apexrl.replay.prioritized.PrioritizedReplay` and
:class:`~apexrl.replay.frame_replay.FramePrioritizedReplay` compose it with their own storage.

Ids, slots and staleness
------------------------
Every inserted item gets a global id from a monotonic int64 counter; it lives in ring slot
``id % capacity``. The live items are exactly the ids in ``[oldest_id, next_id)`` (FIFO), so an
id handed to the learner can be checked for staleness in O(1): if its slot has since been
overwritten (or evicted early) its id is ``< oldest_id`` and a late priority update for it is
dropped instead of being applied to the new occupant of the slot. (Ape-X's learner writes
priorities back asynchronously while actors keep inserting, so this happens routinely.)

Sampling (Schaul et al., 2016, proportional variant)
----------------------------------------------------
    P(i) = p_i^alpha / sum_k p_k^alpha,    p_i = |delta_i| + eps   (raw priority)
Stratified: the total mass is cut into B equal segments and one uniform is drawn in each, which
lowers the variance of the batch composition compared with B independent draws.

Importance weights, normalised so that max_j w_j = 1 over everything that can be sampled:
    w_i = (N P(i))^-beta / max_j (N P(j))^-beta = (p_i^alpha / min_j p_j^alpha)^-beta
The global minimum comes from the min tree maintained alongside the sum tree. Normalising by the
batch maximum instead (Dopamine) would save that tree, but it makes the effective learning rate
depend on which items happened to be drawn together; keeping the min costs ~1 us per 512-item
update in the numba kernel (measured, benchmarks/replay.py), so we keep Schaul's definition, as do
cpprb and TorchRL.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from apexrl.replay.sum_tree import Backend, make_sum_tree


def check_priorities(priorities: Any, n: int) -> np.ndarray:
    """Priorities as a float64 [n] array, or ValueError naming what is wrong."""
    p = np.asarray(priorities, dtype=np.float64)
    if p.shape != (n,):
        raise ValueError(f"priorities must have shape ({n},), got {p.shape}")
    if not np.isfinite(p).all():
        raise ValueError(f"priorities must be finite, got {p[~np.isfinite(p)][:5].tolist()}")
    if (p < 0.0).any():
        raise ValueError(f"priorities must be >= 0, got {p[p < 0.0][:5].tolist()}")
    return p


class PrioritizedSampler:
    """Priority bookkeeping for a ring of ``capacity`` slots: ids, sum/min tree, max priority, RNG."""

    def __init__(self, capacity: int, alpha: float = 0.6, seed: int | None = None,
                 backend: Backend = "auto") -> None:
        if int(capacity) < 1:
            raise ValueError(f"capacity must be an integer >= 1, got {capacity!r}")
        if not (np.isfinite(alpha) and alpha >= 0.0):
            raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
        self.capacity = int(capacity)
        self.alpha = float(alpha)
        self._tree = make_sum_tree(self.capacity, backend=backend)
        self._rng = np.random.default_rng(seed)
        self._oldest_id = 0  # first live id
        self._next_id = 0  # id the next insert gets == total ever inserted
        self._max_priority = 1.0  # raw priority given to items inserted without one

    # ----------------------------------------------------------------- state
    def __len__(self) -> int:
        return self._next_id - self._oldest_id

    @property
    def oldest_id(self) -> int:
        return self._oldest_id

    @property
    def next_id(self) -> int:
        return self._next_id

    @property
    def total_priority(self) -> float:
        """Sum of p^alpha over live items."""
        return self._tree.total

    @property
    def max_priority(self) -> float:
        """Largest raw priority seen so far (1.0 before any); new items default to it."""
        return self._max_priority

    def slots(self, ids: np.ndarray) -> np.ndarray:
        return ids % self.capacity

    def is_live(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        return (ids >= self._oldest_id) & (ids < self._next_id)

    # ----------------------------------------------------------------- writes
    def insert(self, n: int, priorities: np.ndarray | None = None) -> np.ndarray:
        """Assign ids to ``n`` new items (FIFO-evicting the oldest) and set their priorities.

        Returns the ``n`` ids. When ``n > capacity`` only the last ``capacity`` stay live; the
        first ids returned are already stale. ``priorities`` must be pre-validated (float64 [n]).
        """
        if priorities is not None:
            if n:
                self._max_priority = max(self._max_priority, float(priorities.max()))
            values = priorities if self.alpha == 1.0 else np.power(priorities, self.alpha)
        else:
            values = np.full(n, self._max_priority**self.alpha)
        first = self._next_id
        self._next_id += n
        # Evicted slots are exactly the ones the new ids overwrite, so their leaves are replaced
        # below rather than zeroed first.
        self._oldest_id = max(self._oldest_id, self._next_id - self.capacity)
        keep = min(n, self.capacity)
        values = values[n - keep :]
        start = (first + n - keep) % self.capacity
        head = min(keep, self.capacity - start)
        self._tree.set_range(start, values[:head])
        if head < keep:
            self._tree.set_range(0, values[head:])
        return np.arange(first, first + n, dtype=np.int64)

    def evict_before(self, new_oldest: int) -> None:
        """Drop live ids < ``new_oldest`` early (their leaves become 0); used by frame storage."""
        new_oldest = min(int(new_oldest), self._next_id)
        if new_oldest <= self._oldest_id:
            return
        dropped = np.arange(self._oldest_id, new_oldest, dtype=np.int64) % self.capacity
        self._tree.set(dropped, np.zeros(dropped.shape[0]))
        self._oldest_id = new_oldest

    def update(self, ids: Any, priorities: Any) -> int:
        """Set raw priorities of live ``ids``; stale ids are skipped. Returns how many applied.

        Duplicated ids in one call: the last priority wins (the tree applies them in order).
        Ids that were never issued (< 0 or >= next_id) are a caller bug: ValueError.
        """
        ids = np.asarray(ids)
        if ids.ndim != 1 or not (np.issubdtype(ids.dtype, np.integer) or ids.size == 0):
            raise ValueError(f"indices must be a 1-D integer array, got dtype {ids.dtype} shape {ids.shape}")
        ids = ids.astype(np.int64, copy=False)
        p = check_priorities(priorities, ids.shape[0])
        if ids.size and (ids.min() < 0 or ids.max() >= self._next_id):
            raise ValueError(f"indices must be ids returned by add/sample (0 <= id < {self._next_id}), "
                             f"got range [{ids.min()}, {ids.max()}]")
        live = ids >= self._oldest_id
        if not live.all():
            ids, p = ids[live], p[live]
        if ids.size == 0:
            return 0
        self._max_priority = max(self._max_priority, float(p.max()))
        self._tree.set(ids % self.capacity, p if self.alpha == 1.0 else np.power(p, self.alpha))
        return int(ids.size)

    # ----------------------------------------------------------------- sampling
    def sample(self, batch_size: int, beta: float, num_batches: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``batch_size`` live ids ∝ p^alpha (stratified); return ``(ids int64, weights float32)``.
        ``num_batches`` > 1: that many such batches, one after the other, in one search of the tree (the
        same ids as as many calls: the uniforms come from the RNG in the same order)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        if not (np.isfinite(beta) and beta >= 0.0):
            raise ValueError(f"beta must be a finite number >= 0, got {beta!r}")
        if self._next_id == self._oldest_id:
            raise ValueError("cannot sample from an empty replay buffer; add transitions first")
        total = self._tree.total
        if not total > 0.0:
            raise ValueError("cannot sample: every live item has priority 0")
        segment = total / batch_size
        strata = np.tile(np.arange(batch_size), num_batches) if num_batches > 1 else np.arange(batch_size)
        targets = (strata + self._rng.random(batch_size * num_batches)) * segment
        slots, values = self._tree.find_prefix(targets)
        ids = self._oldest_id + (slots - self._oldest_id) % self.capacity
        # w_i = (v_i / v_min)^-beta with v = p^alpha (module docstring), written as
        # (v_min / v_i)^beta: the ratio is <= 1, so it cannot overflow, only underflow to 0.
        weights = np.power(self._tree.min / values, beta).astype(np.float32)
        return ids, weights

    # ----------------------------------------------------------------- checkpoint
    def state_dict(self) -> dict[str, Any]:
        filled = min(self._next_id, self.capacity)
        return {
            "capacity": self.capacity,
            "alpha": self.alpha,
            "oldest_id": self._oldest_id,
            "next_id": self._next_id,
            "max_priority": self._max_priority,
            "leaves": self._tree.values()[:filled],  # p^alpha per slot; internal nodes are rebuilt
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["capacity"]) != self.capacity or float(state["alpha"]) != self.alpha:
            raise ValueError(f"state is for capacity={state['capacity']}, alpha={state['alpha']}; "
                             f"this sampler has capacity={self.capacity}, alpha={self.alpha}")
        leaves = np.zeros(self.capacity)
        leaves[: len(state["leaves"])] = state["leaves"]
        self._tree.set_all(leaves)
        self._oldest_id = int(state["oldest_id"])
        self._next_id = int(state["next_id"])
        self._max_priority = float(state["max_priority"])
        self._rng.bit_generator.state = state["rng"]


class SamplerViews:
    """What every sampler-backed replay shares: read-only views (``len``, capacity, counters, mass) and
    sampling as ``draw`` (which) + ``gather`` (what, defined by each replay)."""

    _sampler: PrioritizedSampler

    def __len__(self) -> int:
        return len(self._sampler)

    @property
    def capacity(self) -> int:
        return self._sampler.capacity

    @property
    def alpha(self) -> float:
        return self._sampler.alpha

    @property
    def total_added(self) -> int:
        """Transitions ever added (== the id the next one gets)."""
        return self._sampler.next_id

    @property
    def total_priority(self) -> float:
        """Sum of p^alpha over stored transitions."""
        return self._sampler.total_priority

    @property
    def max_priority(self) -> float:
        """Largest raw priority seen so far (1.0 initially); ``add`` without priorities uses it."""
        return self._sampler.max_priority

    def gather(self, ids: np.ndarray, reuse: bool = False) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def sample(self, batch_size: int, beta: float) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """Return ``(batch, indices, weights)``: a dict like the added ones with leading dim ``batch_size``
        (frame replay: ``obs`` / ``next_obs`` [B, K, ...] stacks), int64 indices for ``update_priorities``,
        float32 weights in (0, 1]."""
        ids, weights = self._sampler.sample(batch_size, beta)
        return self.gather(ids), ids, weights

    def draw(self, batch_size: int, beta: float, num_batches: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, weights)`` of ``num_batches`` independent batches, each stratified over the whole tree as
        by a separate ``sample``, end to end: the arrays come in one gather (see ``gather``)."""
        return self._sampler.sample(batch_size, beta, num_batches)
