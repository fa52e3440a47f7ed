"""Sum tree (with a companion min tree) over a fixed number of non-negative leaves.

Prioritized replay (Schaul et al., 2016) samples item ``i`` with probability ``v_i / sum_j v_j``
and needs ``min_j v_j`` to normalise importance weights. Both are O(log N) per update and per
query with a complete binary tree stored in one flat array (heap layout):

    node 1 is the root; node n has children 2n and 2n+1; leaf i lives at node ``L + i``,
    where L = smallest power of two >= capacity.

Invariants (hold after every public call):
  * ``sums[n] == sums[2n] + sums[2n+1]`` exactly for every internal node n. Parents are always
    *recomputed from their children*, never incremented by a delta, so float64 rounding cannot
    accumulate into drift however many updates happen.
  * ``mins[n] == min(mins[2n], mins[2n+1])``; a leaf's min entry is its value if > 0, else +inf.
    Zero-valued leaves are never sampled, so they must not drag the minimum (and hence every
    importance weight) to zero.
  * Leaves at positions >= capacity (padding up to L) stay 0 in ``sums`` and +inf in ``mins``.

Two interchangeable backends: numba kernels (default when numba imports; ~15x faster for a
512-item update or query, see benchmarks/replay.py) and a numpy version vectorized per tree
level, which is also the executable reference the tests compare the kernels against.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

try:  # numba is optional: the numpy backend is always available.
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is absent
    HAVE_NUMBA = False

Backend = Literal["auto", "numba", "numpy"]


# --------------------------------------------------------------------------- numba kernels
if HAVE_NUMBA:

    @numba.njit(cache=True, nogil=True)
    def _nb_set(sums, mins, leaf_base, indices, values):  # pragma: no cover - compiled
        # Sequential in input order, so for duplicated indices the last value wins, and every
        # ancestor is recomputed after its leaf changed.
        for k in range(indices.shape[0]):
            n = indices[k] + leaf_base
            v = values[k]
            sums[n] = v
            mins[n] = v if v > 0.0 else np.inf
            n >>= 1
            while n >= 1:
                sums[n] = sums[2 * n] + sums[2 * n + 1]
                mins[n] = min(mins[2 * n], mins[2 * n + 1])
                n >>= 1

    @numba.njit(cache=True, nogil=True)
    def _nb_set_range(sums, mins, leaf_base, start, values):  # pragma: no cover - compiled
        # Contiguous leaves [start, start+len): recompute each level's covered range once
        # (~2·len + log L node updates instead of len·log L).
        lo = start + leaf_base
        hi = lo + values.shape[0] - 1
        for k in range(values.shape[0]):
            v = values[k]
            sums[lo + k] = v
            mins[lo + k] = v if v > 0.0 else np.inf
        lo >>= 1
        hi >>= 1
        while lo >= 1:
            for n in range(lo, hi + 1):
                sums[n] = sums[2 * n] + sums[2 * n + 1]
                mins[n] = min(mins[2 * n], mins[2 * n + 1])
            lo >>= 1
            hi >>= 1

    @numba.njit(cache=True, nogil=True)
    def _nb_find(sums, leaf_base, targets, out_index, out_value):  # pragma: no cover - compiled
        for k in range(targets.shape[0]):
            t = targets[k]
            n = 1
            while n < leaf_base:
                left = sums[2 * n]
                # Go right past the left mass, unless rounding pushed t beyond a right subtree
                # that holds nothing: then the left one must hold all of this node's mass.
                if t >= left and sums[2 * n + 1] > 0.0:
                    t -= left
                    n = 2 * n + 1
                else:
                    n = 2 * n
            out_index[k] = n - leaf_base
            out_value[k] = sums[n]


# --------------------------------------------------------------------------- tree
class SumTree:
    """Fixed-size array of non-negative float64 values with O(log N) total, min and prefix search.

    >>> t = SumTree(4); t.set(np.array([0, 1, 2]), np.array([1.0, 2.0, 3.0]))
    >>> t.total, t.min, t.find_prefix(np.array([0.5, 1.0, 5.9]))[0].tolist()
    (6.0, 1.0, [0, 1, 2])
    """

    def __init__(self, capacity: int, backend: Backend = "auto") -> None:
        if int(capacity) < 1:
            raise ValueError(f"SumTree capacity must be >= 1, got {capacity!r}")
        if backend == "auto":
            backend = "numba" if HAVE_NUMBA else "numpy"
        if backend not in ("numba", "numpy"):
            raise ValueError(f"backend must be 'auto', 'numba' or 'numpy', got {backend!r}")
        if backend == "numba" and not HAVE_NUMBA:
            raise ValueError("backend='numba' requested but numba is not importable")
        self.capacity = int(capacity)
        self.backend: str = backend
        self._leaf_base = 1 << max(0, (self.capacity - 1).bit_length())  # L, a power of two >= capacity
        self._depth = self._leaf_base.bit_length() - 1  # levels between root and leaves
        self._sums = np.zeros(2 * self._leaf_base, dtype=np.float64)
        self._mins = np.full(2 * self._leaf_base, np.inf, dtype=np.float64)

    # ----------------------------------------------------------------- queries
    @property
    def total(self) -> float:
        """Sum of all leaves."""
        return float(self._sums[1])

    @property
    def min(self) -> float:
        """Smallest strictly positive leaf (+inf when no leaf is positive)."""
        return float(self._mins[1])

    def get(self, indices: np.ndarray) -> np.ndarray:
        """Leaf values at ``indices`` (float64 copy)."""
        return self._sums[self._leaf_base + np.asarray(indices, dtype=np.int64)]

    def values(self) -> np.ndarray:
        """All ``capacity`` leaf values (float64 copy)."""
        return self._sums[self._leaf_base : self._leaf_base + self.capacity].copy()

    def find_prefix(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each target t in [0, total): the leaf i with cumsum[i-1] <= t < cumsum[i].

        Returns ``(indices int64, leaf values float64)``. Zero-valued leaves are never returned
        while total > 0; a target >= total (rounding) lands on the last positive leaf.
        """
        targets = np.ascontiguousarray(targets, dtype=np.float64)
        if not self._sums[1] > 0.0:
            raise ValueError("find_prefix on a tree whose total is 0: nothing can be sampled")
        if self.backend == "numba":
            idx = np.empty(targets.shape[0], dtype=np.int64)
            val = np.empty(targets.shape[0], dtype=np.float64)
            _nb_find(self._sums, self._leaf_base, targets, idx, val)
            return idx, val
        node = np.ones(targets.shape[0], dtype=np.int64)
        t = targets.copy()
        for _ in range(self._depth):
            left = self._sums[2 * node]
            go_right = (t >= left) & (self._sums[2 * node + 1] > 0.0)
            t -= np.where(go_right, left, 0.0)
            node = 2 * node + go_right
        return node - self._leaf_base, self._sums[node]

    # ----------------------------------------------------------------- updates
    def set(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Set leaves ``indices`` to ``values``; for duplicated indices the last value wins.

        Callers validate values (finite, >= 0) and indices (in [0, capacity)); this is the hot
        path and re-checking here would double the cost.
        """
        indices = np.ascontiguousarray(indices, dtype=np.int64)
        values = np.ascontiguousarray(values, dtype=np.float64)
        if indices.shape != values.shape or indices.ndim != 1:
            raise ValueError(f"indices {indices.shape} and values {values.shape} must be equal 1-D shapes")
        if indices.size == 0:
            return
        if self.backend == "numba":
            _nb_set(self._sums, self._mins, self._leaf_base, indices, values)
            return
        # Last occurrence of each index: np.unique on the reversed array returns first hits.
        uniq, first_in_reversed = np.unique(indices[::-1], return_index=True)
        node = uniq + self._leaf_base
        vals = values[::-1][first_in_reversed]
        self._sums[node] = vals
        self._mins[node] = np.where(vals > 0.0, vals, np.inf)
        for _ in range(self._depth):
            node = np.unique(node >> 1)
            self._sums[node] = self._sums[2 * node] + self._sums[2 * node + 1]
            self._mins[node] = np.minimum(self._mins[2 * node], self._mins[2 * node + 1])

    def set_range(self, start: int, values: np.ndarray) -> None:
        """Set contiguous leaves ``[start, start + len(values))`` (no wraparound); the add path."""
        values = np.ascontiguousarray(values, dtype=np.float64)
        if start < 0 or start + values.shape[0] > self.capacity:
            raise ValueError(f"range [{start}, {start + values.shape[0]}) outside [0, {self.capacity})")
        if values.shape[0] == 0:
            return
        if self.backend == "numba":
            _nb_set_range(self._sums, self._mins, self._leaf_base, int(start), values)
            return
        lo, hi = start + self._leaf_base, start + self._leaf_base + values.shape[0]  # half-open
        self._sums[lo:hi] = values
        self._mins[lo:hi] = np.where(values > 0.0, values, np.inf)
        self._rebuild_levels(lo >> 1, (hi - 1) >> 1)

    def set_all(self, values: np.ndarray) -> None:
        """Replace every leaf (len == capacity) and rebuild all internal nodes bottom-up."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (self.capacity,):
            raise ValueError(f"set_all needs shape ({self.capacity},), got {values.shape}")
        L = self._leaf_base
        self._sums[L:] = 0.0
        self._mins[L:] = np.inf
        self._sums[L : L + self.capacity] = values
        self._mins[L : L + self.capacity] = np.where(values > 0.0, values, np.inf)
        self._rebuild_levels(L >> 1, (2 * L - 1) >> 1)

    def _rebuild_levels(self, lo: int, hi: int) -> None:
        """Recompute internal nodes [lo, hi] and the matching ranges on every level above."""
        while lo >= 1:
            left, right = slice(2 * lo, 2 * hi + 2, 2), slice(2 * lo + 1, 2 * hi + 2, 2)
            self._sums[lo : hi + 1] = self._sums[left] + self._sums[right]
            self._mins[lo : hi + 1] = np.minimum(self._mins[left], self._mins[right])
            lo >>= 1
            hi >>= 1
