"""DQN Atari preprocessing (Mnih et al., 2015), as used by Ape-X (Horgan et al., 2018).

    ALE (frameskip 1, no sticky actions, minimal action set, 108k-frame cap)
      -> AtariPreprocessing: 1..noop_max no-ops at reset, action repeated frame_skip times with a
         max-pool over the last two frames, 84x84 grayscale, uint8
      -> [training] LifeLossTerminal: a lost life ends the episode for learning, the game goes on
      -> [training] reward clipped to its sign
      -> FrameStackObservation: [frame_stack, 84, 84] uint8, newest frame last

Evaluation (``training=False``) drops the two [training] stages, so the return is the game score over
all lives, as the papers report it.

Why not ``AtariPreprocessing(terminal_on_life_loss=True)``: gymnasium's flag only sets
``terminated``; the vector env then autoresets the whole game, so training would never see the states
after the first life. DQN's protocol (the ``EpisodicLifeEnv`` of OpenAI baselines) marks the life loss
terminal but continues the game on reset; :class:`LifeLossTerminal` does that.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, TransformReward

from apexrl.config import EnvConfig


class LifeLossTerminal(gym.Wrapper):
    """``terminated`` when a life is lost; ``reset`` after such a loss continues the same game with one
    no-op step instead of restarting it (a real game over or truncation resets as usual).

    ``info["game_over"]`` tells whether an episode end was the real end of the game.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self._lives = 0
        self._real_done = True

    def _ale_lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())  # type: ignore[attr-defined]

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._real_done = bool(terminated or truncated)
        lives = self._ale_lives()
        lost = 0 < lives < self._lives
        self._lives = lives
        info = dict(info)
        info["game_over"] = self._real_done
        return obs, reward, bool(terminated or lost), truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        if self._real_done or seed is not None:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)  # NOOP: the game continues
            if terminated or truncated:
                obs, info = self.env.reset(options=options)
        self._real_done = False
        self._lives = self._ale_lives()
        return obs, info


def ale_kwargs(cfg: EnvConfig) -> dict[str, Any]:
    """gymnasium.make kwargs for the DQN protocol; keys the user set in ``env.kwargs`` win (e.g.
    ``repeat_action_probability: 0.25`` for Machado et al.'s sticky actions)."""
    extra: dict[str, Any] = {
        "frameskip": 1,  # the skip (with max-pool) happens in AtariPreprocessing
        "repeat_action_probability": 0.0,  # v5 defaults to sticky actions; DQN/Ape-X use none
        "full_action_space": False,  # the minimal action set of each game
        "max_num_frames_per_episode": cfg.max_episode_frames,  # 108k emulator frames = 30 minutes
        "obs_type": "grayscale",  # AtariPreprocessing reads the screen itself; skip the RGB copy
    }
    return {k: v for k, v in extra.items() if k not in cfg.kwargs}


def is_atari(cfg: EnvConfig) -> bool:
    if cfg.atari is not None:
        return cfg.atari
    # gym's v4 ids: XNoFrameskip-v4, and XDeterministic-v4 (RLlib's tuned files): its fixed 4-frame skip is the
    # preprocessing's frame_skip here (ale_kwargs makes the emulator skip none)
    return cfg.id.startswith("ALE/") or "NoFrameskip" in cfg.id or "Deterministic-v" in cfg.id


def frame_stacked(cfg: EnvConfig) -> bool:
    """Whether observations are frame stacks that actors send as de-duplicated frames (and replay
    shards store with ``FramePrioritizedReplay``); actors and the assembly of shards use this one test."""
    return is_atari(cfg) and cfg.frame_stack > 1


def make_atari(cfg: EnvConfig, training: bool, render_mode: str | None,
               raw_make: Callable[..., gym.Env]) -> gym.Env:
    env = raw_make(cfg, render_mode=render_mode, **ale_kwargs(cfg))
    env = AtariPreprocessing(
        env,
        noop_max=cfg.noop_max,
        frame_skip=cfg.frame_skip,
        screen_size=cfg.screen_size,
        terminal_on_life_loss=False,  # see LifeLossTerminal
        grayscale_obs=True,
        scale_obs=False,  # uint8 until the network scales it
    )
    if training and cfg.terminal_on_life_loss:
        env = LifeLossTerminal(env)
    if training and cfg.clip_rewards:
        env = TransformReward(env, lambda r: float(np.sign(r)))
    env = FrameStackObservation(env, cfg.frame_stack)
    return env
