"""The Ape-X actor: acts eps-greedily in a batch of envs, builds n-step transitions, prioritizes them
locally and sends them to replay in batches (Horgan et al., 2018, Algorithm 1).

Two observation paths:

* arrays (classic control): the n-step builder carries the observations themselves; priorities are
  computed at send time with one forward pass over obs and next_obs.
* frame stacks (Atari, ``frame_stacked(cfg.env)``): a :class:`~apexrl.replay.frames.FrameStackEncoder`
  gives every 84x84 frame an id; the n-step builder carries ``[K frame ids, state serial]`` rows, and a
  send is the encoder's de-duplicated payload (each frame once, ~7 KB per transition instead of 56 KB),
  the format ``FramePrioritizedReplay.add`` takes. Priorities reuse the Q-values computed when acting
  (as in the paper): every stacked observation gets a serial number, and a small ring keeps
  Q(s, .) per serial, so |R + gamma^n max_a Q(s_{t+n}, a) - Q(s_t, a_t)| needs no extra forward pass
  except for final observations of episodes (one small pass per episode end).

Ray-free: ``runtime/`` wraps this class as a Ray actor; tests drive it in-process.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from apexrl.config import Config
from apexrl.core import ReplaySink, WeightSource
from apexrl.envs import make_env
from apexrl.envs.atari import frame_stacked
from apexrl.exploration import actor_epsilons
from apexrl.networks import load_numpy_state_dict, make_network_factory
from apexrl.replay.frames import FrameStackEncoder
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
        self.frames = frame_stacked(cfg.env)
        self.frames_sent = 0
        if self.frames:
            self._init_frames(E)
        self._pending: list[dict[str, np.ndarray]] = []
        self._pending_count = 0
        self._ep_return = np.zeros(E)
        self._ep_length = np.zeros(E, dtype=np.int64)
        self._since_sync = 0
        self.weights_version = -1
        self._q_now: torch.Tensor | None = None
        self.env_steps = 0
        self.transitions_sent = 0
        self.nonfinite_priorities = 0
        self.episodes = 0

    def set_weights(self, weights: dict[str, np.ndarray], version: int) -> None:
        load_numpy_state_dict(self.net, weights)
        self.weights_version = version
        self._q_now = None  # act on the new weights (the ring entry is overwritten then)

    # ------------------------------------------------------------------ frame path (Atari)
    def _init_frames(self, E: int) -> None:
        K = self.cfg.env.frame_stack
        if self.obs.ndim < 3 or self.obs.shape[1] != K:
            raise ValueError(f"env '{self.cfg.env.id}' gives observations of shape {self.obs.shape[1:]}, but "
                             f"the frame path needs [{K}, H, W] stacks (env.frame_stack={K})")
        n, send = self.cfg.learner.n_step, self.cfg.actors.send_every
        # Frames and serials stay needed from a window's first observation until its send: at most
        # (send_every / E + n + K + 2) vector steps, each observing <= 2E stacks (resets: K frames each).
        steps = -(-send // E) + n + K + 2
        self.encoder = FrameStackEncoder(E, K, cache_size=max(4096, 2 * E * K * steps))
        self._qring_size = max(1024, 4 * E * steps)
        self._qring = np.zeros((self._qring_size, self.num_actions), dtype=np.float32)
        self._qowner = np.full(self._qring_size, -1, dtype=np.int64)
        self._serials = 0
        ids = self.encoder.observe_reset(np.arange(E), self.obs)
        self._tokens = np.concatenate([ids, self._new_serials(E)[:, None]], axis=1)

    def _new_serials(self, m: int) -> np.ndarray:
        out = np.arange(self._serials, self._serials + m, dtype=np.int64)
        self._serials += m
        return out

    def _store_q(self, serials: np.ndarray, q: np.ndarray) -> None:
        self._qring[serials % self._qring_size] = q
        self._qowner[serials % self._qring_size] = serials

    @torch.no_grad()
    def _frame_tokens(self, next_obs: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                      done: np.ndarray, info: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Advance the encoder; return (tokens of next_obs, tokens of the true successors)."""
        final_tokens = None
        ended = np.flatnonzero(done)
        if len(ended):  # observe_final must come before observe_step of the same vector step
            stacks = np.stack([info["final_obs"][e] for e in ended])
            final_tokens = np.concatenate([self.encoder.observe_final(ended, stacks),
                                           self._new_serials(len(ended))[:, None]], axis=1)
            q = np.zeros((len(ended), self.num_actions), dtype=np.float32)
            boot = truncated[ended] & ~terminated[ended]  # only a truncated window bootstraps
            if boot.any():
                q[boot] = self.net(torch.as_tensor(stacks[boot])).numpy()
            self._store_q(final_tokens[:, -1], q)
        ids = self.encoder.observe_step(next_obs, reset_mask=done)
        tokens = np.concatenate([ids, self._new_serials(len(ids))[:, None]], axis=1)
        true_next = tokens
        if final_tokens is not None:
            true_next = tokens.copy()
            true_next[ended] = final_tokens
        return tokens, true_next

    @torch.no_grad()
    def _frame_payload(self, batch: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The FramePrioritizedReplay payload of a batch of token transitions, and its priorities."""
        K = self.cfg.env.frame_stack
        s0, s1 = batch["obs"][:, K], batch["next_obs"][:, K]
        if (self._qowner[s1 % self._qring_size] != s1).any():
            # Successors not acted on yet: the current observations. Their Q-values are the ones the
            # next _act needs anyway, so compute them now and keep them for it.
            self._q_now = self.net(torch.as_tensor(self.obs))
            self._store_q(self._tokens[:, K], self._q_now.numpy())
        if (self._qowner[s0 % self._qring_size] != s0).any() or (self._qowner[s1 % self._qring_size] != s1).any():
            raise RuntimeError("actor Q-value ring overwritten before send; this is a bug (ring too small)")
        q_sa = self._qring[s0 % self._qring_size, batch["action"]].astype(np.float64)
        q_next = self._qring[s1 % self._qring_size].max(axis=1).astype(np.float64)
        target = batch["reward"].astype(np.float64) + batch["discount"].astype(np.float64) * q_next
        prios = np.abs(target - q_sa) + self.cfg.replay.priority_eps
        payload = self.encoder.encode(batch["obs"][:, :K], batch["next_obs"][:, :K])
        self.frames_sent += len(payload["frames"])
        for k in ("action", "reward", "discount"):
            payload[k] = batch[k]
        return payload, prios

    def _sync(self) -> None:
        if self.weights is None:
            return
        got = self.weights.poll()
        if got is not None:
            self.set_weights(got[1], got[0])

    @torch.no_grad()
    def _act(self) -> np.ndarray:
        if self._q_now is not None:  # computed by the last send (frame path)
            q, self._q_now = self._q_now, None
        else:
            q = self.net(torch.as_tensor(self.obs))
            if self.frames:
                self._store_q(self._tokens[:, -1], q.numpy())
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
            if self.frames:
                tokens, true_next = self._frame_tokens(next_obs, terminated, truncated, done, info)
                out = self.nstep.step(self._tokens, action, reward, true_next, terminated, truncated)
                self._tokens = tokens
            else:
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
            "transitions_sent": self.transitions_sent,
            "frames_sent": self.frames_sent,
            "nonfinite_priorities": self.nonfinite_priorities,
            "time_s": dt,
        }

    def _finite(self, prios: np.ndarray) -> np.ndarray:
        """Replay rejects non-finite priorities; a diverged actor network must not silently drop all its
        data, so such transitions get priority 1 (the learner then sees, and counts, the bad updates)."""
        bad = ~np.isfinite(prios)
        if bad.any():
            self.nonfinite_priorities += int(bad.sum())
            prios = np.where(bad, 1.0, prios)
        return prios

    @torch.no_grad()
    def _send(self) -> None:
        parts = self._pending
        batch = parts[0] if len(parts) == 1 else {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        self._pending, self._pending_count = [], 0
        B = len(batch["action"])
        if self.frames:
            payload, prios = self._frame_payload(batch)
            self.sink.add(payload, self._finite(prios))
            self.transitions_sent += B
            return
        q_all = self.net(torch.as_tensor(np.concatenate([batch["obs"], batch["next_obs"]])))
        prios = td_priorities(q_all[:B], q_all[B:], batch["action"], batch["reward"], batch["discount"],
                              self.cfg.replay.priority_eps)
        self.sink.add(batch, self._finite(prios))
        self.transitions_sent += B

    def close(self) -> None:
        if self._pending_count:
            self._send()
        self.sink.flush()
        self.envs.close()
