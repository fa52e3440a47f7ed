"""Small torch helpers every agent's learner uses."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"learner.device={name} but CUDA is not available on the learner's node "
                           "(set learner.device=cpu, or learner.num_gpus=1 to place the learner on a GPU node)")
    return torch.device(name)


def to_device(x: np.ndarray, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A batch array on ``device`` without a copy where numpy allows (replay hands out read-only views)."""
    t = torch.from_numpy(x) if x.flags.writeable else torch.from_numpy(x.copy())
    return t.to(device, dtype=dtype, non_blocking=True)


def zero_grad(params: Iterable[torch.nn.Parameter]) -> None:
    # Same as optimizer.zero_grad(set_to_none=True) without its profiler/dynamo wrappers, which cost
    # ~10% of a CartPole update (py-spy: record_function.__enter__ + _disable_dynamo per call).
    for p in params:
        p.grad = None
