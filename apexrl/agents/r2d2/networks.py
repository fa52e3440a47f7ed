"""The recurrent Q-network of R2D2: the DQN torso of each step's observation, an LSTM (or GRU) core, the
dueling head (Kapturowski et al., 2019, section 2.3).

Its recurrent state travels as one flat float tensor [B, S] (an LSTM's h and c side by side), so actors,
replay and the learner handle it as an array like any other. ``begin`` [B, T] marks steps where an
episode starts inside an unrolled sequence: the state is zeroed before them.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from apexrl.agents.dqn.networks import DuelingHead, build_torso
from apexrl.agents.encoders import MASKED_Q, legal_tensor
from apexrl.config import Config
from apexrl.envs.spaces import codec_of


class RecurrentQNetwork(nn.Module):
    recurrent = True

    def __init__(self, torso: nn.Module, features: int, num_actions: int, cell: str, size: int, head: int,
                 dueling: bool, codec: object | None = None) -> None:
        super().__init__()
        self.torso, self.cell, self.size, self.codec = torso, cell, size, codec
        self.core: nn.Module = (nn.LSTM if cell == "lstm" else nn.GRU)(features, size, batch_first=True)
        self.head = (DuelingHead(size, num_actions, head) if dueling else
                     nn.Sequential(nn.Linear(size, head), nn.ReLU(), nn.Linear(head, num_actions)))

    @property
    def state_size(self) -> int:
        return 2 * self.size if self.cell == "lstm" else self.size

    def initial_state(self, batch: int, device: torch.device | str = "cpu") -> torch.Tensor:
        return torch.zeros(batch, self.state_size, device=device, dtype=next(self.core.parameters()).dtype)

    def get_initial_state(self) -> list[np.ndarray]:
        """RLlib's spelling, for ``ApexTrainer.compute_single_action(obs, state)``: one flat state."""
        return [np.zeros(self.state_size, np.float32)]

    def _split(self, state: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        if self.cell == "lstm":
            h, c = state[:, : self.size], state[:, self.size:]
            return h.unsqueeze(0).contiguous(), c.unsqueeze(0).contiguous()
        return state.unsqueeze(0).contiguous()

    def _join(self, hidden: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        if isinstance(hidden, tuple):
            return torch.cat([hidden[0][0], hidden[1][0]], dim=1)
        return hidden[0]

    def forward(self, obs: torch.Tensor, state: torch.Tensor,
                begin: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Q-values [B, T, A] of observations [B, T, ...] unrolled from ``state`` [B, S]; and the state after."""
        B, T = obs.shape[:2]
        rows = obs.reshape(B * T, *obs.shape[2:])
        x = self.torso(rows).reshape(B, T, -1)
        cuts = [0, T] if begin is None else sorted({0, T, *torch.nonzero(begin.any(dim=0)).flatten().tolist()})
        outs = []
        for a, b in zip(cuts[:-1], cuts[1:]):  # one fused call per stretch without an episode start inside
            if begin is not None:
                state = state.masked_fill(begin[:, a].view(B, 1).bool(), 0.0)
            out, hidden = self.core(x[:, a:b], self._split(state))
            state = self._join(hidden)
            outs.append(out)
        q = self.head(torch.cat(outs, dim=1).reshape(B * T, -1))
        if self.codec is not None:
            legal = legal_tensor(self.codec, rows)  # type: ignore[arg-type]
            if legal is not None:
                q = q.masked_fill(~legal, MASKED_Q)
        return q.reshape(B, T, -1), state

    def legal_actions(self, rows: np.ndarray) -> np.ndarray | None:
        return None if self.codec is None else self.codec.legal(rows)  # type: ignore[attr-defined]


def build_recurrent_network(observation_space: gym.Space, action_space: gym.Space, cfg: Config) -> RecurrentQNetwork:
    torso = build_torso(observation_space, cfg.network)
    q = cfg.r2d2
    return RecurrentQNetwork(torso, int(torso.out_features), int(action_space.n), q.cell,  # type: ignore[attr-defined]
                             q.cell_size, cfg.network.head, cfg.network.dueling, codec_of(observation_space))
