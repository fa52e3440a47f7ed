"""The small interfaces that connect Ape-X's roles; transports (in-process or Ray) implement them.

    actor:   Policy.act(obs) -> env -> n-step transitions -> Policy.priorities -> ReplaySink.add(batch)
    learner: ReplayClient.next() -> Learner.update(batch) -> ReplayClient.write_back(priorities)
    actor:   every weight_sync_period env steps WeightSource.poll() -> Policy.set_weights if newer

What a policy or a learner computes belongs to an agent (``apexrl.agents``); how data and weights move
belongs to the runtime (``apexrl.runtime``), which knows these interfaces and nothing of any algorithm.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    import torch

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


# torch is imported where used: replay shard processes import this module and must not pay for torch
# (~2-3 s of CPU and ~100 MB per process at start-up on a small host).
def state_dict_to_numpy(module: torch.nn.Module) -> Weights:
    """CPU numpy copy of the weights: cheap to ship through Ray's object store (zero-copy on read)."""
    return {k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()}


def load_numpy_state_dict(module: torch.nn.Module, weights: Weights) -> None:
    import torch

    module.load_state_dict({k: v if isinstance(v, torch.Tensor) else torch.as_tensor(np.array(v))
                            for k, v in weights.items()})
