"""CartPole without its velocities: a partially observed task that needs memory.

The observation keeps the cart's position and the pole's angle and drops both velocities, as RL Zoo's
``CartPoleNoVel-v1`` (and RLlib's StatelessCartPole) do; a memoryless agent sees where the pole is but not
where it is going. Registered as ``CartPoleNoVel-v1`` when this module is imported; the presets name it
``apexrl.envs.stateless:CartPoleNoVel-v1`` so every process imports it first.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class CartPoleNoVel(CartPoleEnv):
    """CartPole-v1's dynamics, rewards and 500-step limit; observation [x, theta]."""

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        high = np.array([self.x_threshold * 2, self.theta_threshold_radians * 2], dtype=np.float32)
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict]:
        obs, info = super().reset(**kwargs)
        return obs[[0, 2]], info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs[[0, 2]], reward, terminated, truncated, info


if "CartPoleNoVel-v1" not in gym.registry:
    gym.register("CartPoleNoVel-v1", entry_point=CartPoleNoVel, max_episode_steps=500, reward_threshold=475.0)
