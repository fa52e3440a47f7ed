"""A torch Q-network as the policy's Q-function: CNN torsos, structured observations, users' models,
GPU or bfloat16 actors (the built-in MLP on the CPU acts in numpy, ``numpy_q.py``)."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import torch

from apexrl.agents.dqn.noisy import set_noise
from apexrl.core import Weights, load_numpy_state_dict


def _native_bf16() -> bool:
    """Whether oneDNN runs bfloat16 on this CPU natively (AVX512-BF16 or AMX); elsewhere it is emulated, slower."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


class TorchQ:
    """Q-values (a distributional head's per-atom outputs) as float32 numpy arrays on the CPU, whatever device and
    precision the forward pass ran in."""

    def __init__(self, net: torch.nn.Module, precision: str = "float32", device: str | torch.device = "cpu",
                 noise: bool = True) -> None:
        """``noise``: noisy layers sample (actors) or play their means (greedy evaluation)."""
        self.device = torch.device(device)
        self.net = set_noise(net.to(self.device), noise)
        self.net.eval()
        self._forward = getattr(self.net, "acting_outputs", self.net)  # distributional heads: per-atom outputs
        self._image = any(p.dim() == 4 for p in net.parameters())
        if self._image:  # oneDNN's convolutions run ~1.2-1.4x faster on CPU in channels-last layout
            self.net.to(memory_format=torch.channels_last)
        if precision == "auto":
            precision = "bfloat16" if self.device.type == "cpu" and _native_bf16() else "float32"
        self._autocast = (torch.autocast(self.device.type, dtype=torch.bfloat16) if precision == "bfloat16"
                          else contextlib.nullcontext())
        self.legal_actions: Any = getattr(net, "legal_actions", None)  # action masks (encoders.MaskedQ)

    def load(self, weights: Weights) -> None:
        load_numpy_state_dict(self.net, weights)

    @torch.no_grad()
    def __call__(self, obs: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(obs).to(self.device, non_blocking=True)
        if self._image and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        with self._autocast:
            return self._forward(x).float().cpu().numpy()
