"""The built-in MLP Q-network's forward pass in numpy (and MinAtar's one-conv torso), for processes that only act.

An actor or the driver's evaluator acting with an MLP needs no gradients, no device and no torch: a
few small matrix products per step. Loading torch cost each such process ~1 s of CPU at start-up and
~150 MB of memory (PSS), on a 2-core laptop the better part of a small run's start-up; numpy also runs
a CartPole-sized forward pass for a few envs in a fraction of torch's per-call overhead. The layout and
weight names are ``networks.QNetwork``'s over an ``MLPTorso`` (what the learner publishes), so weights
load unchanged; ``tests/agents/dqn/test_numpy_q.py`` checks the outputs against the torch network.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import gymnasium as gym
import numpy as np

from apexrl.config import Config, NetworkConfig
from apexrl.core import Weights
from apexrl.envs.spaces import codec_of


def is_image_space(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def torso_kind(observation_space: gym.Space, net: NetworkConfig) -> str:
    """The torso ``network.kind`` gives these observations: "structured" (per-leaf encoders, then an MLP),
    else the kind asked for, where auto is the Nature CNN or MinAtar's conv for uint8 images (the Nature
    CNN's 8x8/4, 4x4/2, 3x3 convs need at least 36x36 pixels) and an MLP otherwise. ``networks.build_torso``
    builds it; the acting side decides from it whether torch is needed."""
    if codec_of(observation_space) is not None:
        return "structured"
    if net.kind != "auto":
        return net.kind
    if not is_image_space(observation_space):
        return "mlp"
    return "nature_cnn" if min(observation_space.shape[1:]) >= 36 else "minatar"  # type: ignore[index]


def mlp_in_features(observation_space: gym.Space, net: NetworkConfig) -> int | None:
    """Input width of the MLP torso the config builds for these observations, None if it builds another."""
    if observation_space.shape is None or torso_kind(observation_space, net) != "mlp":
        return None
    return int(np.prod(observation_space.shape))


def numpy_acting(cfg: Config, observation_space: gym.Space, has_model_factory: bool, device: str = "cpu",
                 precision: str = "float32") -> bool:
    """Whether a process that acts with this network can do without torch: the built-in MLP or MinAtar's
    one-conv torso (no user model, no Nature CNN or structured torso) in float32 on the CPU (``auto`` is the
    CPU for these small networks)."""
    small = mlp_in_features(observation_space, cfg.network) is not None or (
        torso_kind(observation_space, cfg.network) == "minatar" and len(observation_space.shape or ()) == 3)
    return (not has_model_factory and small and device in ("cpu", "auto") and precision in ("float32", "auto"))


class _MinAtarConv:
    """``networks.MinAtarTorso`` in numpy: one 3x3 valid convolution of [B, C, H, W] grids, ReLU, flattened in
    torch's channel-major order."""

    def __init__(self, channels: int, height: int, width: int, out_channels: int, rng: np.random.Generator) -> None:
        bound = 1.0 / np.sqrt(channels * 9)
        self.params = {"torso.net.0.weight": rng.uniform(-bound, bound, (out_channels, channels, 3, 3)).astype(np.float32),
                       "torso.net.0.bias": rng.uniform(-bound, bound, out_channels).astype(np.float32)}
        self.out_features = out_channels * (height - 2) * (width - 2)

    def __call__(self, params: dict[str, np.ndarray], obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs, dtype=np.float32)
        w = params["torso.net.0.weight"]
        windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))  # [B, C, H-2, W-2, 3, 3]
        b, c, h, wd = windows.shape[:4]
        cols = windows.transpose(0, 2, 3, 1, 4, 5).reshape(b * h * wd, c * 9)  # one row per output pixel
        y = cols @ w.reshape(len(w), -1).T + params["torso.net.0.bias"]  # [B*H'*W', O]
        y = np.maximum(y, 0.0, out=y).reshape(b, h * wd, len(w))
        return y.transpose(0, 2, 1).reshape(b, -1)


_ACT = {"relu": lambda x: np.maximum(x, 0.0, out=x), "tanh": lambda x: np.tanh(x, out=x), "linear": lambda x: x}


@dataclass
class _Layer:
    name: str  # the torch module's prefix: "<name>.weight", "<name>.bias" (noisy: "<name>.weight_mu", ...)
    fan_in: int
    fan_out: int
    noisy: bool = False


def _noise(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal(n).astype(np.float32)
    return np.sign(x) * np.sqrt(np.abs(x))


class NumpyQNetwork:
    """The head's outputs [B, A] (Q) or [B, A, N] (C51's probabilities, QR-DQN's quantiles), float32, of the
    dueling or plain head over the MLP torso; noisy head layers (``noisy.py``) sample fresh noise per call
    while ``noise`` is on."""

    def __init__(self, in_features: int, num_actions: int, net: NetworkConfig, seed: int,
                 conv: tuple[int, int, int] | None = None) -> None:
        """``conv``: MinAtar's [C, H, W] grids go through its one-conv torso first (no MLP torso then)."""
        self.conv = _MinAtarConv(*conv, 16, np.random.default_rng(seed + 1)) if conv is not None else None
        if self.conv is not None:
            in_features, net = self.conv.out_features, replace(net, torso=())
        self.activation = _ACT[net.activation]
        self.dueling = net.dueling
        self.kind = net.distribution
        self.atoms = net.num_atoms if self.kind != "expectation" else 1
        self.num_actions = num_actions
        self.noise = net.noisy
        self.rng = np.random.default_rng(seed + 7919)
        self.torso: list[_Layer] = []
        width = in_features
        for i, h in enumerate(net.torso):
            self.torso.append(_Layer(f"torso.net.{1 + 2 * i}", width, h))  # net.0 is the Flatten
            width = h
        n, k, noisy = self.atoms, num_actions * self.atoms, net.noisy
        if net.dueling:
            self.value = [_Layer("head.value.0", width, net.head, noisy), _Layer("head.value.2", net.head, n, noisy)]
            self.advantage = [_Layer("head.advantage.0", width, net.head, noisy),
                              _Layer("head.advantage.2", net.head, k, noisy)]
        else:
            self.value, self.advantage = [], [_Layer("head.0", width, net.head, noisy),
                                              _Layer("head.2", net.head, k, noisy)]
        rng = np.random.default_rng(seed)
        self.params: dict[str, np.ndarray] = {}
        for layer in self.torso + self.value + self.advantage:  # torch.nn.Linear's default initialisation
            bound = 1.0 / np.sqrt(layer.fan_in)
            w, b = (f"{layer.name}.weight_mu", f"{layer.name}.bias_mu") if layer.noisy else (
                f"{layer.name}.weight", f"{layer.name}.bias")
            self.params[w] = rng.uniform(-bound, bound, (layer.fan_out, layer.fan_in)).astype(np.float32)
            self.params[b] = rng.uniform(-bound, bound, layer.fan_out).astype(np.float32)
            if layer.noisy:
                self.params[f"{layer.name}.weight_sigma"] = np.full((layer.fan_out, layer.fan_in),
                                                                    net.sigma0 * bound, np.float32)
                self.params[f"{layer.name}.bias_sigma"] = np.full(layer.fan_out, net.sigma0 * bound, np.float32)
        if self.conv is not None:
            self.params.update(self.conv.params)

    def load(self, weights: Weights) -> None:
        """Take the learner's published weights; a mismatch names the first key that does not fit."""
        for key, mine in self.params.items():
            got = weights.get(key)
            if got is None or tuple(np.shape(got)) != mine.shape:
                shape = None if got is None else tuple(np.shape(got))
                raise ValueError(f"weights do not fit the actors' MLP Q-network: '{key}' is {shape}, expected "
                                 f"{mine.shape} (the learner's network and network.* must match)")
        self.params = {k: np.ascontiguousarray(weights[k], dtype=np.float32) for k in self.params}

    def state_dict(self) -> Weights:
        """The weights under the torch network's names (what ``load`` takes)."""
        return {k: v.copy() for k, v in self.params.items()}

    def _linear(self, x: np.ndarray, layer: _Layer) -> np.ndarray:
        if not layer.noisy:
            y = x @ self.params[f"{layer.name}.weight"].T
            y += self.params[f"{layer.name}.bias"]
            return y
        p = f"{layer.name}."
        if not self.noise:
            return x @ self.params[p + "weight_mu"].T + self.params[p + "bias_mu"]
        eps_in, eps_out = _noise(self.rng, layer.fan_in), _noise(self.rng, layer.fan_out)
        w = self.params[p + "weight_mu"] + self.params[p + "weight_sigma"] * np.outer(eps_out, eps_in)
        return x @ w.T + (self.params[p + "bias_mu"] + self.params[p + "bias_sigma"] * eps_out)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        if self.conv is not None:
            h = self.conv(self.params, obs)
        else:
            h = np.asarray(obs).reshape(len(obs), -1).astype(np.float32, copy=False)
        for layer in self.torso:
            h = self.activation(self._linear(h, layer))
        adv = self._linear(np.maximum(self._linear(h, self.advantage[0]), 0.0), self.advantage[1])
        if self.atoms > 1:
            adv = adv.reshape(len(h), self.num_actions, self.atoms)
        if self.dueling:
            value = self._linear(np.maximum(self._linear(h, self.value[0]), 0.0), self.value[1])
            adv = (value[:, None, :] if self.atoms > 1 else value) + adv - adv.mean(axis=1, keepdims=True)
        if self.kind == "categorical":
            e = np.exp(adv - adv.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)
        return adv


def numpy_q_network(cfg: Config, observation_space: gym.Space, action_space: gym.Space, seed: int) -> NumpyQNetwork:
    in_features = mlp_in_features(observation_space, cfg.network)
    if in_features is None and torso_kind(observation_space, cfg.network) == "minatar":
        c, h, w = observation_space.shape  # type: ignore[misc]
        return NumpyQNetwork(0, int(action_space.n), cfg.network, seed, conv=(c, h, w))  # type: ignore[attr-defined]
    if in_features is None:
        raise ValueError(f"observation space {observation_space} does not get the MLP torso")
    return NumpyQNetwork(in_features, int(action_space.n), cfg.network, seed)  # type: ignore[attr-defined]


__all__ = ["NumpyQNetwork", "is_image_space", "mlp_in_features", "numpy_acting", "numpy_q_network", "torso_kind"]
