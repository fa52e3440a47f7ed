"""Greedy evaluation: play whole episodes with a fixed network and report the returns.

All episodes run side by side (one batched forward pass per step), so ten CartPole episodes cost about
as much network time as one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from apexrl.config import EnvConfig
from apexrl.envs import make_env
from apexrl.policy import q_function


def evaluate(net: Any, env_cfg: EnvConfig, episodes: int, seed: int = 0, epsilon: float = 0.0,
             env_factory: Callable[[int], gym.Env] | None = None, max_steps: int = 1_000_000) -> list[float]:
    """Returns of ``episodes`` greedy (or ``epsilon``-greedy) episodes. ``net`` is a torch module or a
    function from a numpy batch of observations to numpy Q-values (``apexrl.policy``)."""
    make = env_factory or (lambda s: make_env(env_cfg, seed=None, training=False))
    envs = [make(seed + i) for i in range(episodes)]
    rng = np.random.default_rng(seed)
    try:
        obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
        returns = np.zeros(episodes)
        active = np.ones(episodes, dtype=bool)
        n_actions = int(envs[0].action_space.n)  # type: ignore[attr-defined]
        q_fn = q_function(net)  # a torch module, or numpy obs -> numpy Q-values
        for _ in range(max_steps):
            idx = np.flatnonzero(active)
            if len(idx) == 0:
                break
            actions = np.asarray(q_fn(np.stack([obs[i] for i in idx]))).argmax(axis=1)
            if epsilon > 0:
                explore = rng.random(len(idx)) < epsilon
                actions = np.where(explore, rng.integers(n_actions, size=len(idx)), actions)
            for i, a in zip(idx, actions):
                obs[i], r, terminated, truncated, _ = envs[i].step(int(a))
                returns[i] += float(r)
                if terminated or truncated:
                    active[i] = False
        return returns.tolist()
    finally:
        for env in envs:
            env.close()
