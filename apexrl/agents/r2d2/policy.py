"""Recurrent epsilon-greedy acting and the actors' initial sequence priorities (R2D2 on Ape-X's actors).

Each env slot keeps its recurrent state between steps, zeroed when its episode ends (``reset_slots``); acting
for some slots only (a turn-based game's agents to move) steps only theirs;
the sequence writer stores the state a slot had before each step (``state_before``), so the learner can
start a replayed sequence where the actor was. Priorities of a sent sequence come from the actor's own
network over the whole sequence from that stored state, as the learner computes them (target = online).
"""

from __future__ import annotations

import numpy as np
import torch

from apexrl.agents.dqn.policy import EpsilonGreedyPolicy
from apexrl.agents.r2d2.loss import SequenceSettings, priority_mix, sequence_td
from apexrl.core import Batch


class RecurrentEpsilonGreedyPolicy(EpsilonGreedyPolicy):
    recurrent = True  # evaluations act on every episode's row at every step, so each keeps its state

    def __init__(self, net: torch.nn.Module, num_actions: int, epsilons: np.ndarray, seed: int,
                 priority_eps: float, settings: SequenceSettings, eta: float,
                 device: str | torch.device = "cpu", anneal: tuple[float, int, int] | None = None) -> None:
        super().__init__(net, num_actions, epsilons, seed, priority_eps, 0, "float32", device, anneal)
        self.settings, self.eta = settings, eta
        self.device = self.q.device  # type: ignore[attr-defined]  (a torch network: TorchQ)
        n = len(epsilons)
        self.state = net.initial_state(n, self.device)  # type: ignore[operator]
        self.state_before = np.zeros((n, self.state.shape[1]), self.state.cpu().numpy().dtype)
        self._acting: np.ndarray | None = None  # the slots of the rows being acted on (None: the first rows)

    def act(self, obs: np.ndarray, keys: np.ndarray | None = None, slots: np.ndarray | None = None) -> np.ndarray:
        self._acting = slots
        try:
            return super().act(obs, keys, slots)
        finally:
            self._acting = None

    @torch.no_grad()
    def _q_values(self, obs: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(obs).to(self.device)
        if self._acting is not None:
            idx = torch.as_tensor(self._acting, device=self.device, dtype=torch.long)
            before = self.state[idx]
            self.state_before[self._acting] = before.cpu().numpy()
            q, new = self.net(x.unsqueeze(1), before)
            self.state = self.state.index_copy(0, idx, new.to(self.state.dtype))
            return q[:, 0].float().cpu().numpy()
        k = len(x)
        self.state_before = self.state[:k].cpu().numpy()
        q, new = self.net(x.unsqueeze(1), self.state[:k])
        self.state = torch.cat([new, self.state[k:]]) if k < len(self.state) else new
        return q[:, 0].float().cpu().numpy()

    def reset_slots(self, mask: np.ndarray) -> None:
        """Episodes ended in these slots: their next observation starts from a zero state."""
        m = torch.as_tensor(np.asarray(mask, bool), device=self.device).view(-1, 1)
        self.state = self.state.masked_fill(m, 0.0)

    def set_recurrent_state(self, state: np.ndarray) -> None:
        self.state = torch.as_tensor(np.asarray(state), device=self.device, dtype=self.state.dtype).clone()

    @torch.no_grad()
    def priorities(self, batch: Batch) -> np.ndarray:
        tensors = {k: torch.as_tensor(v, device=self.device) for k, v in batch.items()}
        y, q_sa, mask = sequence_td(self.net, self.net, tensors, self.settings)
        prio = priority_mix((y - q_sa).abs().double(), mask, self.eta) + self.priority_eps
        return prio.cpu().numpy()
