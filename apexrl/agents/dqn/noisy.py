"""Noisy linear layers (Fortunato et al., 2018, factorised Gaussian noise): exploration learned per weight.

W = mu_W + sigma_W * (f(eps_out) outer f(eps_in)), b = mu_b + sigma_b * f(eps_out), f(x) = sign(x) sqrt(|x|),
with fresh eps on every forward pass while the noise is on. Greedy evaluations switch it off (the means only);
the switch is an attribute, not ``Module.train/eval``, because actors run their networks in eval mode and still
explore through the noise. ``numpy_q.NumpyQNetwork`` mirrors the layer for actors that act without torch.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def scaled_noise(n: int, generator: torch.Generator | None = None, device: torch.device | None = None) -> torch.Tensor:
    x = torch.randn(n, generator=generator, device=device)
    return x.sign() * x.abs().sqrt()


class NoisyLinear(nn.Module):
    """A linear layer with learned noise scales; ``sigma0`` sets sigma's initial value sigma0 / sqrt(fan_in)."""

    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), sigma0 * bound))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), sigma0 * bound))
        self.noise = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.noise:
            return nn.functional.linear(x, self.weight_mu, self.bias_mu)
        eps_in = scaled_noise(self.in_features, device=x.device).to(x.dtype)
        eps_out = scaled_noise(self.out_features, device=x.device).to(x.dtype)
        weight = self.weight_mu + self.weight_sigma * torch.outer(eps_out, eps_in)
        return nn.functional.linear(x, weight, self.bias_mu + self.bias_sigma * eps_out)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, noise={self.noise}"


def set_noise(net: nn.Module, on: bool) -> nn.Module:
    """Noise on (actors, the learner) or off (greedy evaluation) in every noisy layer of ``net``."""
    for m in net.modules():
        if isinstance(m, NoisyLinear):
            m.noise = on
    return net


def has_noise(net: object) -> bool:
    return isinstance(net, nn.Module) and any(isinstance(m, NoisyLinear) for m in net.modules())
