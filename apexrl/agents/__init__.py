"""Agents: one package per algorithm behind :class:`~apexrl.agents.base.AgentBuilder`.

``config.agent`` names the builder. Adding an agent: a package here with a builder, one line in
``BUILDERS``, its name in ``apexrl.config.AGENTS`` (the config sits below the agents and does not import
them), and a preset in ``apexrl/configs/``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apexrl.agents.base import AgentBuilder

BUILDERS: dict[str, str] = {"dqn": "apexrl.agents.dqn:DQNBuilder", "dpg": "apexrl.agents.dpg:DPGBuilder",
                            "r2d2": "apexrl.agents.r2d2:R2D2Builder"}  # keys: config.AGENTS


def get_builder(name: str) -> AgentBuilder:
    if name not in BUILDERS:
        raise ValueError(f"unknown agent '{name}'; allowed: {', '.join(sorted(BUILDERS))}")
    module, _, cls = BUILDERS[name].partition(":")
    return getattr(importlib.import_module(module), cls)()


__all__ = ["BUILDERS", "get_builder"]
