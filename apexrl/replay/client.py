"""The learner's side of sharded replay: which shard to sample, requests kept in flight, priorities
written back. Ray-free: the transport to the shards is injected (in-process calls or Ray actor calls).

Shard choice: proportional to each shard's priority mass (sum of p^alpha, reported with every answer),
so that with sampling proportional to p^alpha within a shard, P(i) over all shards is the single-buffer
p_i^alpha / sum p^alpha. New priorities of a shard's batch ride along with the next request to that
shard (one round trip instead of two), and each request asks for ``batches_per_request`` batches: a
Ray round trip costs ~1 ms of CPU on each side, about one CartPole update.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Protocol

import numpy as np

from apexrl.config import Config

log = logging.getLogger(__name__)


class ShardTransport(Protocol):
    """How requests reach shard ``s``: ``request`` starts ``update_and_sample``; ``result`` waits for its
    answer and returns None when the shard failed (died, timed out)."""

    def request(self, s: int, indices: np.ndarray | None, priorities: np.ndarray | None, batch_size: int,
                beta: float, num_batches: int) -> Any: ...

    def result(self, handle: Any) -> dict[str, Any] | None: ...


class LocalShards:
    """In-process transport to :class:`~apexrl.replay.shard.ReplayShard` objects. A request runs when its
    answer is awaited: run eagerly, a prefetched request would answer from replay as it was before the
    actors' latest data, which in one process means a refusal for every request made during warm-up."""

    def __init__(self, shards: list[Any]) -> None:
        self.shards = shards

    def request(self, s: int, indices: np.ndarray | None, priorities: np.ndarray | None, batch_size: int,
                beta: float, num_batches: int) -> tuple[Any, ...]:
        return s, indices, priorities, batch_size, beta, num_batches

    def result(self, handle: tuple[Any, ...]) -> dict[str, Any] | None:
        s, *args = handle
        return self.shards[s].update_and_sample(*args)


def beta_at(cfg: Config, updates: int) -> float:
    """Importance-sampling exponent: fixed (Ape-X) or linearly annealed to ``replay.beta_final``."""
    r = cfg.replay
    if r.beta_final is None or r.beta_anneal_updates <= 0:
        return r.beta
    frac = min(1.0, updates / r.beta_anneal_updates)
    return r.beta + frac * (r.beta_final - r.beta)


def batches_per_request(cfg: Config) -> int:
    """``learner.batches_per_request``, or enough batches for ~512 transitions (at most 8)."""
    k = cfg.learner.batches_per_request
    if k is None:
        k = min(8, max(1, 512 // cfg.learner.batch_size))
    return max(1, int(k))


class ReplayClient:
    def __init__(self, transport: ShardTransport, num_shards: int, batch_size: int, prefetch: int,
                 batches_per_request: int, seed: int) -> None:
        self.transport = transport
        self.batch_size, self.prefetch, self.k = batch_size, prefetch, batches_per_request
        self.rng = np.random.default_rng(seed)
        self.mass = np.ones(num_shards)
        self.sizes = np.zeros(num_shards, dtype=np.int64)
        self.alive = np.ones(num_shards, dtype=bool)
        self.inserted = np.zeros(num_shards, dtype=np.int64)
        self.inflight: deque[tuple[int, Any]] = deque()
        self.pending: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(num_shards)]

    def pick_shard(self) -> int:
        """A shard with probability proportional to its priority mass; a shard not heard from yet (new,
        or a replacement) is probed as if it had the average mass, a shard that failed is left out until
        it is replaced."""
        S = len(self.mass)
        if S == 1:
            return 0
        known = self.alive & (self.sizes > 0)
        fill = float(self.mass[known].mean()) if known.any() else 1.0
        mass = np.where(self.alive, np.where(self.sizes > 0, self.mass, fill), 0.0)
        if mass.sum() <= 0:
            return int(self.rng.integers(S))
        return int(self.rng.choice(S, p=mass / mass.sum()))

    def _request(self, beta: float) -> None:
        s = self.pick_shard()
        idx = prio = None
        if self.pending[s]:
            idx = np.concatenate([p[0] for p in self.pending[s]])
            prio = np.concatenate([p[1] for p in self.pending[s]])
            self.pending[s] = []
        self.inflight.append((s, self.transport.request(s, idx, prio, self.batch_size, beta, self.k)))

    def next(self, beta: float) -> tuple[int, dict[str, Any] | None]:
        """Top up the requests in flight, then wait for the oldest: (shard, answer). The answer is None
        if the shard failed, and has no ``batch`` while the shard is warming up or rate-limited."""
        while len(self.inflight) < self.prefetch:
            self._request(beta)
        s, handle = self.inflight.popleft()
        res = self.transport.result(handle)
        if res is None:
            self.pending[s] = []
            self.sizes[s] = 0
            self.alive[s] = False
            return s, None
        self.mass[s], self.sizes[s], self.inserted[s] = res["mass"], res["size"], res["inserted"]
        return s, res

    def write_back(self, s: int, indices: np.ndarray, priorities: np.ndarray) -> None:
        self.pending[s].append((indices, priorities))

    def replaced(self, shards: list[int]) -> None:
        """Shards ``shards`` were replaced: their pending priorities refer to old contents and are
        dropped, and every request in flight is forgotten (the transport's handles are stale)."""
        for j in shards:
            self.pending[j] = []
            self.sizes[j] = 0
            self.alive[j] = True
        self.inflight.clear()
