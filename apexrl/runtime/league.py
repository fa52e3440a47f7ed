"""Self-play against a league: which opponent the other seats of a training game have. Each actor keeps its own
pool of past weights (a snapshot every ``multiagent.self_play.snapshot_every`` learner updates, from the
publications it pulls anyway), so the league costs no call and no coordinator; at each game's start it draws
the opponent: the current policy (plain self-play), a past snapshot, or a uniform random legal player. Against
a snapshot or random, one seat (drawn per game) is the learner's and only its transitions go to replay.
Ray-free and agent-free: snapshots act through the agent's own greedy evaluation policy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

SELF, RANDOM = -1, -2  # an opponent: the current policy, a random legal player, or a snapshot's index (>= 0)


class League:
    def __init__(self, p_latest: float, p_random: float, snapshot_every: int, pool_size: int,
                 make_policy: Callable[[], Any], rng: np.random.Generator) -> None:
        self.p_latest, self.p_random = p_latest, p_random
        self.every, self.size = snapshot_every, pool_size
        self.make_policy, self.rng = make_policy, rng
        self.pool: list[Any] = []  # greedy policies holding past weights, oldest first
        self.versions: list[int] = []
        self._next = 0  # the pool slot the next snapshot replaces once the pool is full

    @property
    def active(self) -> bool:
        return self.p_latest < 1.0

    def offer(self, weights: dict[str, np.ndarray], version: int) -> bool:
        """Keep ``weights`` as a snapshot when ``snapshot_every`` updates have passed since the newest one."""
        if not self.active or self.p_latest + self.p_random >= 1.0:
            return False
        if self.versions and version - max(self.versions) < self.every:
            return False
        if len(self.pool) < self.size:
            policy = self.make_policy()
            self.pool.append(policy)
            self.versions.append(version)
        else:
            policy = self.pool[self._next]
            self.versions[self._next] = version
            self._next = (self._next + 1) % self.size
        policy.set_weights({k: np.array(v, copy=True) for k, v in weights.items()})
        return True

    def draw(self) -> int:
        """A new game's opponent: SELF, RANDOM or a snapshot's index (SELF while the pool is empty)."""
        u = self.rng.random()
        if u < self.p_latest:
            return SELF
        if u < self.p_latest + self.p_random:
            return RANDOM
        return int(self.rng.integers(len(self.pool))) if self.pool else SELF
