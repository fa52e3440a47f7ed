"""Actors' Atari envs stepped in C++: ale-py's ``AtariVectorEnv`` with the DQN protocol of ``atari.py``.

The gymnasium path spends most of an env step in Python wrappers (preprocessing, frame stacking, the
vector env's bookkeeping); ale-py does the same work in C++, with the GIL released while it steps.
Only actors use it: evaluation keeps the gymnasium path (whole games, raw scores, videos).

Same protocol as the gymnasium path: 1..noop_max no-ops at reset, action repeat with a max-pool over the
last two frames, 84x84 grayscale, a stack of the last K frames, the 108k-frame cap, no sticky actions,
the minimal action set, no FIRE at reset. In training, a lost life is terminal while the game goes on
(``life_loss_info``: ale-py's ``episodic_life`` would restart the game instead) and rewards are clipped
(ale-py clips to [-1, 1]; ALE rewards are integers, so this is their sign). Two differences, neither
visible to the learner: a reset stack is padded with zeros instead of copies of the first frame, and
after a lost life the stack continues instead of restarting. The frame encoder handles both.

ale-py 0.12's ``SAME_STEP`` autoreset gives a stale ``final_obs`` when a lost life ends an episode but
not the game (the returned observation is then the true last one, and the game continues from it);
:class:`_LifeLossFinalObs` puts that observation into ``final_obs``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from apexrl.config import EnvConfig
from apexrl.envs.atari import is_atari
from apexrl.envs.scores import snake_name as rom_name


def ale_vector_reason(cfg: EnvConfig) -> str | None:
    """Why ``cfg`` cannot use the C++ vector env (None: it can)."""
    if not is_atari(cfg):
        return "it is not an Atari env"
    try:
        from ale_py import roms
        from ale_py.vector_env import AtariVectorEnv  # noqa: F401
    except ImportError as e:  # pragma: no cover - ale-py is a dependency
        return f"ale-py has no vector env ({e})"
    rom = rom_name(cfg.id)
    if rom is None:
        return f"'{cfg.id}' is not an ALE game id"
    try:
        if roms.get_rom_path(rom) is None:
            return f"ale-py has no ROM '{rom}'"
    except Exception as e:
        return f"ale-py has no ROM '{rom}' ({e})"
    extra = set(cfg.kwargs) - {"repeat_action_probability", "full_action_space"}
    if extra:
        return f"env.kwargs {sorted(extra)} are only passed on by the gymnasium path"
    if cfg.max_episode_steps is not None:
        return "env.max_episode_steps is only applied by the gymnasium path"
    return None


def make_ale_vector(cfg: EnvConfig, num_envs: int, threads: int = 1) -> VectorEnv:
    """``num_envs`` training envs stepped together in C++ (``SAME_STEP`` autoreset, ``info["final_obs"]``)."""
    from ale_py.vector_env import AtariVectorEnv

    kwargs: dict[str, Any] = {
        "repeat_action_probability": float(cfg.kwargs.get("repeat_action_probability", 0.0)),
        "full_action_space": bool(cfg.kwargs.get("full_action_space", False)),
    }
    return _LifeLossFinalObs(AtariVectorEnv(
        rom_name(cfg.id), num_envs, num_threads=threads, autoreset_mode=AutoresetMode.SAME_STEP,
        max_num_frames_per_episode=cfg.max_episode_frames, img_height=cfg.screen_size,
        img_width=cfg.screen_size, grayscale=True, stack_num=cfg.frame_stack, frameskip=cfg.frame_skip,
        maxpool=True, noop_max=cfg.noop_max, episodic_life=False, life_loss_info=cfg.terminal_on_life_loss,
        reward_clipping=cfg.clip_rewards, use_fire_reset=False, **kwargs))


class _LifeLossFinalObs(VectorWrapper):
    """``info["final_obs"]`` right for every ended env: an env whose episode clock went on (a lost life,
    the game continues) ended on the observation the step returned."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._clock = np.array(info["episode_frame_number"], dtype=np.int64)
        return obs, info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        clock = np.asarray(info["episode_frame_number"], dtype=np.int64)
        went_on = (terminated | truncated) & (clock > self._clock)
        self._clock = clock
        if went_on.any():
            final = np.array(info["final_obs"])
            final[went_on] = obs[went_on]
            info = {**info, "final_obs": final}
        return obs, reward, terminated, truncated, info
