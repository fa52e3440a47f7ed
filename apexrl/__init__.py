"""apexrl: Ape-X (Horgan et al., 2018) on PyTorch and Ray."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["ApeX", "ApexTrainer", "__version__", "create_env", "q_network", "train"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: `import apexrl` stays light (no torch) for the CLI's start-up.
    if name == "ApeX":
        from apexrl.api import ApeX

        return ApeX
    if name == "q_network":
        from apexrl.api.agent import q_network

        return q_network
    if name == "ApexTrainer":
        from apexrl.api.trainer import ApexTrainer

        return ApexTrainer
    if name == "create_env":
        from apexrl.envs import create_env

        return create_env
    raise AttributeError(f"module 'apexrl' has no attribute {name!r}")

if TYPE_CHECKING:
    from apexrl.config import Config
    from apexrl.runtime.driver import TrainResult


def train(config: Config | Mapping[str, Any] | str | os.PathLike[str] | None = None, **kwargs: Any) -> TrainResult:
    """Train Ape-X. ``config`` is a Config, a (possibly RLlib-style) dict such as the seed article's,
    a YAML path or preset name, or None for the CartPole default. Keyword arguments go to
    :func:`apexrl.runtime.driver.train`, e.g. ``model_factory=lambda obs_space, act_space: MyNet(...)``."""
    from apexrl import config as C
    from apexrl.runtime.driver import train as _train

    if config is None:
        cfg = C.load("cartpole")
    elif isinstance(config, C.Config):
        cfg = config
    elif isinstance(config, Mapping):
        cfg = C.from_dict(config)
    else:
        cfg = C.load(config)
    return _train(cfg, **kwargs)
