"""Q-networks: an MLP or Nature-CNN torso under a dueling head (noisy, distributional where asked).

A network maps a batch of observations to Q-values ``[B, num_actions]``. Image observations stay uint8
until the network scales them, so replay and Ray transfers carry 1 byte per pixel.
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from apexrl.agents.dqn.distributional import support
from apexrl.agents.dqn.noisy import NoisyLinear
from apexrl.agents.dqn.numpy_q import torso_kind
from apexrl.agents.encoders import MaskedQ, StructuredEncoder
from apexrl.config import NetworkConfig
from apexrl.envs.spaces import ObservationCodec, codec_of


def linear_layer(noisy: bool, sigma0: float) -> Callable[[int, int], nn.Module]:
    return (lambda i, o: NoisyLinear(i, o, sigma0)) if noisy else nn.Linear


class DuelingHead(nn.Module):
    """Q(s, a) = V(s) + A(s, a) - mean_a A(s, a)  (Wang et al., 2016, eq. 9); with ``atoms`` > 1 the same per
    atom, over distributions' logits or quantiles, as Rainbow does."""

    def __init__(self, in_features: int, num_actions: int, hidden: int, atoms: int = 1, noisy: bool = False,
                 sigma0: float = 0.5) -> None:
        super().__init__()
        lin = linear_layer(noisy, sigma0)
        self.num_actions, self.atoms = num_actions, atoms
        self.value = nn.Sequential(lin(in_features, hidden), nn.ReLU(), lin(hidden, atoms))
        self.advantage = nn.Sequential(lin(in_features, hidden), nn.ReLU(), lin(hidden, num_actions * atoms))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        adv = self.advantage(h)
        if self.atoms == 1:
            return self.value(h) + adv - adv.mean(dim=1, keepdim=True)
        adv = adv.view(-1, self.num_actions, self.atoms)
        return self.value(h).unsqueeze(1) + adv - adv.mean(dim=1, keepdim=True)


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
    """Torso -> (dueling or plain) head with ``head_hidden`` units per stream. ``forward`` gives Q-values
    [B, A] whatever the head; a distributional head (``distributional.py``) also gives its raw output [B, A, N]
    (``distribution``: C51's logits or QR-DQN's quantiles) and what actors need (``acting_outputs``)."""

    def __init__(self, torso: nn.Module, out_features: int, num_actions: int, head_hidden: int, dueling: bool,
                 net: NetworkConfig | None = None) -> None:
        super().__init__()
        self.torso = torso
        self.kind = net.distribution if net is not None else "expectation"
        self.distributional = self.kind != "expectation"
        atoms = net.num_atoms if self.distributional else 1  # type: ignore[union-attr]
        noisy, sigma0 = (net.noisy, net.sigma0) if net is not None else (False, 0.5)
        self.num_actions, self.atoms = num_actions, atoms
        self.v_range = (net.v_min, net.v_max) if net is not None else (-10.0, 10.0)
        if dueling:
            self.head: nn.Module = DuelingHead(out_features, num_actions, head_hidden, atoms, noisy, sigma0)
        else:
            lin = linear_layer(noisy, sigma0)
            self.head = nn.Sequential(lin(out_features, head_hidden), nn.ReLU(),
                                      lin(head_hidden, num_actions * atoms))
        if self.kind == "categorical":
            self.register_buffer("z", torch.as_tensor(support(net.v_min, net.v_max, atoms)),  # type: ignore[union-attr]
                                 persistent=False)

    def distribution(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.torso(x)).view(-1, self.num_actions, self.atoms)

    def q_from(self, raw: torch.Tensor) -> torch.Tensor:
        if self.kind == "categorical":
            return torch.softmax(raw, dim=-1) @ self.z
        return raw.mean(dim=-1)

    def acting_outputs(self, x: torch.Tensor) -> torch.Tensor:
        """Q-values, or C51's probabilities / the quantiles per action (``distributional.ValueHead``)."""
        if not self.distributional:
            return self(x)
        raw = self.distribution(x)
        return torch.softmax(raw, dim=-1) if self.kind == "categorical" else raw

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.distributional:
            return self.head(self.torso(x))
        return self.q_from(self.distribution(x))


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
    q = QNetwork(torso, torso.out_features, n, cfg.head, cfg.dueling, cfg)  # type: ignore[arg-type]
    codec = codec_of(observation_space)
    return MaskedQ(codec, q, structured_input=False) if codec is not None else q
