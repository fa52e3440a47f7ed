"""Small torch helpers every agent's learner uses."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

log = logging.getLogger("apexrl.agents")


def resolve_device(name: str, role: str = "learner") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"{role}.device={name} but CUDA is not available on the {role}'s node "
                           f"(set {role}.device=cpu, or {role}.num_gpus > 0 to place it on a GPU node)")
    return torch.device(name)


def to_device(x: np.ndarray, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A batch array on ``device``, without a host copy: a batch from a Ray shard is read-only (it lies
    in the object store's shared memory), and learners never write into their inputs, so it is wrapped
    as it is. Copying it first cost a learner's host thread 9 ms of a 12 ms Atari batch (bench feed)."""
    if x.flags.writeable:
        t = torch.from_numpy(x)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "non-writable tensors": nothing writes to it
            t = torch.from_numpy(x)
    return t.to(device, dtype=dtype, non_blocking=True)


def zero_grad(params: Iterable[torch.nn.Parameter]) -> None:
    # Same as optimizer.zero_grad(set_to_none=True) without its profiler/dynamo wrappers, which cost
    # ~10% of a CartPole update (py-spy: record_function.__enter__ + _disable_dynamo per call).
    for p in params:
        p.grad = None


class UpdateCounters:
    """The counters the runtime reads from every learner, and the rule for a non-finite update: skip it,
    count it, let the learner loop stop the run after ``learner.max_consecutive_skips`` in a row."""

    def __init__(self) -> None:
        self.updates = 0
        self.skipped_updates = 0
        self.consecutive_skips = 0
        self._next_warning = 0.0  # monotonic time before which skips are only counted
        self._warned_at = 0  # skipped_updates at the last warning

    WARN_EVERY_S = 10.0  # one warning per this many seconds; the rest are counted (skipped_updates metric)

    def _skip(self, what: str) -> tuple[None, dict[str, float]]:
        self.skipped_updates += 1
        self.consecutive_skips += 1
        now = time.monotonic()
        if now >= self._next_warning:
            unsaid = self.skipped_updates - self._warned_at - 1
            more = f" ({unsaid} more skipped since the last warning)" if unsaid > 0 else ""
            log.warning("skipped learner update %d: non-finite %s%s", self.updates, what, more)
            self._next_warning, self._warned_at = now + self.WARN_EVERY_S, self.skipped_updates
        return None, {"skipped": 1.0}

    def _counters(self) -> dict[str, Any]:
        return {"updates": self.updates, "skipped_updates": self.skipped_updates, "torch_rng": torch.get_rng_state()}

    def _load_counters(self, state: dict[str, Any]) -> None:
        self.updates = int(state["updates"])
        self.skipped_updates = int(state.get("skipped_updates", 0))
        if "torch_rng" in state:
            torch.set_rng_state(state["torch_rng"])
