"""What an agent brings when a config chooses it: the dataclass defaults are DQN's CartPole preset, and a
user who writes only ``agent: r2d2`` or ``agent: dpg`` should not train a recurrent or continuous agent with
DQN's batch and learning rate. These keys go under whatever the config sets (a file, ``--set``, a dict, an
RLlib file): anything written wins, and the run's ``config.yaml`` records the values used.

The values are what the shipped presets of each agent share across their tasks (dpg: Pendulum, LunarLander,
HalfCheetah; r2d2: CartPole without velocities, MinAtar), not one task's tuning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

AGENT_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "r2d2": {
        "network": {"torso": [64]},     # one layer before the core: the recurrent state carries the rest
        "learner": {"batch_size": 32},  # sequences: 32 x (burn-in + 20 trained steps) per update
    },
    "dpg": {
        "learner": {"lr": 1e-3,          # critic (Adam); TD3's 1e-3 (3e-4 for MuJoCo's larger bodies)
                    "batch_size": 256},  # TD3's batch
        "replay": {"learning_starts": 10_000,      # uniform-random actions until then (TD3: 10-25k)
                   "samples_per_insert": 64.0},    # a quarter of TD3's one 256-batch update per env step
    },
}


def with_agent_defaults(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` over the defaults of the agent it chooses (a nested config dict; sections not dicts are left to
    the parser's errors)."""
    layer = AGENT_DEFAULTS.get(str(data.get("agent", "dqn")))
    if layer is None:
        return dict(data)
    out = dict(data)
    for section, keys in layer.items():
        given = out.get(section, {})
        if isinstance(given, Mapping):
            out[section] = {**keys, **given}
    return out


def agent_defaults_in_effect(agent: str, flat: Mapping[str, Any]) -> dict[str, Any]:
    """The agent's defaults a resolved config (``flatten(to_dict(cfg))``) holds: what the start line names."""
    layer = AGENT_DEFAULTS.get(agent, {})
    wanted = {f"{s}.{k}": v for s, keys in layer.items() for k, v in keys.items()}
    return {k: v for k, v in wanted.items() if _same(flat.get(k), v)}


def _same(a: Any, b: Any) -> bool:
    if isinstance(b, list):
        return isinstance(a, (list, tuple)) and list(a) == b
    return a == b
