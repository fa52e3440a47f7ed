"""DQN Atari preprocessing (Mnih et al., 2015; Machado et al., 2018), built from gymnasium's wrappers.

Training: no-op starts, frame skip 4 with max-pool over the last two frames, 84x84 grayscale,
life loss as terminal, rewards clipped to their sign, 108k-frame cap, stack of 4 (uint8, [4, 84, 84]).
Evaluation: the same pipeline without reward clipping and life-loss terminals, so the reported return is
the game score.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, TransformReward

from apexrl.config import EnvConfig


def make_atari(cfg: EnvConfig, training: bool, render_mode: str | None,
               raw_make: Callable[..., gym.Env]) -> gym.Env:
    extra: dict[str, Any] = {}
    if cfg.id.startswith("ALE/"):
        # ALE v5 defaults to frameskip 4 and sticky actions; the DQN protocol skips in the wrapper instead.
        extra = {"frameskip": 1, "repeat_action_probability": 0.0, "full_action_space": False}
        if "max_num_frames_per_episode" not in cfg.kwargs:
            extra["max_num_frames_per_episode"] = cfg.max_episode_frames
    env = raw_make(cfg, render_mode=render_mode, **extra)
    env = AtariPreprocessing(
        env,
        noop_max=cfg.noop_max,
        frame_skip=cfg.frame_skip,
        screen_size=cfg.screen_size,
        terminal_on_life_loss=training and cfg.terminal_on_life_loss,
        grayscale_obs=True,
        scale_obs=False,
    )
    if training and cfg.clip_rewards:
        env = TransformReward(env, lambda r: float(np.sign(r)))
    env = FrameStackObservation(env, cfg.frame_stack)
    return env
