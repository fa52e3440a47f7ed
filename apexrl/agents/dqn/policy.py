"""Epsilon-greedy acting and the actor-side initial priorities of Ape-X DQN (Horgan et al., 2018, Alg. 1).

Actors hold no target network; Ape-X computes initial priorities on the actor with its own network,
|R + discount * max_a Q(s', a) - Q(s, a)| + eps, so the learner needs no round trip for new data.

Keyed path (frame-stacked observations sent as frame ids): priorities reuse the Q-values computed when
acting, as in the paper. Each observation has a key (a serial number); a ring keeps Q(s, .) per key, so
a send needs a forward pass only for final observations of episodes (``remember``) and, when the newest
successors were not acted on yet, for the current observations (``precompute``, reused by the next act).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from apexrl.agents.dqn.distributional import ValueHead
from apexrl.core import Batch, Weights


class QFunction(Protocol):
    """Q-values ``[B, num_actions]`` as float32 numpy arrays: ``numpy_q.NumpyQNetwork`` (the built-in MLP,
    no torch in the process) or ``torch_q.TorchQ`` around any torch network."""

    def __call__(self, obs: np.ndarray) -> np.ndarray: ...

    def load(self, weights: Weights) -> None: ...


def as_q_function(net: Any, precision: str = "float32", device: Any = "cpu", noise: bool = True) -> QFunction:
    """``net`` itself where it computes numpy Q-values already, else a torch network wrapped (torch is
    imported only then). ``noise``: noisy layers explore (actors) or play their means (evaluations)."""
    from apexrl.agents.dqn.numpy_q import NumpyQNetwork

    if isinstance(net, NumpyQNetwork):
        net.noise = noise
        return net
    from apexrl.agents.dqn.torch_q import TorchQ

    return TorchQ(net, precision, device, noise)


class EpsilonGreedyPolicy:
    exploration_name = "epsilon"

    def __init__(self, net: Any, num_actions: int, epsilons: np.ndarray, seed: int,
                 priority_eps: float, key_capacity: int = 0, precision: str = "float32",
                 device: Any = "cpu", anneal: tuple[float, int, int] | None = None,
                 head: ValueHead | None = None, noise: bool = True) -> None:
        """``net``: a numpy MLP or a torch network (see :func:`as_q_function`). ``anneal``: (start epsilon,
        env steps over all actors, number of actors): each slot's epsilon falls linearly from start to its
        own as the run's env steps grow (RLlib's EpsilonGreedy). ``head``: what the network's outputs are
        (``distributional.py``; plain Q-values by default)."""
        self.net = net
        self.q = as_q_function(net, precision, device, noise)
        self.head = head if head is not None else ValueHead()
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
        atoms = (self.head.atoms,) if self.head.distributional else ()
        self._qring = np.zeros((self._ring_size, num_actions, *atoms), dtype=np.float32)
        self._owner = np.full(self._ring_size, -1, dtype=np.int64)
        self._fresh: tuple[np.ndarray, np.ndarray] | None = None  # precomputed for the next act
        self._legal = getattr(self.q, "legal_actions", None)  # action masks (apexrl.agents.encoders.MaskedQ)

    def observe_global_steps(self, env_steps: int) -> None:
        """The run's env steps over all actors now (the board's count, resumed runs included). Between
        counts the actor extrapolates by its own steps times the actors; a count below that guess keeps the
        guess, so epsilon never climbs back (the other actors were slower than this one)."""
        self._global0, self._local0 = max(env_steps, self._guess()), self._local
        self._anneal()

    def _guess(self) -> int:
        """The run's env steps as this actor reckons them: the last count plus its own share times the actors."""
        actors = self.anneal[2] if self.anneal is not None else 0
        return self._global0 + (self._local - self._local0) * actors

    def _anneal(self) -> None:
        if self.anneal is None:
            return
        start, steps, _ = self.anneal
        done = self._guess()
        frac = min(1.0, done / steps) if steps > 0 else 1.0
        self.exploration = start + (self.final - start) * frac

    def reset_slots(self, mask: np.ndarray) -> None:
        """Stateless: nothing to forget at an episode's end."""

    def _q_values(self, obs: np.ndarray) -> np.ndarray:
        """The network's outputs: Q-values, or a distributional head's per-atom outputs."""
        return self.q(obs)

    def _legal_next(self, obs: np.ndarray) -> np.ndarray | None:
        """Legal actions where the head's outputs are not masked already (distributional heads)."""
        return self._legal(obs) if self.head.distributional and self._legal is not None else None

    def set_weights(self, weights: Weights) -> None:
        self.q.load(weights)
        self._fresh = None  # act on the new weights (the ring entry is overwritten then)

    def _store(self, keys: np.ndarray, q: np.ndarray) -> None:
        self._qring[keys % self._ring_size] = q
        self._owner[keys % self._ring_size] = keys

    def act(self, obs: np.ndarray, keys: np.ndarray | None = None, slots: np.ndarray | None = None) -> np.ndarray:
        """``slots``: the env slots the rows are (a turn-based game's agents to move), else the first rows."""
        if keys is not None and self._fresh is not None and np.array_equal(self._fresh[0], keys):
            q = self._fresh[1]
        else:
            q = self._q_values(obs)
            if keys is not None:
                self._store(keys, q)
        self._fresh = None
        values = self.head.q(q)
        legal_q = self._legal_next(obs)
        if legal_q is not None:
            values = np.where(legal_q, values, -np.inf)
        greedy = values.argmax(axis=1)
        if self.anneal is not None:
            self._local += len(greedy)
            self._anneal()
        eps = self.exploration[: len(greedy)] if slots is None else self.exploration[slots]
        explore = self.rng.random(len(greedy)) < eps
        if explore.any():
            legal = legal_q if legal_q is not None else self._legal(obs) if self._legal is not None else None
            if legal is None:
                random = self.rng.integers(self.num_actions, size=len(greedy))
            else:  # uniform over each row's legal actions: the largest of a uniform draw per legal action
                random = (self.rng.random(legal.shape) * legal).argmax(axis=1)
            greedy = np.where(explore, random, greedy)
        return greedy

    def priorities(self, batch: Batch) -> np.ndarray:
        B = len(batch["action"])
        q_all = self._q_values(np.concatenate([batch["obs"], batch["next_obs"]]))
        return self.head.priorities(q_all[:B], q_all[B:], batch["action"], batch["reward"], batch["discount"],
                                    self.priority_eps, self._legal_next(batch["next_obs"]))

    def remember(self, obs: np.ndarray, keys: np.ndarray, bootstrap: np.ndarray) -> None:
        q = np.zeros((len(keys), *self._qring.shape[1:]), dtype=np.float32)
        if bootstrap.any():
            q[bootstrap] = self._q_values(obs[bootstrap])
        self._store(keys, q)

    def precompute(self, obs: np.ndarray, keys: np.ndarray) -> None:
        q = self._q_values(obs)
        self._store(keys, q)
        self._fresh = (keys.copy(), q)

    def knows(self, keys: np.ndarray) -> bool:
        return bool((self._owner[keys % self._ring_size] == keys).all())

    def keyed_priorities(self, obs_keys: np.ndarray, action: np.ndarray, reward: np.ndarray,
                         discount: np.ndarray, next_keys: np.ndarray) -> np.ndarray:
        if not (self.knows(obs_keys) and self.knows(next_keys)):
            raise RuntimeError("actor Q-value ring overwritten before send; this is a bug (ring too small)")
        return self.head.priorities(self._qring[obs_keys % self._ring_size], self._qring[next_keys % self._ring_size],
                                    action, reward, discount, self.priority_eps)
