"""Prioritized replay for Ape-X: sum tree, sampler, array storage and frame de-duplication.

Names load on first use: actors and learners import ``apexrl.replay.frames`` / ``nstep`` and should not
pay for the rest; only the shards need the sum tree (and frame replay's numba kernel, only for images).
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {"FramePrioritizedReplay": "frame_replay", "FrameStackEncoder": "frames",
         "PrioritizedReplay": "prioritized", "PrioritizedSampler": "sampler", "SumTree": "sum_tree"}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"apexrl.replay.{_HOME[name]}"), name)
    raise AttributeError(f"module 'apexrl.replay' has no attribute {name!r}")
