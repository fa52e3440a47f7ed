"""The Ape-X DQN learner: double DQN with n-step targets, importance weights, gradient clipping,
periodic target copies and |TD| priorities (Horgan et al., 2018, Algorithm 2).

Ray-free: the runtime's learner loop (``apexrl.runtime.learning``) feeds it batches from replay.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from apexrl.agents.torch_utils import UpdateCounters, resolve_device, to_device, zero_grad
from apexrl.config import Config
from apexrl.core import state_dict_to_numpy
from apexrl.optim import make_optimizer


def double_dqn_targets(q_next_online: torch.Tensor, q_next_target: torch.Tensor, reward: torch.Tensor,
                       discount: torch.Tensor) -> torch.Tensor:
    """y = R^(n) + discount * Q_target(s', argmax_a Q_online(s', a))   (van Hasselt et al., 2016).

    ``discount`` is gamma^m for a window of m steps that did not terminate, 0 if it did (see nstep.py).
    """
    best = q_next_online.argmax(dim=1, keepdim=True)
    return reward + discount * q_next_target.gather(1, best).squeeze(1)


class DQNLearner(UpdateCounters):
    def __init__(self, cfg: Config, net: torch.nn.Module, device: str | None = None,
                 optimizer: Any = None) -> None:
        """``net`` is the online network, built by the caller under ``torch.manual_seed(cfg.seed)``;
        ``optimizer``: a user's (any torch.optim optimizer over ``net``), else ``learner.optimizer``."""
        self.cfg = cfg
        lc = cfg.learner
        self.device = resolve_device(device or lc.device)
        self.net = net.to(self.device)
        self.target = copy.deepcopy(self.net).to(self.device)
        self.target.requires_grad_(False)
        self.optimizer = optimizer if optimizer is not None else make_optimizer(self.net.parameters(), lc)
        self._params = [p for p in self.net.parameters() if p.requires_grad]
        super().__init__()

    def _tensor(self, x: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
        return to_device(x, self.device, dtype)

    def update(self, batch: dict[str, np.ndarray], weights: np.ndarray) -> tuple[np.ndarray | None, dict[str, float]]:
        """One gradient step. Returns (new priorities |TD| + eps, metrics); priorities are None when the
        update was skipped because the loss or gradients were not finite."""
        lc = self.cfg.learner
        obs = self._tensor(batch["obs"])
        next_obs = self._tensor(batch["next_obs"])
        action = self._tensor(batch["action"], torch.int64)
        reward = self._tensor(batch["reward"], torch.float32)
        discount = self._tensor(batch["discount"], torch.float32)
        w = self._tensor(np.asarray(weights), torch.float32)

        # The bootstrap half runs without autograd: one shared forward over [obs; next_obs] would make the
        # backward pass twice as wide for gradients that are thrown away (~25% of a CartPole update).
        with torch.no_grad():
            y = double_dqn_targets(self.net(next_obs), self.target(next_obs), reward, discount)
        q_sa = self.net(obs).gather(1, action.view(-1, 1)).squeeze(1)
        td = y - q_sa
        if lc.loss == "huber":
            elementwise = F.smooth_l1_loss(q_sa, y, reduction="none")
        else:
            elementwise = 0.5 * td.pow(2)
        loss = (w * elementwise).mean()
        grad_norm, bad = self._optimize(loss)
        if grad_norm is None:
            return self._skip(bad)
        td_abs = td.detach().abs()
        prios = (td_abs + self.cfg.replay.priority_eps).double().cpu().numpy()
        metrics = {
            "loss": float(loss.detach()),
            "q_mean": float(q_sa.detach().mean()),
            "td_abs_mean": float(td_abs.mean()),
            "grad_norm": float(grad_norm),
            "is_weight_mean": float(w.mean()),
        }
        return prios, metrics

    def _optimize(self, loss: torch.Tensor) -> tuple[torch.Tensor | None, str]:
        """Backward, clip, step, count, copy the target on schedule: (the gradient norm, ""), or (None, what was
        not finite) with nothing changed."""
        lc = self.cfg.learner
        if not torch.isfinite(loss):
            return None, "loss"
        self._zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self._params, lc.grad_clip)
        if not torch.isfinite(grad_norm):
            self._zero_grad()
            return None, "gradient"
        self.optimizer.step()
        self.updates += 1
        self.consecutive_skips = 0
        if self.updates % lc.target_update_period == 0:
            self.target.load_state_dict(self.net.state_dict())
        return grad_norm, ""

    def _zero_grad(self) -> None:
        zero_grad(self._params)

    def weights(self) -> dict[str, np.ndarray]:
        return state_dict_to_numpy(self.net)

    def state_dict(self) -> dict[str, Any]:
        return {
            "net": {k: v.cpu() for k, v in self.net.state_dict().items()},
            "target": {k: v.cpu() for k, v in self.target.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            **self._counters(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self._load_counters(state)
