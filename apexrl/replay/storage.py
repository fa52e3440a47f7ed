"""Where transitions live: one preallocated numpy ring array per key.

The "storage" half of a replay buffer. The schema (keys, per-item shapes and dtypes) is fixed
by the first write and every later batch must match it exactly: silently casting a float64
reward into a float32 column, or broadcasting a wrongly shaped observation, would corrupt
training data without an error, so mismatches raise ValueError instead.

Writes are slice assignments (at most two, for the wraparound), reads are one fancy-index
gather per key; no per-item Python loop anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def batch_size_of(batch: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], int]:
    """Arrays of ``batch`` and their common leading dimension B, or ValueError."""
    if not isinstance(batch, Mapping) or not batch:
        raise ValueError(f"batch must be a non-empty dict of arrays, got {type(batch).__name__}")
    arrays = {k: np.asarray(v) for k, v in batch.items()}
    sizes = {k: (a.shape[0] if a.ndim else None) for k, a in arrays.items()}
    if None in sizes.values() or len(set(sizes.values())) != 1:
        raise ValueError(f"every array needs the same leading batch dimension B, got "
                         f"{ {k: a.shape for k, a in arrays.items()} }")
    return arrays, next(iter(sizes.values()))


class ArrayStorage:
    """``capacity`` slots of a fixed schema of named arrays; allocated on the first write."""

    def __init__(self, capacity: int) -> None:
        if int(capacity) < 1:
            raise ValueError(f"capacity must be an integer >= 1, got {capacity!r}")
        self.capacity = int(capacity)
        self._arrays: dict[str, np.ndarray] = {}
        self._schema: dict[str, tuple[tuple[int, ...], np.dtype]] = {}

    @property
    def schema(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """``{key: (item shape, dtype)}``; empty before the first write."""
        return dict(self._schema)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._arrays.values())

    def validate(self, batch: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], int]:
        """Check ``batch`` against the schema (or adopt it when empty); return arrays and B."""
        arrays, n = batch_size_of(batch)
        if not self._schema:
            return arrays, n
        if arrays.keys() != self._schema.keys():
            raise ValueError(f"batch keys {sorted(arrays)} differ from the first add's {sorted(self._schema)}")
        for k, a in arrays.items():
            shape, dtype = self._schema[k]
            if a.shape[1:] != shape or a.dtype != dtype:
                raise ValueError(f"key {k!r}: got item shape {a.shape[1:]} dtype {a.dtype}, "
                                 f"expected {shape} {dtype} (as in the first add)")
        return arrays, n

    def _allocate(self, arrays: Mapping[str, np.ndarray]) -> None:
        for k, a in arrays.items():
            self._schema[k] = (a.shape[1:], a.dtype)
            # np.empty: pages are only committed when written, so an unfilled buffer costs no RSS.
            self._arrays[k] = np.empty((self.capacity, *a.shape[1:]), dtype=a.dtype)

    def write(self, start: int, arrays: Mapping[str, np.ndarray], n: int) -> None:
        """Write validated arrays of B=n items to slots start, start+1, ... (mod capacity).

        When n > capacity only the last ``capacity`` items are kept, ending at the same slot a
        full write would have ended at.
        """
        if not self._arrays:
            self._allocate(arrays)
        if n > self.capacity:
            start = (start + n - self.capacity) % self.capacity
            arrays = {k: a[n - self.capacity :] for k, a in arrays.items()}
            n = self.capacity
        head = min(n, self.capacity - start)
        for k, a in arrays.items():
            dst = self._arrays[k]
            dst[start : start + head] = a[:head]
            if head < n:
                dst[: n - head] = a[head:n]

    def read(self, slots: np.ndarray) -> dict[str, np.ndarray]:
        """Gather ``slots`` from every key (fresh arrays; the caller may modify them)."""
        return {k: a.take(slots, axis=0) for k, a in self._arrays.items()}

    def state_dict(self, filled: int) -> dict[str, Any]:
        """Copies of the first ``filled`` slots (the only ones ever written)."""
        return {k: a[:filled].copy() for k, a in self._arrays.items()}

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        self._arrays, self._schema = {}, {}
        if not state:
            return
        self._allocate(state)
        for k, a in state.items():
            if a.shape[0] > self.capacity:
                raise ValueError(f"state for key {k!r} has {a.shape[0]} slots > capacity {self.capacity}")
            self._arrays[k][: a.shape[0]] = a
