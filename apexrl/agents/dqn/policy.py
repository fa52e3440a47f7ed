"""Epsilon-greedy acting and the actor-side initial priorities of Ape-X DQN (Horgan et al., 2018, Alg. 1).

Actors hold no target network; Ape-X computes initial priorities on the actor with its own network,
|R + discount * max_a Q(s', a) - Q(s, a)| + eps, so the learner needs no round trip for new data.

Keyed path (frame-stacked observations sent as frame ids): priorities reuse the Q-values computed when
acting, as in the paper. Each observation has a key (a serial number); a ring keeps Q(s, .) per key, so
a send needs a forward pass only for final observations of episodes (``remember``) and, when the newest
successors were not acted on yet, for the current observations (``precompute``, reused by the next act).
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from apexrl.core import Batch, Weights, load_numpy_state_dict


def td_priorities(q: torch.Tensor, q_next: torch.Tensor, action: np.ndarray, reward: np.ndarray,
                  discount: np.ndarray, eps: float) -> np.ndarray:
    """|R + discount * max_a Q(s', a) - Q(s, a)| + eps with the actor's own network."""
    q_sa = q.gather(1, torch.as_tensor(action, dtype=torch.int64).view(-1, 1)).squeeze(1)
    target = torch.as_tensor(reward) + torch.as_tensor(discount) * q_next.max(dim=1).values
    return ((target - q_sa).abs() + eps).double().numpy()


def _native_bf16() -> bool:
    """Whether oneDNN runs bfloat16 on this CPU natively (AVX512-BF16 or AMX); elsewhere it is emulated, slower."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


class EpsilonGreedyPolicy:
    exploration_name = "epsilon"

    def __init__(self, net: torch.nn.Module, num_actions: int, epsilons: np.ndarray, seed: int,
                 priority_eps: float, key_capacity: int = 0, precision: str = "float32",
                 device: str | torch.device = "cpu", anneal: tuple[float, int, int] | None = None) -> None:
        """``anneal``: (start epsilon, env steps over all actors, number of actors): each slot's epsilon
        falls linearly from start to its own as the run's env steps grow (RLlib's EpsilonGreedy)."""
        self.device = torch.device(device)
        self.net = net.to(self.device)
        self.net.eval()
        self._image = any(p.dim() == 4 for p in net.parameters())
        if self._image:  # oneDNN's convolutions run ~1.2-1.4x faster on CPU in channels-last layout
            self.net.to(memory_format=torch.channels_last)
        if precision == "auto":
            precision = "bfloat16" if self.device.type == "cpu" and _native_bf16() else "float32"
        self._autocast = (torch.autocast(self.device.type, dtype=torch.bfloat16) if precision == "bfloat16"
                          else contextlib.nullcontext())
        self.num_actions = num_actions
        self.final = np.asarray(epsilons, dtype=np.float64)
        self.exploration = self.final.copy()
        self.anneal = anneal
        self._global0, self._local, self._local0 = 0, 0, 0
        if anneal is not None:
            self.observe_global_steps(0)
        self.rng = np.random.default_rng(seed)
        self.priority_eps = priority_eps
        self._ring_size = max(1, key_capacity)
        self._qring = np.zeros((self._ring_size, num_actions), dtype=np.float32)
        self._owner = np.full(self._ring_size, -1, dtype=np.int64)
        self._fresh: tuple[np.ndarray, torch.Tensor] | None = None  # precomputed for the next act
        self._legal = getattr(net, "legal_actions", None)  # action masks (apexrl.agents.encoders.MaskedQ)

    def observe_global_steps(self, env_steps: int) -> None:
        """The run's env steps over all actors now (the driver's count, resumed runs included)."""
        self._global0, self._local0 = env_steps, self._local
        self._anneal()

    def _anneal(self) -> None:
        if self.anneal is None:
            return
        start, steps, actors = self.anneal
        done = self._global0 + (self._local - self._local0) * actors  # this actor's share times the actors
        frac = min(1.0, done / steps) if steps > 0 else 1.0
        self.exploration = start + (self.final - start) * frac

    def reset_slots(self, mask: np.ndarray) -> None:
        """Stateless: nothing to forget at an episode's end."""

    def set_weights(self, weights: Weights) -> None:
        load_numpy_state_dict(self.net, weights)
        self._fresh = None  # act on the new weights (the ring entry is overwritten then)

    def _q(self, obs: np.ndarray) -> torch.Tensor:
        """Q-values as float32 on the CPU, whatever device and precision the forward pass ran in."""
        x = torch.as_tensor(obs).to(self.device, non_blocking=True)
        if self._image and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        with self._autocast:
            return self.net(x).float().cpu()

    def _store(self, keys: np.ndarray, q: np.ndarray) -> None:
        self._qring[keys % self._ring_size] = q
        self._owner[keys % self._ring_size] = keys

    @torch.no_grad()
    def act(self, obs: np.ndarray, keys: np.ndarray | None = None) -> np.ndarray:
        if keys is not None and self._fresh is not None and np.array_equal(self._fresh[0], keys):
            q = self._fresh[1]
        else:
            q = self._q(obs)
            if keys is not None:
                self._store(keys, q.numpy())
        self._fresh = None
        greedy = q.argmax(dim=1).numpy()
        if self.anneal is not None:
            self._local += len(greedy)
            self._anneal()
        explore = self.rng.random(len(greedy)) < self.exploration[: len(greedy)]
        if explore.any():
            legal = self._legal(obs) if self._legal is not None else None
            if legal is None:
                random = self.rng.integers(self.num_actions, size=len(greedy))
            else:  # uniform over each row's legal actions: the largest of a uniform draw per legal action
                random = (self.rng.random(legal.shape) * legal).argmax(axis=1)
            greedy = np.where(explore, random, greedy)
        return greedy

    @torch.no_grad()
    def priorities(self, batch: Batch) -> np.ndarray:
        B = len(batch["action"])
        q_all = self._q(np.concatenate([batch["obs"], batch["next_obs"]]))
        return td_priorities(q_all[:B], q_all[B:], batch["action"], batch["reward"], batch["discount"],
                             self.priority_eps)

    @torch.no_grad()
    def remember(self, obs: np.ndarray, keys: np.ndarray, bootstrap: np.ndarray) -> None:
        q = np.zeros((len(keys), self.num_actions), dtype=np.float32)
        if bootstrap.any():
            q[bootstrap] = self._q(obs[bootstrap]).numpy()
        self._store(keys, q)

    @torch.no_grad()
    def precompute(self, obs: np.ndarray, keys: np.ndarray) -> None:
        q = self._q(obs)
        self._store(keys, q.numpy())
        self._fresh = (keys.copy(), q)

    def knows(self, keys: np.ndarray) -> bool:
        return bool((self._owner[keys % self._ring_size] == keys).all())

    def keyed_priorities(self, obs_keys: np.ndarray, action: np.ndarray, reward: np.ndarray,
                         discount: np.ndarray, next_keys: np.ndarray) -> np.ndarray:
        if not (self.knows(obs_keys) and self.knows(next_keys)):
            raise RuntimeError("actor Q-value ring overwritten before send; this is a bug (ring too small)")
        q_sa = self._qring[obs_keys % self._ring_size, action].astype(np.float64)
        q_next = self._qring[next_keys % self._ring_size].max(axis=1).astype(np.float64)
        target = reward.astype(np.float64) + discount.astype(np.float64) * q_next
        return np.abs(target - q_sa) + self.priority_eps
