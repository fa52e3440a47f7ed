"""Adam for the learner without ``torch.optim``.

``torch.optim`` imports torch's compiler (``torch._dynamo``, ~1.5 s of CPU) the first time an optimizer is
built or stepped, only to mark those functions as not-to-be-compiled. On a 2-core host that import was a
third of the learner's start-up and delayed the first update of every run. apexrl never compiles, so the
learner's default optimizer is this: the same update as ``torch.optim.Adam`` (tests/test_optim.py checks
that the parameters match step for step), through torch's fused Adam kernel where it exists and
``torch._foreach`` ops elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

from apexrl.config import LearnerConfig


class Adam:
    """Adam (Kingma & Ba, 2015) without weight decay or amsgrad, as ``torch.optim.Adam`` computes it."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, eps: float = 1e-8,
                 betas: tuple[float, float] = (0.9, 0.999)) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.eps, self.betas = float(lr), float(eps), (float(betas[0]), float(betas[1]))
        self.exp_avg = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.steps = [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.params]
        self._fused = hasattr(torch, "_fused_adam_") and all(p.device.type in ("cpu", "cuda") for p in self.params)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not live:
            return
        params = [self.params[i] for i in live]
        grads = [self.params[i].grad for i in live]
        m = [self.exp_avg[i] for i in live]
        v = [self.exp_avg_sq[i] for i in live]
        steps = [self.steps[i] for i in live]
        torch._foreach_add_(steps, 1.0)
        beta1, beta2 = self.betas
        if self._fused:
            torch._fused_adam_(params, grads, m, v, [], steps, lr=self.lr, beta1=beta1, beta2=beta2,  # type: ignore[attr-defined]
                               weight_decay=0.0, eps=self.eps, amsgrad=False, maximize=False)
            return
        torch._foreach_lerp_(m, grads, 1 - beta1)
        torch._foreach_mul_(v, beta2)
        torch._foreach_addcmul_(v, grads, grads, 1 - beta2)
        for p, mi, vi, s in zip(params, m, v, steps):
            t = float(s)
            step_size = self.lr / (1 - beta1 ** t)
            denom = (vi.sqrt() / math.sqrt(1 - beta2 ** t)).add_(self.eps)
            p.addcdiv_(mi, denom, value=-step_size)

    def state_dict(self) -> dict[str, Any]:
        return {"kind": "apexrl.Adam", "lr": self.lr, "eps": self.eps, "betas": self.betas,
                "exp_avg": [t.cpu().clone() for t in self.exp_avg],
                "exp_avg_sq": [t.cpu().clone() for t in self.exp_avg_sq],
                "steps": [float(s) for s in self.steps]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != "apexrl.Adam" or len(state["exp_avg"]) != len(self.params):
            raise ValueError("optimizer state is not an apexrl Adam state for this network")
        for dst, src in zip(self.exp_avg + self.exp_avg_sq, state["exp_avg"] + state["exp_avg_sq"]):
            if dst.shape != src.shape:
                raise ValueError(f"optimizer state shape {tuple(src.shape)} does not fit {tuple(dst.shape)}")
            dst.copy_(src)
        for s, v in zip(self.steps, state["steps"]):
            s.fill_(float(v))


def make_optimizer(params: Iterable[torch.nn.Parameter], lc: LearnerConfig) -> Adam | torch.optim.Optimizer:
    """``learner.optimizer``: adam (this module's), or centered RMSProp with decay 0.95 as in Ape-X."""
    if lc.optimizer == "adam":
        return Adam(params, lc.lr, lc.optimizer_eps)
    return torch.optim.RMSprop(params, lr=lc.lr, alpha=0.95, eps=lc.optimizer_eps, centered=True)
