"""Sum and min over a fixed number of non-negative leaves, with prefix search: prioritized replay's index.

Prioritized replay (Schaul et al., 2016) samples item ``i`` with probability ``v_i / sum_j v_j`` and
needs ``min_j v_j`` to normalise importance weights. The default here is numpy only, in two levels:

    leaves in blocks of B (16-64, by capacity); per block its sum and its smallest positive leaf.

A prefix search is one cumulative sum over the block sums, a ``searchsorted``, and one cumulative sum
over each target's block; an update rewrites the leaves and recomputes their blocks from them. Every
step is a vectorized call over all targets at once, so the cost per item falls with the number of items
per call (the learner asks for ~512 per shard request): 236 us per 512 sampled and 512 updated among
100k leaves on the 2-core laptop, against 94 us for the numba binary tree (``sum_tree_numba.py``,
``backend="numba"``) and 700 us for a binary tree in numpy (benchmarks/replay.py). numba and LLVM cost
the replay process ~80 MB, which is why they are no longer the default.

Invariants (hold after every public call):
  * a block's sum is recomputed from its leaves, never incremented by a delta, so float64 rounding
    cannot accumulate into drift however many updates happen; the total is the sum of the block sums.
  * the min counts positive leaves only (+inf when none is): zero-valued leaves are never sampled, so
    they must not drag every importance weight to zero.
  * leaves at positions >= capacity (padding to whole blocks) stay 0.
"""

from __future__ import annotations

import importlib.util
from typing import Literal

import numpy as np

Backend = Literal["auto", "numba", "numpy"]
HAVE_NUMBA = importlib.util.find_spec("numba") is not None  # found, not imported: only its tree imports it


def make_sum_tree(capacity: int, backend: Backend = "auto") -> CheckedTree:
    """The tree for ``capacity`` leaves: numpy blocks ("auto", "numpy") or the numba binary tree."""
    if backend not in ("auto", "numba", "numpy"):
        raise ValueError(f"backend must be 'auto', 'numba' or 'numpy', got {backend!r}")
    if backend == "numba":
        if not HAVE_NUMBA:
            raise ValueError("backend='numba' requested but numba is not installed")
        from apexrl.replay.sum_tree_numba import NumbaSumTree

        return NumbaSumTree(capacity)
    return SumTree(capacity)


class CheckedTree:
    """What both trees share: the argument checks and copies before their own ``_find``, ``_set``,
    ``_set_range`` and ``_set_all``, which may assume them (the numba kernels check nothing)."""

    backend = "?"

    def __init__(self, capacity: int) -> None:
        if int(capacity) < 1:
            raise ValueError(f"SumTree capacity must be >= 1, got {capacity!r}")
        self.capacity = int(capacity)

    @property
    def total(self) -> float:
        """Sum of all leaves."""
        raise NotImplementedError

    @property
    def min(self) -> float:
        """Smallest strictly positive leaf (+inf when no leaf is positive)."""
        raise NotImplementedError

    def get(self, indices: np.ndarray) -> np.ndarray:
        """Leaf values at ``indices`` (float64 copy)."""
        raise NotImplementedError

    def values(self) -> np.ndarray:
        """All ``capacity`` leaf values (float64 copy)."""
        raise NotImplementedError

    def find_prefix(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each target t in [0, total): the leaf i with cumsum[i-1] <= t < cumsum[i].

        Returns ``(indices int64, leaf values float64)``. Zero-valued leaves are never returned
        while total > 0; a target >= total (rounding) lands on the last positive leaf.
        """
        if not self.total > 0.0:
            raise ValueError("find_prefix on a tree whose total is 0: nothing can be sampled")
        return self._find(np.array(targets, dtype=np.float64))  # a copy, which ``_find`` may change

    def set(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Set leaves ``indices`` to ``values``; for duplicated indices the last value wins.

        Callers validate values (finite, >= 0) and indices (in [0, capacity)); this is the hot
        path and re-checking here would double the cost.
        """
        indices = np.ascontiguousarray(indices, dtype=np.int64)
        values = np.ascontiguousarray(values, dtype=np.float64)
        if indices.shape != values.shape or indices.ndim != 1:
            raise ValueError(f"indices {indices.shape} and values {values.shape} must be equal 1-D shapes")
        if indices.size:
            self._set(indices, values)

    def set_range(self, start: int, values: np.ndarray) -> None:
        """Set contiguous leaves ``[start, start + len(values))`` (no wraparound); the add path."""
        values = np.ascontiguousarray(values, dtype=np.float64)
        if start < 0 or start + values.shape[0] > self.capacity:
            raise ValueError(f"range [{start}, {start + values.shape[0]}) outside [0, {self.capacity})")
        if values.shape[0]:
            self._set_range(int(start), values)

    def set_all(self, values: np.ndarray) -> None:
        """Replace every leaf (len == capacity) and recompute everything above them."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (self.capacity,):
            raise ValueError(f"set_all needs shape ({self.capacity},), got {values.shape}")
        self._set_all(values)

    def _find(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _set(self, indices: np.ndarray, values: np.ndarray) -> None:
        raise NotImplementedError

    def _set_range(self, start: int, values: np.ndarray) -> None:
        raise NotImplementedError

    def _set_all(self, values: np.ndarray) -> None:
        raise NotImplementedError


class SumTree(CheckedTree):
    """The numpy block tree (module docstring).

    >>> t = SumTree(4); t.set(np.array([0, 1, 2]), np.array([1.0, 2.0, 3.0]))
    >>> t.total, t.min, t.find_prefix(np.array([0.5, 1.0, 5.9]))[0].tolist()
    (6.0, 1.0, [0, 1, 2])
    """

    backend = "numpy"

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        # Measured (2-core laptop, 64 and 512 items per call): 16 is best to ~250k leaves, 32 to ~1.5M.
        self._block = 16 if self.capacity <= 250_000 else 32 if self.capacity <= 1_500_000 else 64
        self._shift = self._block.bit_length() - 1
        blocks = -(-self.capacity // self._block)
        self._leaves = np.zeros(blocks * self._block)
        self._rows = self._leaves.reshape(blocks, self._block)  # a view: writes to leaves show here
        self._sums = np.zeros(blocks)
        self._mins = np.full(blocks, np.inf)
        self._total, self._min = 0.0, np.inf

    @property
    def total(self) -> float:
        return self._total

    @property
    def min(self) -> float:
        return self._min

    def get(self, indices: np.ndarray) -> np.ndarray:
        return self._leaves[np.asarray(indices, dtype=np.int64)]

    def values(self) -> np.ndarray:
        return self._leaves[: self.capacity].copy()

    def _find(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cs = np.cumsum(self._sums)
        block = np.searchsorted(cs, t, side="right")
        # side="right" skips blocks without mass (their cumsum does not rise) unless t >= total (rounding).
        if block.size and block.max() >= cs.shape[0]:
            block = np.minimum(block, np.flatnonzero(self._sums)[-1])
        t -= cs.take(block) - self._sums.take(block)
        rows = self._rows[block]
        j = np.count_nonzero(np.cumsum(rows, axis=1) <= t[:, None], axis=1)
        np.minimum(j, self._block - 1, out=j)
        at = np.arange(t.shape[0]) * self._block
        picked = rows.ravel().take(at + j)
        if not picked.all():  # t at or past its block's sum (rounding): the block's last positive leaf
            bad = picked == 0.0
            j[bad] = self._block - 1 - np.argmax(rows[bad, ::-1] > 0.0, axis=1)
            picked = rows.ravel().take(at + j)
        return block * self._block + j, picked

    def _set(self, indices: np.ndarray, values: np.ndarray) -> None:
        # Last occurrence of each index: np.unique on the reversed array returns first hits (sorted).
        uniq, first_in_reversed = np.unique(indices[::-1], return_index=True)
        self._leaves[uniq] = values[::-1][first_in_reversed]
        blocks = uniq >> self._shift
        blocks = blocks[np.r_[True, blocks[1:] != blocks[:-1]]]
        self._refresh(blocks, self._rows[blocks])

    def _set_range(self, start: int, values: np.ndarray) -> None:
        self._leaves[start : start + values.shape[0]] = values
        lo, hi = start >> self._shift, ((start + values.shape[0] - 1) >> self._shift) + 1
        self._refresh(slice(lo, hi), self._rows[lo:hi])

    def _set_all(self, values: np.ndarray) -> None:
        self._leaves[:] = 0.0
        self._leaves[: self.capacity] = values
        self._refresh(slice(None), self._rows)

    def _refresh(self, blocks: np.ndarray | slice, rows: np.ndarray) -> None:
        self._sums[blocks] = rows.sum(axis=1)
        self._mins[blocks] = np.where(rows > 0.0, rows, np.inf).min(axis=1)
        self._total = float(self._sums.sum())
        self._min = float(self._mins.min())
