"""Q-networks: an MLP or Nature-CNN torso under a dueling head.

A network maps a batch of observations to Q-values ``[B, num_actions]``. Image observations stay uint8
until the network scales them, so replay and Ray transfers carry 1 byte per pixel.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from apexrl.agents.dqn.numpy_q import torso_kind
from apexrl.agents.encoders import MaskedQ, StructuredEncoder
from apexrl.config import NetworkConfig
from apexrl.envs.spaces import ObservationCodec, codec_of


class DuelingHead(nn.Module):
    """Q(s, a) = V(s) + A(s, a) - mean_a A(s, a)  (Wang et al., 2016, eq. 9)."""

    def __init__(self, in_features: int, num_actions: int, hidden: int) -> None:
        super().__init__()
        self.value = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.advantage = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, num_actions))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        adv = self.advantage(h)
        return self.value(h) + adv - adv.mean(dim=1, keepdim=True)


ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "linear": nn.Identity}


class MLPTorso(nn.Module):
    def __init__(self, in_features: int, sizes: tuple[int, ...], activation: str = "relu") -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for h in sizes:
            layers += [nn.Linear(in_features, h), ACTIVATIONS[activation]()]
            in_features = h
        self.net = nn.Sequential(nn.Flatten(), *layers)
        self.out_features = in_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = next(self.parameters(), None)  # float32, or float64 where a test runs the network in double
        return self.net(x.to(w.dtype) if w is not None else x.float())


class NatureCNNTorso(nn.Module):
    """Mnih et al. (2015): 3 conv layers on [B, C, 84, 84] uint8 frames, scaled to [0, 1] here."""

    def __init__(self, in_channels: int, height: int, width: int) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            self.out_features = int(self.net(torch.zeros(1, in_channels, height, width)).shape[1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.float()  # a new tensor for uint8 input; for float32 input x itself, which must not be written
        return self.net(y * (1.0 / 255.0) if x.dtype == torch.float32 else y.mul_(1.0 / 255.0))


class MinAtarTorso(nn.Module):
    """Young & Tian (2019)'s DQN torso for 10x10 MinAtar grids: one 3x3 conv with 16 channels. Cells are
    0/1 already, so no scaling."""

    def __init__(self, in_channels: int, height: int, width: int, channels: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(in_channels, channels, 3, stride=1), nn.ReLU(), nn.Flatten())
        self.out_features = channels * (height - 2) * (width - 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.float())


class QNetwork(nn.Module):
    """Torso -> (dueling or plain) head with ``head_hidden`` units per stream."""

    def __init__(self, torso: nn.Module, out_features: int, num_actions: int, head_hidden: int, dueling: bool):
        super().__init__()
        self.torso = torso
        if dueling:
            self.head: nn.Module = DuelingHead(out_features, num_actions, head_hidden)
        else:
            self.head = nn.Sequential(nn.Linear(out_features, head_hidden), nn.ReLU(),
                                      nn.Linear(head_hidden, num_actions))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.torso(x))


class StructuredTorso(nn.Module):
    """Per-leaf encoders of a structured observation (``apexrl.agents.encoders``), then the MLP torso."""

    def __init__(self, codec: ObservationCodec, sizes: tuple[int, ...], activation: str = "relu") -> None:
        super().__init__()
        self.encoder = StructuredEncoder(codec)
        self.mlp = MLPTorso(self.encoder.out_features, sizes, activation)
        self.out_features = self.mlp.out_features

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.encoder(rows))


def build_torso(observation_space: gym.Space, cfg: NetworkConfig) -> nn.Module:
    """The torso ``network.kind`` asks for (``numpy_q.torso_kind``: auto is the Nature CNN or MinAtar's conv
    for uint8 images, an MLP otherwise; structured observations: per-leaf encoders, then the MLP); it has
    ``out_features``."""
    kind = torso_kind(observation_space, cfg)
    if kind == "structured":
        return StructuredTorso(codec_of(observation_space), cfg.torso, cfg.activation)  # type: ignore[arg-type]
    shape = observation_space.shape
    if shape is None:
        raise ValueError(f"observation space {observation_space} has no shape; DQN needs array observations")
    if kind in ("nature_cnn", "minatar"):
        if len(shape) != 3:
            raise ValueError(f"network.kind={kind} needs [C, H, W] observations, got shape {shape}")
        return (NatureCNNTorso if kind == "nature_cnn" else MinAtarTorso)(shape[0], shape[1], shape[2])
    return MLPTorso(int(np.prod(shape)), cfg.torso, cfg.activation)


def build_network(observation_space: gym.Space, action_space: gym.Space, cfg: NetworkConfig) -> nn.Module:
    if not isinstance(action_space, gym.spaces.Discrete):
        raise ValueError(f"DQN needs a discrete action space, got {action_space}")
    n = int(action_space.n)
    torso = build_torso(observation_space, cfg)
    q = QNetwork(torso, torso.out_features, n, cfg.head, cfg.dueling)  # type: ignore[arg-type]
    codec = codec_of(observation_space)
    return MaskedQ(codec, q, structured_input=False) if codec is not None else q
