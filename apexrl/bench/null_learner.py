"""A learner that does not learn, for measuring what feeds one: ``bench feed`` runs it inside the real
``LearnerWorker`` and ``LearnerLoop`` (same replay client, prefetch, requests of k batches, priorities
written back with the next request), so what it measures is the path a real learner's batches take.

Per batch it does what a learner's host thread does besides the update itself: every array of the
batch to the learner's device as :class:`~apexrl.agents.dqn.learner.DQNLearner` moves them
(``to_device``), then optionally sleeps ``update_s`` (a GPU update of that length, which costs the host
thread little CPU), and returns new priorities. It publishes the agent's real network (built once,
never changed), so publications cost what they cost a real learner.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from apexrl.agents.torch_utils import resolve_device, to_device
from apexrl.core import state_dict_to_numpy


class NullLearner:
    def __init__(self, net: torch.nn.Module, device: str = "cpu", update_s: float = 0.0, seed: int = 0,
                 record: bool = False) -> None:
        """``record``: keep a copy of every batch and its IS weights (tests), returned by ``state_dict``."""
        self.device = resolve_device(device)
        self.net = net.to(self.device)
        self.update_s = float(update_s)
        self.rng = np.random.default_rng(seed)
        self.updates = self.skipped_updates = self.consecutive_skips = 0
        self.received: list[tuple[dict[str, np.ndarray], np.ndarray]] | None = [] if record else None
        self._left_at: float | None = None  # process CPU when the last update returned

    @classmethod
    def for_system(cls, system: Any, update_s: float = 0.0, record: bool = False) -> NullLearner:
        return cls(system.make_network(), system.cfg.learner.device, update_s, system.cfg.seed, record)

    def update(self, batch: dict[str, np.ndarray], weights: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
        c0, t0 = time.process_time(), time.perf_counter()
        outside = 0.0 if self._left_at is None else c0 - self._left_at
        tensors = [to_device(v, self.device) for v in batch.values()]
        tensors.append(to_device(np.asarray(weights), self.device, torch.float32))
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        copy_s = time.perf_counter() - t0
        if self.received is not None:
            self.received.append(({k: np.array(v) for k, v in batch.items()}, np.array(weights)))
        if self.update_s > 0:
            time.sleep(self.update_s)
        self.updates += 1
        self._left_at = time.process_time()
        metrics = {"device_copy_ms": 1e3 * copy_s, "cpu_in_update_ms": 1e3 * (self._left_at - c0),
                   "cpu_between_updates_ms": 1e3 * outside}
        return self.rng.uniform(0.01, 1.0, size=len(weights)), metrics

    def weights(self) -> dict[str, np.ndarray]:
        return state_dict_to_numpy(self.net)

    def state_dict(self) -> dict[str, Any]:
        return {"net": self.net.state_dict(), "updates": self.updates, "received": self.received}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.updates = int(state["updates"])
