"""The small interfaces that connect Ape-X's roles; transports (in-process or Ray) implement them.

    actor:   obs -> eps-greedy action -> env -> n-step transitions -> priorities -> ReplaySink.add(batch)
    learner: ReplaySource.sample() -> double-DQN update -> ReplaySource.update_priorities(); publish weights
    actor:   every weight_sync_period steps WeightSource.poll() -> load if newer
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

Batch = dict[str, np.ndarray]
Weights = dict[str, np.ndarray]


class ReplaySink(Protocol):
    """Where an actor sends experience. ``add`` may return before the data is stored (Ray: async)."""

    def add(self, batch: Batch, priorities: np.ndarray) -> None: ...

    def flush(self) -> None:
        """Wait until every batch sent so far is acknowledged (bounded queues, clean shutdown)."""
        ...


class WeightSource(Protocol):
    """Where an actor gets newer weights from; ``poll`` never blocks acting for a round trip."""

    def poll(self) -> tuple[int, Weights] | None:
        """Return (version, weights) if a version newer than the last returned one is available now."""
        ...
