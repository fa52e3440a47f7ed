"""The Ape-X DPG learner: deterministic policy gradient with n-step critic targets, importance weights,
|TD| priorities and target networks (Horgan et al., 2018, sec. 3 / appendix), with TD3's fixes as
options (Fujimoto et al., 2018): twin critics and the smaller target, target-policy smoothing, delayed
policy updates.

    a'  = clip(pi_target(s') + clip(N(0, target_noise), -c, c), -1, 1)
    y   = R^(n) + discount * min_c Q_target_c(s', a')          (discount = gamma^m, or 0 at a terminal)
    L_Q = mean_i w_i * sum_c huber(Q_c(s_i, a_i) - y_i)          priorities |y - Q_1(s, a)| + eps
    L_pi = -mean_i Q_1(s_i, pi(s_i))                             every ``policy_delay`` critic updates

Actions in replay are the env's; the learner works in the networks' [-1, 1] scale.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from apexrl.agents.dpg.networks import ActionScale
from apexrl.agents.torch_utils import UpdateCounters, resolve_device, to_device, zero_grad
from apexrl.config import Config
from apexrl.core import state_dict_to_numpy
from apexrl.optim import make_optimizer


def dpg_targets(q_next_target: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor) -> torch.Tensor:
    """y = R + discount * min over critics of Q_target(s', a'); ``q_next_target`` is [C, B]."""
    return reward + discount * q_next_target.min(dim=0).values


class DPGLearner(UpdateCounters):
    def __init__(self, cfg: Config, net: torch.nn.Module, scale: ActionScale, device: str | None = None) -> None:
        """``net``: a DPG model (see networks.py), built by the caller under ``torch.manual_seed(cfg.seed)``."""
        self.cfg = cfg
        lc, self.d = cfg.learner, cfg.dpg
        self.device = resolve_device(device or lc.device)
        self.net = net.to(self.device)
        self.target = copy.deepcopy(self.net).to(self.device)
        self.target.requires_grad_(False)
        self.scale_mid = torch.as_tensor(scale.mid, dtype=torch.float32, device=self.device)
        self.scale_half = torch.as_tensor(scale.half, dtype=torch.float32, device=self.device)
        pi_ids = {id(p) for p in self.net.pi.parameters()}
        self._pi_params = [p for p in self.net.pi.parameters() if p.requires_grad]
        self._q_params = [p for p in self.net.parameters() if p.requires_grad and id(p) not in pi_ids]
        self.q_optimizer = make_optimizer(self._q_params, lc)
        self.pi_optimizer = make_optimizer(self._pi_params, dataclasses.replace(lc, lr=self.d.actor_lr))
        self._online = [p for p in self.net.parameters()]
        self._target = [p for p in self.target.parameters()]
        super().__init__()
        self._last_pi_loss = 0.0

    def update(self, batch: dict[str, np.ndarray], weights: np.ndarray) -> tuple[np.ndarray | None, dict[str, float]]:
        lc, d = self.cfg.learner, self.d
        obs = to_device(batch["obs"], self.device)
        next_obs = to_device(batch["next_obs"], self.device)
        action = (to_device(batch["action"], self.device, torch.float32) - self.scale_mid) / self.scale_half
        reward = to_device(batch["reward"], self.device, torch.float32)
        discount = to_device(batch["discount"], self.device, torch.float32)
        w = to_device(np.asarray(weights), self.device, torch.float32)

        with torch.no_grad():
            a_next = self.target(next_obs)
            if d.target_noise > 0:
                noise = (torch.randn_like(a_next) * d.target_noise).clamp(-d.target_noise_clip, d.target_noise_clip)
                a_next = (a_next + noise).clamp(-1.0, 1.0)
            y = dpg_targets(self.target.q(next_obs, a_next), reward, discount)
        q = self.net.q(obs, action)  # [C, B]
        if lc.loss == "huber":
            elementwise = F.smooth_l1_loss(q, y.expand_as(q), reduction="none").sum(dim=0)
        else:
            elementwise = 0.5 * (q - y).pow(2).sum(dim=0)
        q_loss = (w * elementwise).mean()
        if not torch.isfinite(q_loss):
            return self._skip("critic loss")
        zero_grad(self._q_params)
        q_loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self._q_params, lc.grad_clip)
        if not torch.isfinite(grad_norm):
            zero_grad(self._q_params)
            return self._skip("critic gradient")
        self.q_optimizer.step()

        if self.updates % d.policy_delay == 0:
            pi_loss = -self.net.q(obs, self.net(obs))[0].mean()
            zero_grad(self._pi_params)
            pi_loss.backward()
            zero_grad(self._q_params)  # the policy's loss must not move the critics
            pi_norm = torch.nn.utils.clip_grad_norm_(self._pi_params, lc.grad_clip)
            if torch.isfinite(pi_norm):
                self.pi_optimizer.step()
                self._last_pi_loss = float(pi_loss.detach())
            zero_grad(self._pi_params)
        self.updates += 1
        self.consecutive_skips = 0
        with torch.no_grad():
            if d.tau > 0:
                torch._foreach_lerp_(self._target, self._online, d.tau)
            elif self.updates % lc.target_update_period == 0:
                self.target.load_state_dict(self.net.state_dict())
        td_abs = (y - q[0].detach()).abs()
        prios = (td_abs + self.cfg.replay.priority_eps).double().cpu().numpy()
        return prios, {
            "loss": float(q_loss.detach()),
            "actor_loss": self._last_pi_loss,
            "q_mean": float(q[0].detach().mean()),
            "td_abs_mean": float(td_abs.mean()),
            "grad_norm": float(grad_norm),
            "is_weight_mean": float(w.mean()),
        }

    def weights(self) -> dict[str, np.ndarray]:
        return state_dict_to_numpy(self.net)

    def state_dict(self) -> dict[str, Any]:
        return {
            "net": {k: v.cpu() for k, v in self.net.state_dict().items()},
            "target": {k: v.cpu() for k, v in self.target.state_dict().items()},
            "optimizer": {"critic": self.q_optimizer.state_dict(), "actor": self.pi_optimizer.state_dict()},
            **self._counters(),
            "last_actor_loss": self._last_pi_loss,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.target.load_state_dict(state["target"])
        self.q_optimizer.load_state_dict(state["optimizer"]["critic"])
        self.pi_optimizer.load_state_dict(state["optimizer"]["actor"])
        self._load_counters(state)
        self._last_pi_loss = float(state.get("last_actor_loss", 0.0))
