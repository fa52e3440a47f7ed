"""MinAtar (Young & Tian, 2019): five Atari-like games on 10x10 boolean grids, small enough to learn from
pixels on CPUs. ``env.id: MinAtar/<Game>-v1`` (minimal action sets) or ``-v0`` (all 6 actions); the
``minatar`` package comes with ``pip install apexrl[minatar]``.

Observations become channel-first uint8 ``[C, 10, 10]`` (400 bytes for Breakout's 4 channels, no frame
de-duplication needed), which the DQN agent's small-image conv reads. MinAtar registers no time limit and a
good Breakout agent can play forever, so episodes are cut at ``env.max_episode_steps`` (default here
``DEFAULT_MAX_STEPS``), a truncation that bootstraps, like Atari's 108k-frame cap.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from apexrl.config import EnvConfig

DEFAULT_MAX_STEPS = 10_000  # agent steps per episode when env.max_episode_steps is null
INSTALL_HINT = "install it with: pip install 'apexrl[minatar]'"


def is_minatar(cfg: EnvConfig) -> bool:
    return cfg.id.startswith("MinAtar/")


@functools.cache
def register_minatar() -> None:
    """Import the ``minatar`` package and register its ids; ImportError names the extra to install."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # minatar warns on import when seaborn (only needed to render) is absent
    try:
        import minatar.gym as mg
    except ImportError as e:
        raise ImportError(f"MinAtar ids need the 'minatar' package ({e}); {INSTALL_HINT}") from None
    finally:
        logging.disable(previous)
    if "MinAtar/Breakout-v1" not in gym.registry:
        mg.register_envs()


class ChannelFirstUint8(gym.ObservationWrapper):
    """[10, 10, C] bool -> [C, 10, 10] uint8 (0/1), the layout of image torsos and 1 byte per cell."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        h, w, c = env.observation_space.shape  # type: ignore[misc]
        self.observation_space = gym.spaces.Box(0, 1, (c, h, w), np.uint8)

    def observation(self, observation: Any) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(np.asarray(observation, dtype=np.uint8), -1, 0))


def make_minatar(cfg: EnvConfig, render_mode: str | None, raw_make: Callable[..., gym.Env]) -> gym.Env:
    register_minatar()
    env = raw_make(cfg, render_mode=render_mode)
    if cfg.max_episode_steps is None:
        env = gym.wrappers.TimeLimit(env, DEFAULT_MAX_STEPS)
    return ChannelFirstUint8(env)
