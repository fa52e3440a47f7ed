"""Per-actor exploration rates of Ape-X (Horgan et al., 2018, sec. 4.1).

eps_i = eps_base ** (1 + alpha * i / (N - 1)),  i = 0 .. N-1;  paper: eps_base = 0.4, alpha = 7.
Unit i is an actor (paper) or, by default here, one environment slot over all actors, which gives a
small run (2 actors) the paper's spread of exploration instead of just two rates.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def epsilon_schedule(num: int, eps_base: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    if num < 1:
        raise ValueError(f"need at least one unit, got {num}")
    if num == 1:
        return np.array([eps_base], dtype=np.float64)
    i = np.arange(num, dtype=np.float64)
    return eps_base ** (1.0 + alpha * i / (num - 1))


def actor_exploration(a: Any, actor_index: int, num_actors: int,
                      num_envs: int) -> tuple[np.ndarray, tuple[float, int, int] | None]:
    """An actor's epsilons per env slot and, with ``eps_anneal_steps`` > 0, the anneal its policy follows:
    (start epsilon, env steps over all actors, number of actors). ``a``: the config's ``actors`` section."""
    eps = actor_epsilons(actor_index, num_actors, num_envs, a.eps_base, a.eps_alpha, a.epsilon_per)
    return eps, ((a.eps_start, a.eps_anneal_steps, num_actors) if a.eps_anneal_steps > 0 else None)


def actor_epsilons(actor_index: int, num_actors: int, envs_per_actor: int, eps_base: float, alpha: float,
                   per: str = "env") -> np.ndarray:
    """The epsilons of one actor's environments: [envs_per_actor]."""
    if not 0 <= actor_index < num_actors:
        raise ValueError(f"actor_index {actor_index} outside [0, {num_actors})")
    if per == "actor":
        eps = epsilon_schedule(num_actors, eps_base, alpha)[actor_index]
        return np.full(envs_per_actor, eps)
    if per != "env":
        raise ValueError(f"per must be 'env' or 'actor', got {per!r}")
    # Interleave so each actor gets a spread (actor 0 does not hold all the explorative slots).
    all_eps = epsilon_schedule(num_actors * envs_per_actor, eps_base, alpha)
    return all_eps[actor_index::num_actors].copy()
