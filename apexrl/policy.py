"""Acting without torch: Q-values as numpy in, numpy out.

Actors and the evaluator only run forward passes. For the built-in MLP network they do it in numpy with
the learner's published weights (already numpy dicts), so their processes never import torch: ~1.5 s of
CPU each at start-up, on a 2-core host the same cores the learner needs to start (and, for the evaluator,
to learn). Custom ``model_factory`` networks and the Nature CNN stay in torch through :class:`TorchQ`.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from apexrl.config import NetworkConfig


class QFunction(Protocol):
    def __call__(self, obs: np.ndarray) -> np.ndarray: ...


class NumpyQNetwork:
    """The forward pass of ``networks.build_network`` for an MLP torso (plain or dueling head), in numpy
    float32, loading the same state-dict keys. Tests check it against the torch network."""

    def __init__(self, in_features: int, num_actions: int, hidden_sizes: tuple[int, ...], dueling: bool,
                 seed: int = 0) -> None:
        self.in_features, self.num_actions, self.dueling = in_features, num_actions, dueling
        torso, head = list(hidden_sizes[:-1]), hidden_sizes[-1]
        shapes: dict[str, tuple[int, int]] = {}
        n = in_features
        for i, h in enumerate(torso):
            shapes[f"torso.net.{2 * i + 1}"] = (h, n)  # Sequential(Flatten, Linear, ReLU, Linear, ReLU, ...)
            n = h
        if dueling:
            shapes.update({"head.value.0": (head, n), "head.value.2": (1, head),
                           "head.advantage.0": (head, n), "head.advantage.2": (num_actions, head)})
        else:
            shapes.update({"head.0": (head, n), "head.2": (num_actions, head)})
        self.shapes = {**{f"{k}.weight": s for k, s in shapes.items()}, **{f"{k}.bias": (s[0],) for k, s in shapes.items()}}
        self._torso_keys = [k for k in shapes if k.startswith("torso.")]
        rng = np.random.default_rng(seed)
        init = {}
        for k, (o, i) in shapes.items():  # torch.nn.Linear's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
            bound = 1.0 / np.sqrt(i)
            init[f"{k}.weight"] = rng.uniform(-bound, bound, (o, i)).astype(np.float32)
            init[f"{k}.bias"] = rng.uniform(-bound, bound, o).astype(np.float32)
        self.load(init)

    def load(self, weights: dict[str, np.ndarray]) -> None:
        if set(weights) != set(self.shapes):
            missing, extra = sorted(set(self.shapes) - set(weights)), sorted(set(weights) - set(self.shapes))
            raise ValueError(f"weights do not fit this MLP Q-network: missing {missing}, unexpected {extra}")
        for k, shape in self.shapes.items():
            if tuple(np.shape(weights[k])) != shape:
                raise ValueError(f"weight '{k}' has shape {tuple(np.shape(weights[k]))}, this network needs {shape}")
        w = {k: np.ascontiguousarray(np.asarray(v, dtype=np.float32)) for k, v in weights.items()}
        self._torso = [(w[f"{k}.weight"].T.copy(), w[f"{k}.bias"]) for k in self._torso_keys]
        if self.dueling:
            # Both heads' hidden layers read the same input: one matmul for the two.
            self._hidden = (np.concatenate([w["head.value.0.weight"], w["head.advantage.0.weight"]]).T.copy(),
                            np.concatenate([w["head.value.0.bias"], w["head.advantage.0.bias"]]))
            self._value = (w["head.value.2.weight"].T.copy(), w["head.value.2.bias"])
            self._adv = (w["head.advantage.2.weight"].T.copy(), w["head.advantage.2.bias"])
        else:
            self._hidden = (w["head.0.weight"].T.copy(), w["head.0.bias"])
            self._out = (w["head.2.weight"].T.copy(), w["head.2.bias"])
        self._weights = w

    def state_dict(self) -> dict[str, np.ndarray]:
        return dict(self._weights)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        h = np.asarray(obs, dtype=np.float32).reshape(len(obs), -1)
        for W, b in self._torso:
            h = np.maximum(h @ W + b, 0.0)
        W, b = self._hidden
        h = np.maximum(h @ W + b, 0.0)
        if not self.dueling:
            W, b = self._out
            return h @ W + b
        k = self._value[0].shape[0]
        value = h[:, :k] @ self._value[0] + self._value[1]
        adv = h[:, k:] @ self._adv[0] + self._adv[1]
        return value + adv - adv.mean(axis=1, keepdims=True)


def is_image_space(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def resolved_kind(cfg: NetworkConfig, observation_space: gym.Space) -> str:
    """``network.kind`` with ``auto`` decided: the Nature CNN for uint8 images, else an MLP."""
    if cfg.kind != "auto":
        return cfg.kind
    return "nature_cnn" if is_image_space(observation_space) else "mlp"


def numpy_network(cfg: NetworkConfig, observation_space: gym.Space, action_space: gym.Space,
                  seed: int = 0) -> NumpyQNetwork | None:
    """The numpy twin of ``build_network(observation_space, action_space, cfg)``, or None where there is
    none (image observations, the Nature CNN): those act in torch."""
    if not isinstance(action_space, gym.spaces.Discrete) or observation_space.shape is None:
        return None
    if resolved_kind(cfg, observation_space) != "mlp":
        return None
    return NumpyQNetwork(int(np.prod(observation_space.shape)), int(action_space.n), tuple(cfg.hidden_sizes),
                         cfg.dueling, seed)


class TorchQ:
    """A torch Q-network as a :class:`QFunction` (no autograd; outputs moved to numpy)."""

    def __init__(self, net: Any) -> None:
        import torch

        self._torch = torch
        self.net = net
        net.eval()

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        with self._torch.no_grad():
            return self.net(self._torch.as_tensor(obs)).cpu().numpy()

    def load(self, weights: dict[str, np.ndarray]) -> None:
        from apexrl.networks import load_numpy_state_dict

        load_numpy_state_dict(self.net, weights)

    def state_dict(self) -> dict[str, np.ndarray]:
        from apexrl.networks import state_dict_to_numpy

        return state_dict_to_numpy(self.net)


def q_function(net: Any) -> QFunction:
    """``net`` as numpy in, numpy out: a torch module is wrapped; anything else is taken to be a QFunction
    already (a NumpyQNetwork, a TorchQ, or a plain function)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(net, torch.nn.Module):
        return TorchQ(net)
    return net  # type: ignore[no-any-return]
