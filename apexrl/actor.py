"""The Ape-X actor: acts eps-greedily in a batch of envs, builds n-step transitions, prioritizes them
locally and sends them to replay in batches (Horgan et al., 2018, Algorithm 1).

Ray-free: ``runtime/`` wraps this class as a Ray actor; tests drive it in-process.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from apexrl.config import Config
from apexrl.core import ReplaySink, WeightSource
from apexrl.envs import make_env
from apexrl.exploration import actor_epsilons
from apexrl.networks import load_numpy_state_dict, make_network_factory
from apexrl.replay.nstep import NStepBuilder

log = logging.getLogger(__name__)

EnvFactory = Callable[[int], gym.Env]


def actor_seed(seed: int, actor_index: int) -> int:
    """Each actor (and each of its envs, +i) gets its own stream, stable across restarts."""
    return (seed * 1_000_003 + 7919 * (actor_index + 1)) % (2**31 - 1)


def td_priorities(q: torch.Tensor, q_next: torch.Tensor, action: np.ndarray, reward: np.ndarray,
                  discount: np.ndarray, eps: float) -> np.ndarray:
    """Initial priority |R + discount * max_a Q(s', a) - Q(s, a)| + eps with the actor's own network
    (actors hold no target network; Ape-X computes these on the actor to avoid a learner round trip)."""
    q_sa = q.gather(1, torch.as_tensor(action, dtype=torch.int64).view(-1, 1)).squeeze(1)
    target = torch.as_tensor(reward) + torch.as_tensor(discount) * q_next.max(dim=1).values
    return ((target - q_sa).abs() + eps).double().numpy()


class Actor:
    def __init__(self, cfg: Config, actor_index: int, num_actors: int, sink: ReplaySink,
                 weights: WeightSource | None = None,
                 model_factory: Callable[[gym.Space, gym.Space], torch.nn.Module] | None = None,
                 env_factory: EnvFactory | None = None) -> None:
        self.cfg, self.index = cfg, actor_index
        self.sink, self.weights = sink, weights
        a = cfg.actors
        E = a.envs_per_actor
        self.seed = actor_seed(cfg.seed, actor_index)
        make = env_factory or (lambda s: make_env(cfg.env, seed=None, training=True))
        self.envs = SyncVectorEnv([(lambda i=i: make(self.seed + i)) for i in range(E)],
                                  autoreset_mode=AutoresetMode.SAME_STEP)
        self.obs, _ = self.envs.reset(seed=[self.seed + i for i in range(E)])
        factory = model_factory or make_network_factory(cfg.network)
        torch.manual_seed(self.seed)  # same seed, same initial network: runs are reproducible
        self.net = factory(self.envs.single_observation_space, self.envs.single_action_space)
        self.net.eval()
        self.num_actions = int(self.envs.single_action_space.n)  # type: ignore[attr-defined]
        self.epsilons = actor_epsilons(actor_index, num_actors, E, a.eps_base, a.eps_alpha, a.epsilon_per)
        self.rng = np.random.default_rng(self.seed)
        self.nstep = NStepBuilder(E, cfg.learner.n_step, cfg.learner.gamma)
        self._pending: list[dict[str, np.ndarray]] = []
        self._pending_count = 0
        self._ep_return = np.zeros(E)
        self._ep_length = np.zeros(E, dtype=np.int64)
        self._since_sync = 0
        self.weights_version = -1
        self.env_steps = 0
        self.transitions_sent = 0
        self.episodes = 0

    def set_weights(self, weights: dict[str, np.ndarray], version: int) -> None:
        load_numpy_state_dict(self.net, weights)
        self.weights_version = version

    def _sync(self) -> None:
        if self.weights is None:
            return
        got = self.weights.poll()
        if got is not None:
            self.set_weights(got[1], got[0])

    @torch.no_grad()
    def _act(self) -> np.ndarray:
        q = self.net(torch.as_tensor(self.obs))
        greedy = q.argmax(dim=1).numpy()
        explore = self.rng.random(len(greedy)) < self.epsilons
        if explore.any():
            greedy = np.where(explore, self.rng.integers(self.num_actions, size=len(greedy)), greedy)
        return greedy

    def run(self, num_steps: int) -> dict[str, Any]:
        """Step every env ``num_steps`` times (``num_steps * envs_per_actor`` env steps); return stats."""
        t0 = time.perf_counter()
        returns: list[float] = []
        lengths: list[int] = []
        E = len(self.epsilons)
        for _ in range(num_steps):
            action = self._act()
            next_obs, reward, terminated, truncated, info = self.envs.step(action)
            done = terminated | truncated
            true_next = next_obs
            if done.any():
                true_next = next_obs.copy()
                for e in np.flatnonzero(done):
                    true_next[e] = info["final_obs"][e]
            out = self.nstep.step(self.obs, action, reward, true_next, terminated, truncated)
            if out is not None:
                self._pending.append(out)
                self._pending_count += len(out["action"])
            self._ep_return += reward
            self._ep_length += 1
            if done.any():
                for e in np.flatnonzero(done):
                    returns.append(float(self._ep_return[e]))
                    lengths.append(int(self._ep_length[e]))
                self._ep_return[done] = 0.0
                self._ep_length[done] = 0
                self.episodes += int(done.sum())
            self.obs = next_obs
            self.env_steps += E
            if self._pending_count >= self.cfg.actors.send_every:
                self._send()
            self._since_sync += E
            if self._since_sync >= self.cfg.actors.weight_sync_period:
                self._since_sync = 0
                self._sync()
        dt = time.perf_counter() - t0
        return {
            "actor": self.index,
            "env_steps": num_steps * E,
            "total_env_steps": self.env_steps,
            "episode_returns": returns,
            "episode_lengths": lengths,
            "epsilons": self.epsilons.tolist(),
            "weights_version": self.weights_version,
            "time_s": dt,
        }

    @torch.no_grad()
    def _send(self) -> None:
        parts = self._pending
        batch = parts[0] if len(parts) == 1 else {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        self._pending, self._pending_count = [], 0
        B = len(batch["action"])
        q_all = self.net(torch.as_tensor(np.concatenate([batch["obs"], batch["next_obs"]])))
        prios = td_priorities(q_all[:B], q_all[B:], batch["action"], batch["reward"], batch["discount"],
                              self.cfg.replay.priority_eps)
        self.sink.add(batch, prios)
        self.transitions_sent += B

    def close(self) -> None:
        if self._pending_count:
            self._send()
        self.sink.flush()
        self.envs.close()
