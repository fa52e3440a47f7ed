"""Acting with action noise and the actor-side initial priorities of Ape-X DPG (Horgan et al., 2018).

Ape-X gives each actor its own exploration; for DPG that is the scale of the action noise, spread from
``noise_max`` to ``noise_min`` over all env slots as Ape-X spreads epsilon. The noise is Gaussian per step,
or Ornstein-Uhlenbeck (DDPG's; RLlib's Ape-X DDPG default): an AR(1) process per slot and action dimension
with unit stationary std, ``x <- (1 - theta) x + sqrt(1 - (1 - theta)^2) n``, times the slot's scale, so a
push lasts ~1/theta steps and carries an underpowered car up a hill where independent noise cancels out. Until an actor has taken its
share of ``replay.learning_starts`` env steps it acts uniformly at random, so replay starts with varied
data rather than the untrained policy's near-constant actions (as TD3 and SB3 do).

Priorities are computed where the data is made, with the actor's own copy of the critics:
|R + discount * min_c Q_c(s', pi(s')) - Q_1(s, a)| + eps, the learner's TD error without target networks.
"""

from __future__ import annotations

import numpy as np
import torch

from apexrl.agents.dpg.networks import ActionScale
from apexrl.core import Batch, Weights, load_numpy_state_dict


def noise_scale_schedule(num: int, noise_max: float, noise_min: float) -> np.ndarray:
    """``num`` noise stds from ``noise_max`` down to ``noise_min``: geometric, or linear when the min is 0."""
    if num == 1:
        return np.array([noise_max])
    t = np.arange(num, dtype=np.float64) / (num - 1)
    if noise_min > 0 and noise_max > 0:
        return noise_max * (noise_min / noise_max) ** t
    return noise_max + (noise_min - noise_max) * t


def actor_noise_scales(actor_index: int, num_actors: int, envs_per_actor: int, noise_max: float,
                       noise_min: float, per: str = "env") -> np.ndarray:
    """The noise stds of one actor's environments, interleaved over actors like Ape-X's epsilons."""
    if not 0 <= actor_index < num_actors:
        raise ValueError(f"actor_index {actor_index} outside [0, {num_actors})")
    if per == "actor":
        return np.full(envs_per_actor, noise_scale_schedule(num_actors, noise_max, noise_min)[actor_index])
    return noise_scale_schedule(num_actors * envs_per_actor, noise_max, noise_min)[actor_index::num_actors].copy()


@torch.no_grad()
def td_priorities(net: torch.nn.Module, obs: np.ndarray, unit_action: np.ndarray, reward: np.ndarray,
                  discount: np.ndarray, next_obs: np.ndarray, eps: float) -> np.ndarray:
    """|R + discount * min_c Q_c(s', pi(s')) - Q_1(s, a)| + eps with the given (online) network."""
    o, o2 = torch.as_tensor(obs), torch.as_tensor(next_obs)
    q_sa = net.q(o, torch.as_tensor(unit_action))[0]
    q_next = net.q(o2, net(o2)).min(dim=0).values
    target = torch.as_tensor(reward) + torch.as_tensor(discount) * q_next
    return ((target - q_sa).abs() + eps).double().numpy()


class NoisePolicy:
    exploration_name = "noise"

    def __init__(self, net: torch.nn.Module, scale: ActionScale, noise: np.ndarray, seed: int,
                 priority_eps: float, warmup_steps: int = 0, ou_theta: float | None = None) -> None:
        self.net = net
        self.net.eval()
        self.scale = scale
        self.exploration = np.asarray(noise, dtype=np.float64)
        self.rng = np.random.default_rng(seed)
        self.priority_eps = priority_eps
        self.warmup_steps = warmup_steps
        self.steps = 0
        self.ou_theta = ou_theta  # None: Gaussian noise
        self._ou: np.ndarray | None = None

    def observe_global_steps(self, env_steps: int) -> None:
        """Fixed per-slot scales: the run's progress does not change them."""

    def reset_slots(self, mask: np.ndarray) -> None:
        """Stateless: nothing to forget at an episode's end."""

    def set_weights(self, weights: Weights) -> None:
        load_numpy_state_dict(self.net, weights)

    @torch.no_grad()
    def act(self, obs: np.ndarray, keys: np.ndarray | None = None, slots: np.ndarray | None = None) -> np.ndarray:
        """``slots``: the env slots the rows are (a turn-based game's agents to move), else the first rows."""
        E = len(obs)
        shape = (E, *self.scale.mid.shape)
        rows = np.arange(E) if slots is None else np.asarray(slots)
        if self.steps < self.warmup_steps:
            unit = self.rng.uniform(-1.0, 1.0, size=shape)
        else:
            unit = self.net(torch.as_tensor(obs)).numpy().astype(np.float64)
            sigma = self.exploration[rows].reshape(-1, *([1] * (unit.ndim - 1)))
            if sigma.any():
                unit = np.clip(unit + sigma * self._noise(shape, rows), -1.0, 1.0)
        self.steps += E
        return self.scale.to_env(unit)

    def _noise(self, shape: tuple[int, ...], rows: np.ndarray | None = None) -> np.ndarray:
        """Unit-std noise: independent draws, or the next step of each slot's OU process (``rows``' only)."""
        rows = np.arange(shape[0]) if rows is None else rows
        n = self.rng.standard_normal(shape)
        if self.ou_theta is None:
            return n
        full = (len(self.exploration), *shape[1:])
        if self._ou is None or self._ou.shape != full:
            self._ou = self.rng.standard_normal(full)  # start in the stationary distribution
        keep = 1.0 - self.ou_theta
        self._ou[rows] = keep * self._ou[rows] + np.sqrt(1.0 - keep * keep) * n
        return self._ou[rows]

    def priorities(self, batch: Batch) -> np.ndarray:
        return td_priorities(self.net, batch["obs"], self.scale.to_unit(batch["action"]), batch["reward"],
                             batch["discount"], batch["next_obs"], self.priority_eps)

    # The keyed (frame-stack) path is for de-duplicated Atari frames, which have discrete actions.
    def remember(self, obs: np.ndarray, keys: np.ndarray, bootstrap: np.ndarray) -> None:
        raise NotImplementedError("agent 'dpg' does not use the frame-stack path")

    def precompute(self, obs: np.ndarray, keys: np.ndarray) -> None:
        raise NotImplementedError("agent 'dpg' does not use the frame-stack path")

    def knows(self, keys: np.ndarray) -> bool:
        return False

    def keyed_priorities(self, obs_keys: np.ndarray, action: np.ndarray, reward: np.ndarray,
                         discount: np.ndarray, next_keys: np.ndarray) -> np.ndarray:
        raise NotImplementedError("agent 'dpg' does not use the frame-stack path")
