"""Greedy evaluation: play whole episodes with a fixed policy and report the returns.

All episodes run side by side (one batched forward pass per step), so ten CartPole episodes cost about
as much network time as one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from apexrl.agents.base import Policy
from apexrl.config import EnvConfig
from apexrl.envs import make_env
from apexrl.envs.multiagent.make import is_multiagent


def evaluate(policy: Policy, env_cfg: EnvConfig, episodes: int, seed: int = 0,
             env_factory: Callable[[int], gym.Env] | None = None, max_steps: int = 1_000_000) -> list[float]:
    """``policy`` from ``System.make_eval_policy`` (or an agent builder's ``make_eval_policy``)."""
    make = env_factory or (lambda s: make_env(env_cfg, seed=None, training=False))
    envs = [make(seed + i) for i in range(episodes)]
    try:
        obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
        returns = np.zeros(episodes)
        active = np.ones(episodes, dtype=bool)
        recurrent = getattr(policy, "recurrent", False)  # each row's state belongs to one episode: keep rows fixed
        for _ in range(max_steps):
            idx = np.flatnonzero(active)
            if len(idx) == 0:
                break
            if recurrent:
                actions = policy.act(np.stack(obs))[idx]
            else:
                actions = policy.act(np.stack([obs[i] for i in idx]))
            for i, a in zip(idx, actions):
                obs[i], r, terminated, truncated, _ = envs[i].step(a.item() if a.ndim == 0 else a)
                returns[i] += float(r)
                if terminated or truncated:
                    active[i] = False
        return returns.tolist()
    finally:
        for env in envs:
            env.close()


def evaluate_system(system: Any, network: Any, weights: Any, episodes: int, seed: int,
                    explore: float | None = None) -> dict[str, Any]:
    """``weights`` played greedily with ``system``'s eval policy: ``eval_returns``, and for a multi-agent game
    against an opponent, ``eval_seats`` (win / draw / loss per seat, ``envs/multiagent/play.py``)."""
    def policy(rows: int) -> Any:
        return system.make_eval_policies(network, weights, rows, seed, explore)  # several: by agent

    if is_multiagent(system.cfg.env):
        from apexrl.envs.multiagent.play import evaluate_game

        return evaluate_game(policy, system.cfg, episodes, seed=seed)
    return {"eval_returns": evaluate(policy(episodes), system.cfg.env, episodes, seed=seed)}


def seat_rates(res: dict[str, Any]) -> dict[str, float]:
    """A game evaluation's ``eval_seats`` as flat ``eval_seat_<seat>_<outcome>`` rates: what the stop conditions,
    the metrics and the console read."""
    return {f"eval_seat_{seat}_{k}": v for seat, rates in res.get("eval_seats", {}).items() for k, v in rates.items()}
