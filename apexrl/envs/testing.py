"""Deliberately broken environments for fault-injection tests and for checking a deployment.

``gymnasium.make("apexrl.envs.testing:Exploding-v0")`` imports this module in whichever process makes
the env (including Ray workers), so no registration step is needed there.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class ExplodingEnv(CartPoleEnv):
    """CartPole that raises on every reset: an actor built on it can never do any work (a crash loop)."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[override]
        raise RuntimeError("simulated env failure on reset")


if "Exploding-v0" not in gym.registry:
    gym.register("Exploding-v0", entry_point=ExplodingEnv, max_episode_steps=500)
