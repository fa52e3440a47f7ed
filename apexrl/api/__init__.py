"""The Python shapes users bring from RLlib and the Ape-X article: ``ApeX`` (an agent in your own loop) and
``ApexTrainer`` (``apexrl.api.trainer``, the distributed system as an iterative trainer; loaded on use)."""

from __future__ import annotations

from typing import Any

__all__ = ["ApeX"]


def __getattr__(name: str) -> Any:
    # Loaded on use: ``apexrl.api.trainer`` (the trainer's driver) must not pull in the agent's torch.
    if name == "ApeX":
        from apexrl.api.agent import ApeX

        return ApeX
    raise AttributeError(f"module 'apexrl.api' has no attribute {name!r}")
