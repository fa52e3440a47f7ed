"""The R2D2 learner: per sequence, burn-in from the stored state without gradients, n-step double-Q
targets over the rest (optionally value-rescaled), the importance weight per sequence, and the mixed
max/mean |TD| priority (Kapturowski et al., 2019). Ray-free, like the DQN learner it extends."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from apexrl.agents.dqn.learner import DQNLearner
from apexrl.agents.r2d2.loss import SequenceSettings, priority_mix, sequence_td
from apexrl.config import Config


def settings_of(cfg: Config) -> SequenceSettings:
    q = cfg.r2d2
    return SequenceSettings(q.burn_in, cfg.learner.n_step, cfg.learner.gamma, q.use_h_function, q.h_epsilon,
                            q.zero_init_states)


class R2D2Learner(DQNLearner):
    def __init__(self, cfg: Config, net: torch.nn.Module, device: str | None = None, optimizer: Any = None) -> None:
        super().__init__(cfg, net, device, optimizer)
        self.settings = settings_of(cfg)

    def update(self, batch: dict[str, np.ndarray], weights: np.ndarray) -> tuple[np.ndarray | None, dict[str, float]]:
        lc = self.cfg.learner
        tensors = {k: self._tensor(v) for k, v in batch.items()}
        w = self._tensor(np.asarray(weights), torch.float32)
        y, q_sa, mask = sequence_td(self.net, self.target, tensors, self.settings)
        td = y - q_sa
        m = mask.float()
        if lc.loss == "huber":
            elementwise = F.smooth_l1_loss(q_sa, y, reduction="none")
        else:
            elementwise = 0.5 * td.pow(2)
        elementwise = torch.where(mask, elementwise, torch.zeros_like(elementwise))
        per_sequence = elementwise.sum(dim=1) / m.sum(dim=1).clamp(min=1.0)
        loss = (w * per_sequence).mean()
        grad_norm, bad = self._optimize(loss)
        if grad_norm is None:
            return self._skip(bad)
        td_abs = torch.where(mask, td.detach().abs(), torch.zeros_like(td))
        prios = priority_mix(td_abs.double(), mask, self.cfg.r2d2.priority_eta) + self.cfg.replay.priority_eps
        steps = m.sum().clamp(min=1.0)
        return prios.cpu().numpy(), {
            "loss": float(loss.detach()),
            "q_mean": float((q_sa.detach() * m).sum() / steps),
            "td_abs_mean": float(td_abs.sum() / steps),
            "grad_norm": float(grad_norm),
            "is_weight_mean": float(w.mean()),
        }
