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

from apexrl.agents.dqn.distributional import (
    LOG_FLOOR,
    project_categorical,
    quantile_huber,
    quantile_midpoints,
    support,
)
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
        obs, next_obs, action, reward, discount, w = self._batch(batch, weights)

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

    def _batch(self, batch: dict[str, np.ndarray], weights: np.ndarray) -> tuple[torch.Tensor, ...]:
        return (self._tensor(batch["obs"]), self._tensor(batch["next_obs"]), self._tensor(batch["action"], torch.int64),
                self._tensor(batch["reward"], torch.float32), self._tensor(batch["discount"], torch.float32),
                self._tensor(np.asarray(weights), torch.float32))

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


class DistributionalDQNLearner(DQNLearner):
    """Double DQN over return distributions: the online network's means pick the next action (legal ones
    only), the target network's distribution for it makes the target, C51's projection (cross-entropy loss)
    or QR-DQN's quantile Huber loss trains, and the per-sample loss is the new priority (for C51 its KL part,
    the cross-entropy less the target's entropy, as Rainbow prioritizes)."""

    def __init__(self, cfg: Config, net: torch.nn.Module, device: str | None = None, optimizer: Any = None) -> None:
        super().__init__(cfg, net, device, optimizer)
        n = cfg.network
        self.kind = n.distribution
        self.z = torch.as_tensor(support(n.v_min, n.v_max, n.num_atoms), device=self.device)
        self.taus = torch.as_tensor(quantile_midpoints(n.num_atoms), device=self.device)

    def update(self, batch: dict[str, np.ndarray], weights: np.ndarray) -> tuple[np.ndarray | None, dict[str, float]]:
        obs, next_obs, action, reward, discount, w = self._batch(batch, weights)
        rows = torch.arange(len(action), device=self.device)
        with torch.no_grad():
            best = self.net(next_obs).argmax(dim=1)
            next_raw = self.target.distribution(next_obs)[rows, best]  # type: ignore[operator]
            if self.kind == "categorical":
                target = project_categorical(torch.softmax(next_raw, dim=-1), reward, discount, self.z, xp=torch)
            else:
                target = reward[:, None] + discount[:, None] * next_raw
        raw = self.net.distribution(obs)[rows, action]  # type: ignore[operator]
        if self.kind == "categorical":
            elementwise = -(target * torch.log_softmax(raw, dim=-1)).sum(dim=1)
            q_sa = torch.softmax(raw.detach(), dim=-1) @ self.z
        else:
            elementwise = quantile_huber(raw, target, self.taus, xp=torch)
            q_sa = raw.detach().mean(dim=1)
        loss = (w * elementwise).mean()
        grad_norm, bad = self._optimize(loss)
        if grad_norm is None:
            return self._skip(bad)
        per_sample = elementwise.detach()
        if self.kind == "categorical":  # the KL term (Rainbow): 0 where the prediction is the target
            per_sample = (per_sample + (target * torch.log(target.clamp_min(LOG_FLOOR))).sum(dim=1)).clamp_min(0.0)
        prios = (per_sample + self.cfg.replay.priority_eps).double().cpu().numpy()
        return prios, {"loss": float(loss.detach()), "q_mean": float(q_sa.mean()),
                       "td_abs_mean": float(per_sample.mean()), "grad_norm": float(grad_norm),
                       "is_weight_mean": float(w.mean())}


def dqn_learner(cfg: Config, net: torch.nn.Module, device: str | None = None, optimizer: Any = None) -> DQNLearner:
    """The learner ``network.distribution`` asks for: plain double DQN or its distributional form."""
    cls = DQNLearner if cfg.network.distribution == "expectation" else DistributionalDQNLearner
    return cls(cfg, net, device, optimizer)
