"""RLlib's Rainbow keys of DQN (and so of APEX): the distributional and noisy heads, mapped by meaning."""

from __future__ import annotations

from typing import Any

from apexrl.config.rllib_base import Ctx, Key, same


def _num_atoms(v: Any, c: Ctx) -> dict[str, Any]:
    n = int(v)
    return {"network.distribution": "expectation"} if n <= 1 else {"network.distribution": "categorical",
                                                                   "network.num_atoms": n}


def _noisy(v: Any, c: Ctx) -> dict[str, Any]:
    return {"network.noisy": bool(v), "actors.epsilon_with_noise": bool(v)}


HEAD_KEYS = [
    Key("num_atoms", "network.distribution, network.num_atoms", "1: Q itself (plain DQN); more: C51's "
        "categorical head with that many atoms", _num_atoms),
    same("v_min", "network.v_min", "the categorical support's lower end", float),
    same("v_max", "network.v_max", "the categorical support's upper end", float),
    Key("noisy", "network.noisy, actors.epsilon_with_noise", "noisy layers in the head; the file's epsilons "
        "still apply, as in RLlib (an exploration_config that ends at epsilon 0 leaves the noise alone)", _noisy),
    same("sigma0", "network.sigma0", "initial noise scale of the noisy layers", float),
]
