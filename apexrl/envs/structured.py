"""The wrapper that turns a structured-observation env (or one with action masks) into a uint8-row env.

What the runtime sees is a ``PackedSpace``; what the network sees is the structure again (see
``apexrl.envs.spaces`` for why). An env whose observations are a plain numeric Box and that has no mask is
left as it is, so Atari, MinAtar and classic control keep their paths.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from apexrl.envs.contract import EnvContractError
from apexrl.envs.spaces import MASK_KEY, ObservationCodec, PackedSpace, needs_codec


class NoLegalActionError(EnvContractError):
    """The env's action mask left no legal action in a state that goes on."""


class StructuredObservation(gym.Wrapper):  # type: ignore[type-arg]
    def __init__(self, env: gym.Env, env_id: str, info_mask: bool, ignore: tuple[str, ...] = (),
                 codec: ObservationCodec | None = None) -> None:
        super().__init__(env)
        if codec is None:
            n = int(env.action_space.n) if isinstance(env.action_space, gym.spaces.Discrete) else None
            codec = ObservationCodec(env.observation_space, n, info_mask, ignore)
        self.codec = codec
        self.env_id = env_id
        self.observation_space = PackedSpace(self.codec)
        self._steps = 0
        if not self.codec.inputs:
            raise ValueError(f"env '{env_id}' has no numeric observation entries in {env.observation_space}")

    def _pack(self, obs: Any, info: dict[str, Any], goes_on: bool) -> np.ndarray:
        source = self.codec.mask_source
        mask = info.get(MASK_KEY) if source == "info" else obs[MASK_KEY] if source == "observation" else None
        row = self.codec.pack(obs, mask)
        if goes_on and source is not None and mask is not None:
            if not np.any(mask):
                raise NoLegalActionError(f"env '{self.env_id}' gave an action mask with no legal action at step "
                                         f"{self._steps} of an episode that goes on")
        return row

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._steps = 0
        return self._pack(obs, info, True), info

    def step(self, action: Any) -> tuple[np.ndarray, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        return self._pack(obs, info, not (terminated or truncated)), reward, terminated, truncated, info


def mask_source(env: gym.Env) -> str:
    """Where ``env``'s legal actions come from: ``observation`` (a Dict entry), ``info`` (its seeded reset's
    info has one) or ``none``; the one test behind ``env.action_mask: auto``, in the driver and in any env built
    with ``auto`` still in its config (``apexrl eval``, ``create_env``)."""
    space = env.observation_space
    if isinstance(space, gym.spaces.Dict) and MASK_KEY in space.spaces:
        return "observation"
    if not isinstance(env.action_space, gym.spaces.Discrete):
        return "none"  # info masks mean nothing to continuous actions: no reset to look
    try:
        info = env.reset(seed=0)[1]
    except Exception:  # the start-up check reports a failing reset with its cause
        return "none"
    return "info" if isinstance(info, dict) and MASK_KEY in info else "none"


def structure(env: gym.Env, env_id: str, action_mask: str, ignore: tuple[str, ...]) -> gym.Env:
    """``env`` with packed observations where its space or masks need them, else ``env`` itself."""
    if action_mask == "auto":
        action_mask = mask_source(env)
    codec = codec_for(env.observation_space, env.action_space, env_id, action_mask, ignore)
    if codec is None:
        return env
    return StructuredObservation(env, env_id, codec.mask_source == "info", ignore, codec)


def codec_for(space: gym.Space, action_space: gym.Space, env_id: str, action_mask: str,
              ignore: tuple[str, ...]) -> ObservationCodec | None:
    """How observations of ``space`` become rows (None: they stay as they are); ``action_mask`` is decided
    (observation | info | none). Raises ValueError with one line where masks and spaces disagree."""
    dict_mask = isinstance(space, gym.spaces.Dict) and MASK_KEY in space.spaces
    discrete = isinstance(action_space, gym.spaces.Discrete)
    info_mask = action_mask == "info"
    if action_mask == "none" and dict_mask:
        ignore = (*ignore, MASK_KEY)
    if action_mask == "observation" and not dict_mask:
        raise ValueError(f"env.action_mask is 'observation' but env '{env_id}' has no '{MASK_KEY}' entry in its "
                         f"observation space {space}")
    if not (needs_codec(space) or info_mask or ignore):
        return None
    if (info_mask or dict_mask and action_mask != "none") and not discrete:
        raise ValueError(f"env '{env_id}' gives action masks but has a {type(action_space).__name__} action "
                         "space; masks need Discrete actions (set env.action_mask=none)")
    codec = ObservationCodec(space, int(action_space.n) if discrete else None, info_mask, ignore)
    if not codec.inputs:
        raise ValueError(f"env '{env_id}' has no numeric observation entries in {space}")
    return codec
