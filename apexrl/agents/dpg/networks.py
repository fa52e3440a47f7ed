"""Ape-X DPG's networks: a deterministic policy and one or two critics in one module, so that actors
(which act with the policy and prioritize with the critics) and the learner share one set of weights.

A DPG model, built here or by a user's ``model_factory``, is an ``nn.Module`` with
  * ``forward(obs) -> action`` in [-1, 1] (the env's bounds are applied outside the network),
  * ``pi``: the submodule holding the policy's parameters (the actor optimizer's; the rest are the critics'),
  * ``q(obs, action) -> [C, B]`` values of C >= 1 critics (two for clipped double Q).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from apexrl.agents.encoders import StructuredEncoder, unpack
from apexrl.envs.spaces import ObservationCodec, codec_of


def _mlp(sizes: Sequence[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class ActorCritic(nn.Module):
    """``codec``: structured observations (packed rows); the policy and the critics then each read them
    through their own per-leaf encoder (``apexrl.agents.encoders``), so each optimizer owns its encoder."""

    def __init__(self, obs_dim: int, action_shape: tuple[int, ...], hidden: Sequence[int], critics: int = 2,
                 codec: ObservationCodec | None = None) -> None:
        super().__init__()
        self.action_shape = tuple(action_shape)
        act_dim = math.prod(self.action_shape)
        self.structured = codec is not None
        if codec is not None:
            pi_encoder, self.critic_encoder = StructuredEncoder(codec), StructuredEncoder(codec)
            obs_dim = pi_encoder.out_features
            self.pi = nn.Sequential(pi_encoder, _mlp([obs_dim, *hidden, act_dim]), nn.Tanh())
        else:
            self.pi = nn.Sequential(_mlp([obs_dim, *hidden, act_dim]), nn.Tanh())
        self.critics = nn.ModuleList(_mlp([obs_dim + act_dim, *hidden, 1]) for _ in range(critics))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.pi(obs if self.structured else obs.flatten(1).float()).view(-1, *self.action_shape)

    def q(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        h = self.critic_encoder(obs) if self.structured else obs.flatten(1).float()
        x = torch.cat([h, action.flatten(1).float()], dim=1)
        return torch.stack([c(x).squeeze(1) for c in self.critics])


class StructuredModel(nn.Module):
    """A user's DPG model on packed rows: it receives the observation's structure of tensors."""

    def __init__(self, codec: ObservationCodec, inner: nn.Module) -> None:
        super().__init__()
        self.codec, self.inner = codec, inner

    @property
    def pi(self) -> nn.Module:  # the policy's parameters, for the actor optimizer
        return self.inner.pi  # type: ignore[return-value]

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        return self.inner(unpack(self.codec, rows))

    def q(self, rows: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.inner.q(unpack(self.codec, rows), action)  # type: ignore[operator]


def build_actor_critic(observation_space: gym.Space, action_space: gym.Space, hidden: Sequence[int],
                       critics: int) -> ActorCritic:
    codec = codec_of(observation_space)
    obs_dim = 0 if codec is not None else int(np.prod(observation_space.shape))  # type: ignore[arg-type]
    return ActorCritic(obs_dim, tuple(action_space.shape), hidden, critics, codec)  # type: ignore[arg-type]


class ActionScale:
    """The affine map between the networks' [-1, 1] actions and the env's [low, high] box."""

    def __init__(self, action_space: gym.spaces.Box) -> None:
        low = np.asarray(action_space.low, dtype=np.float64)
        high = np.asarray(action_space.high, dtype=np.float64)
        self.mid, self.half = (high + low) / 2, (high - low) / 2
        self.low, self.high, self.dtype = low, high, action_space.dtype

    def to_env(self, unit: np.ndarray) -> np.ndarray:
        return np.clip(self.mid + self.half * unit, self.low, self.high).astype(self.dtype)

    def to_unit(self, action: np.ndarray) -> np.ndarray:
        return ((np.asarray(action, dtype=np.float64) - self.mid) / self.half).astype(np.float32)
