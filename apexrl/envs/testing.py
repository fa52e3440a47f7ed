"""Deliberately broken (or slowed) environments for fault-injection tests, benchmarks and checking a deployment.

``gymnasium.make("apexrl.envs.testing:Exploding-v0")`` imports this module in whichever process makes
the env (including Ray workers), so no registration step is needed there.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv


class ExplodingEnv(CartPoleEnv):
    """CartPole that raises on every reset an actor does: an actor built on it can never do any work (a
    crash loop). The driver's start-up check resets with seed 0, which passes, so the run does start."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[override]
        if seed == 0:
            return super().reset(seed=seed, options=options)
        raise RuntimeError("simulated env failure on reset")


class MisShapedEnv(CartPoleEnv):
    """Observations of shape (8,) against a declared (4,)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[override]
        obs, info = super().reset(seed=seed, options=options)
        return np.concatenate([obs, obs]), info

    def step(self, action: Any):  # type: ignore[override]
        obs, *rest = super().step(action)
        return (np.concatenate([obs, obs]), *rest)


class NaNRewardEnv(CartPoleEnv):
    """CartPole whose reward is NaN on every 50th step it takes (the first step is clean)."""

    steps = 0

    def step(self, action: Any):  # type: ignore[override]
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps += 1
        return obs, (float("nan") if self.steps % 50 == 0 else reward), terminated, truncated, info


class PacedCartPole(CartPoleEnv):
    """CartPole that takes at least 1/``rate`` s per step, as an Atari env does on an actor's core (the
    Ape-X paper's ~35 agent steps/s per actor), while costing the CPU almost nothing: many actors fit on
    a small host, so what their number costs the control plane can be told from what it costs the CPU."""

    def __init__(self, rate: float = 35.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.period, self._next = 1.0 / rate, 0.0

    def step(self, action: Any):  # type: ignore[override]
        import time

        now = time.perf_counter()
        self._next = max(self._next + self.period, now - 1.0)  # paced; never more than a second of catch-up
        if self._next > now:
            time.sleep(self._next - now)
        return super().step(action)


for _name, _cls in (("Exploding-v0", ExplodingEnv), ("MisShaped-v0", MisShapedEnv), ("NaNReward-v0", NaNRewardEnv),
                    ("PacedCartPole-v1", PacedCartPole)):
    if _name not in gym.registry:
        gym.register(_name, entry_point=_cls, max_episode_steps=500)
