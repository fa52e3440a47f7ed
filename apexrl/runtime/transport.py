"""Ray implementations of the role interfaces in ``apexrl.core`` (used inside Ray worker processes).

Every queue is bounded: an actor keeps at most ``max_inflight`` unacknowledged sends, a weight pull is
at most one request in flight, so no list of object refs grows with run time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import numpy as np
import ray
from ray.exceptions import RayActorError, RayTaskError

from apexrl.core import Batch, Weights
from apexrl.runtime.ray_worker import LIGHT

log = logging.getLogger(__name__)


@ray.remote(num_cpus=0, **LIGHT)
class ParameterServer:
    """Holds a reference to the newest published weights; the learner owns the object itself.

    The ref travels wrapped in a list so Ray hands it over as a reference, not as the resolved value:
    weights go learner -> object store -> actor without passing through this process.

    ``get(known, wait_s)`` is a long poll: it answers when weights newer than ``known`` exist (or after
    ``wait_s``). An actor keeps one such request open and checks it locally every sync period, so the
    server sees one call per actor per publication instead of one per 400 env steps (~50 calls/s per
    CartPole actor, ~9 % of a core on the 2-core host while two actors ran, and a round trip each on
    the actors' side).

    The published object dies with its owner, the learner, so every ``BACKUP_S`` this process keeps its
    own copy of the newest weights: what a restarted learner starts from when the publication went with
    the dead one (a few seconds of learning lost at most, not a checkpoint interval's).
    """

    BACKUP_S = 2.0

    def __init__(self) -> None:
        self.version = -1
        self.ref: Any = None
        self._published: asyncio.Event | None = None
        self._backup: tuple[int, Any] | None = None
        self._backup_at = -float("inf")
        self._backing_up = False

    async def set(self, version: int, holder: list[Any]) -> None:
        if version > self.version:
            self.version, self.ref = version, holder[0]
            if self._published is not None:
                self._published.set()
                self._published = None
            if not self._backing_up and time.monotonic() - self._backup_at >= self.BACKUP_S:
                self._backing_up = True
                asyncio.get_running_loop().create_task(self._keep(version, holder[0]))

    async def _keep(self, version: int, ref: Any) -> None:
        try:
            self._backup = (version, await ref)
            self._backup_at = time.monotonic()
        except Exception:  # noqa: BLE001 - its owner died first: the previous copy stays
            pass
        finally:
            self._backing_up = False

    async def backup(self) -> tuple[int, Any] | None:
        """``(version, weights)``: this process's own copy of recent weights (None before the first)."""
        return self._backup

    async def get(self, known_version: int, wait_s: float = 0.0) -> tuple[int, list[Any]] | None:
        if (self.ref is None or self.version <= known_version) and wait_s > 0:
            if self._published is None:
                self._published = asyncio.Event()
            try:
                await asyncio.wait_for(self._published.wait(), wait_s)
            except asyncio.TimeoutError:
                pass
        if self.ref is None or self.version <= known_version:
            return None
        return self.version, [self.ref]


class RayWeightSource:
    """Non-blocking weight pulls: one long-poll request to the parameter server stays open; each ``poll``
    checks it locally, and once it has answered fetches the weights and opens the next one. Acting never
    waits, and new weights are picked up at the first sync period after they are in this node's store."""

    LONG_POLL_S = 30.0  # the server answers at the latest after this, so a lost wake-up cannot stall pulls

    def __init__(self, ps: Any) -> None:
        self.ps = ps
        self.version = -1
        self._meta: Any = None
        self._weights: tuple[int, Any] | None = None

    def poll(self) -> tuple[int, Weights] | None:
        result = None
        if self._meta is not None and ray.wait([self._meta], timeout=0)[0]:
            try:
                got = ray.get(self._meta)
            except (RayActorError, RayTaskError):
                got = None
            self._meta = None
            if got is not None:
                self._weights = (got[0], got[1][0])
        if self._weights is not None and ray.wait([self._weights[1]], timeout=0)[0]:
            version, ref = self._weights
            self._weights = None
            try:
                result = (version, ray.get(ref))
                self.version = version
            except Exception as e:  # the learner (owner) died: wait for the next publication
                log.warning("weights v%d unavailable: %s", version, e)
        if self._meta is None and self._weights is None:
            self._meta = self.ps.get.remote(self.version, self.LONG_POLL_S)
        return result


class RayReplaySink:
    """Round-robin sends over the shards with a bounded number in flight."""

    def __init__(self, shards: list[Any], max_inflight: int, start: int = 0) -> None:
        self.shards = list(shards)
        self.max_inflight = max_inflight
        self._next = start
        self._inflight: list[tuple[Any, Any]] = []  # (shard, ref of its add)
        self._heard = False  # has any shard answered a send yet
        self.dropped = 0
        self.blocked_s = 0.0
        self._owed: Any = None  # a shard whose "wait" an acknowledge() did not wait out: heeded at the next add

    def set_shards(self, shards: list[Any]) -> None:
        self.shards = list(shards)

    def add(self, batch: Batch, priorities: np.ndarray) -> None:
        t0 = time.perf_counter()
        if self._owed is not None:
            owed, self._owed = self._owed, None
            self._wait_for_learner(owed)
        self._settle(self._answered())
        shard = self.shards[self._next % len(self.shards)]
        self._next += 1
        self._inflight.append((shard, shard.add.remote(batch, priorities)))
        # Until a shard has answered once, one send in flight: at start-up the shard's process may still
        # be starting, and sends piled up behind it all land at once past the rate limiter's warm-up
        # gate (8 x 1,024 transitions of the untrained network at the first update on CartPole).
        limit = self.max_inflight if self._heard else 1
        if len(self._inflight) > limit:
            self._settle(len(self._inflight) - limit)
        self.blocked_s += time.perf_counter() - t0

    def _answered(self) -> int:
        """How many of the oldest sends have their answer already. A shard's "wait" is heeded before the
        next send, not only once ``max_inflight`` sends are out: otherwise an actor overshoots the rate
        limiter by that many sends (8 x 1,024 CartPole transitions from the first network, right when
        the learner starts, which cost solves: bench sweep --actor-lead, results/lead-20261203)."""
        if not self._inflight:
            return 0
        refs = [r for _, r in self._inflight]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
        done = set(ready)
        n = 0
        while n < len(refs) and refs[n] in done:
            n += 1
        return n

    def _settle(self, count: int, heed_limit: bool = True) -> None:
        """Wait for the ``count`` oldest sends; when a shard says the learner is behind the
        samples-per-insert ratio, wait until it catches up (the actor's side of the rate limiter), or,
        without ``heed_limit``, owe that wait to the next send."""
        done, self._inflight = self._inflight[:count], self._inflight[count:]
        for shard, ref in done:
            try:
                ok = ray.get(ref)
                self._heard = True
                if not ok and not heed_limit:
                    self._owed = shard
                elif not ok:
                    self._wait_for_learner(shard)
            except (RayActorError, RayTaskError) as e:
                self.dropped += 1
                log.warning("a replay shard lost a batch: %s", type(e).__name__)

    def _wait_for_learner(self, shard: Any) -> None:
        pause = 0.002
        try:
            while not ray.get(shard.insert_allowed.remote()):
                # Each poll is a round trip costing CPU on this actor and on the shard, the learner's
                # neighbours on a small host: back off (2 ms doubling to 20 ms) instead of 200 polls/s.
                time.sleep(pause)
                pause = min(2 * pause, 0.02)
        except (RayActorError, RayTaskError):
            pass  # a dead shard does not limit anyone: its replacement is the supervisor's

    def flush(self) -> None:
        self._settle(len(self._inflight))

    def acknowledge(self) -> None:
        """Wait until every send so far is stored, not for the learner: a paused actor must not depend on
        a learner that may be held too. The rate limiter's wait, if any, comes before the next send."""
        self._settle(len(self._inflight), heed_limit=False)


class RayControl:
    """An actor's line to the board (:class:`~apexrl.runtime.actor_loop.Control`): at most one push in flight."""

    def __init__(self, board: Any, index: int) -> None:
        self.board, self.index = board, index
        self._ref: Any = None

    def register(self, want: int) -> None:
        self._ref = self.board.register.remote(self.index, want)  # replaces any push in flight: a new life

    def push(self, delta: dict[str, Any], want: int) -> None:
        if self._ref is None:
            self._ref = self.board.push.remote(self.index, delta, want)

    def busy(self) -> bool:
        return self._ref is not None

    def reply(self, wait: bool = False) -> dict[str, Any] | None:
        if self._ref is None or not (wait or ray.wait([self._ref], timeout=0)[0]):
            return None
        ref, self._ref = self._ref, None
        return ray.get(ref)
