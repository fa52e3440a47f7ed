"""The Ape-X actor's env loop: acts in a batch of envs with the agent's policy, builds n-step
transitions, has the policy prioritize them and sends them to replay in batches (Horgan et al., 2018,
Algorithm 1). Agent-free: what to do in a state and how to prioritize is the policy's business.

Two observation paths:

* arrays (classic control): the n-step builder carries the observations themselves; the policy
  prioritizes a send from them (``Policy.priorities``).
* frame stacks (Atari, ``frame_stacked(cfg.env)``): a :class:`~apexrl.replay.frames.FrameStackEncoder`
  gives every frame an id; the n-step builder carries ``[K frame ids, key]`` rows, where the key is a
  serial number per stacked observation, and a send is the encoder's de-duplicated payload (each frame
  once, ~7 KB per transition instead of 56 KB), the format ``FramePrioritizedReplay.add`` takes. The
  policy prioritizes by key from values it kept when acting (``Policy.keyed_priorities``).

Ray-free: ``runtime/workers.py`` wraps this class as a Ray actor; tests drive it in-process.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from apexrl.agents.base import AgentBuilder, ModelFactory
from apexrl.config import Config
from apexrl.core import ReplaySink, WeightSource
from apexrl.envs import frame_stacked
from apexrl.envs.contract import NonFiniteEnvError, first_non_finite, non_finite_items, non_finite_rows
from apexrl.envs.factory import make_actor_envs, sync_vector_env
from apexrl.envs.spaces import codec_of
from apexrl.replay.frames import FrameStackEncoder

log = logging.getLogger(__name__)

EnvFactory = Callable[[int], gym.Env]


def sends_frames(cfg: Config, builder: AgentBuilder) -> bool:
    """Whether actors send frame stacks as de-duplicated frames (and shards store them so): Atari stacks, for
    an agent whose replay items are single transitions."""
    return frame_stacked(cfg.env) and builder.frame_replay


def actor_seed(seed: int, actor_index: int) -> int:
    """Each actor (and each of its envs, +i) gets its own stream, stable across restarts."""
    return (seed * 1_000_003 + 7919 * (actor_index + 1)) % (2**31 - 1)


def finite_priorities(prios: np.ndarray) -> tuple[np.ndarray, int]:
    """Replay rejects non-finite priorities; a diverged actor network must not silently drop all its
    data, so such transitions get priority 1 (the learner then sees, and counts, the bad updates)."""
    bad = ~np.isfinite(prios)
    if not bad.any():
        return prios, 0
    return np.where(bad, 1.0, prios), int(bad.sum())


def pull(source: WeightSource | None, apply: Callable[[dict[str, np.ndarray], int], None]) -> None:
    """Newer weights from ``source``, if any, handed to ``apply(weights, version)``; never waits."""
    got = source.poll() if source is not None else None
    if got is not None:
        apply(got[1], got[0])


class ActorBase:
    """What every kind of actor shares (this module's and ``multi_actor.py``'s): replay items waiting to be sent,
    their priorities and send, and pulling weights every ``actors.weight_sync_period`` env steps."""

    cfg: Config
    policy: Any

    def _start_sending(self, sink: ReplaySink, weights: WeightSource | None) -> None:
        self.sink, self.weights = sink, weights
        self._pending: list[dict[str, np.ndarray]] = []
        self._pending_count = 0  # transitions the pending items count for (send_every)
        self._since_sync = 0
        self.weights_version = -1
        self.transitions_sent = 0
        self.nonfinite_priorities = 0

    def set_weights(self, weights: dict[str, np.ndarray], version: int) -> None:
        self.policy.set_weights(weights)
        self.weights_version = version

    def _sync(self) -> None:
        pull(self.weights, self.set_weights)

    def _queue(self, out: dict[str, np.ndarray], units: int = 1) -> None:
        self._pending.append(out)
        self._pending_count += len(out["action"]) * units

    def _stepped(self, env_steps: int) -> None:
        """After a vector step of ``env_steps``: send what is due, pull weights when due."""
        if self._pending_count >= self.cfg.actors.send_every:
            self._send()
        self._since_sync += env_steps
        if self._since_sync >= self.cfg.actors.weight_sync_period:
            self._since_sync = 0
            self._sync()

    def _take_pending(self) -> dict[str, np.ndarray]:
        parts = self._pending
        self._pending, self._pending_count = [], 0
        return parts[0] if len(parts) == 1 else {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def _send(self) -> None:
        batch = self._take_pending()
        self._deliver(batch, self.policy.priorities(batch))

    def _deliver(self, batch: dict[str, np.ndarray], prios: np.ndarray) -> None:
        prios, bad = finite_priorities(prios)
        self.nonfinite_priorities += bad
        self.sink.add(batch, prios)
        self.transitions_sent += len(batch["action"])

    def _flush(self) -> None:
        if self._pending_count:
            self._send()
        self.sink.flush()


class Actor(ActorBase):
    def __init__(self, cfg: Config, builder: AgentBuilder, actor_index: int, num_actors: int, sink: ReplaySink,
                 weights: WeightSource | None = None, model_factory: ModelFactory | None = None,
                 env_factory: EnvFactory | None = None) -> None:
        self.cfg, self.index = cfg, actor_index
        self._start_sending(sink, weights)
        E = cfg.actors.envs_per_actor
        self.seed = actor_seed(cfg.seed, actor_index)
        if env_factory is None:
            self.envs, self.obs = make_actor_envs(cfg.env, E, self.seed)
        else:
            self.envs, self.obs = sync_vector_env([(lambda i=i: env_factory(self.seed + i)) for i in range(E)],
                                                  self.seed)
        obs_space, act_space = self.envs.single_observation_space, self.envs.single_action_space
        self.codec = codec_of(obs_space)  # structured observations: their float leaves are checked for NaN
        # Same seed, same initial network: runs are reproducible. An agent may act without torch (numpy MLPs).
        net = builder.make_acting_network(cfg, obs_space, act_space, model_factory, self.seed)
        self.frames = sends_frames(cfg, builder)
        key_capacity = self._init_frames(E) if self.frames else 0
        self.policy = builder.make_actor_policy(cfg, net, act_space, actor_index, num_actors, E, self.seed,
                                                key_capacity)
        self.writer = builder.make_writer(cfg, self.policy, E)  # n-step transitions, or sequences
        self._item_steps = builder.replay_units(cfg)[0]  # transitions an item counts for (send_every)
        self._obs_shape = self.obs.shape[1:]
        self.frames_sent = 0
        self._ep_return = np.zeros(E)
        self._ep_length = np.zeros(E, dtype=np.int64)
        self.env_steps = 0
        self.nonfinite_steps = 0  # env steps with a non-finite reward or observation (env.non_finite: drop)
        self.nonfinite_dropped = 0  # n-step transitions they touched, not sent
        self.episodes = 0

    # ------------------------------------------------------------------ frame path (Atari)
    def _init_frames(self, E: int) -> int:
        """Set up the frame encoder and the first keys; return how many recent keys the policy must keep."""
        K = self.cfg.env.frame_stack
        if self.obs.ndim < 3 or self.obs.shape[1] != K:
            raise ValueError(f"env '{self.cfg.env.id}' gives observations of shape {self.obs.shape[1:]}, but "
                             f"the frame path needs [{K}, H, W] stacks (env.frame_stack={K})")
        n, send = self.cfg.learner.n_step, self.cfg.actors.send_every
        # Frames and keys stay needed from a window's first observation until its send: at most
        # (send_every / E + n + K + 2) vector steps, each observing <= 2E stacks (resets: K frames each).
        steps = -(-send // E) + n + K + 2
        self.encoder = FrameStackEncoder(E, K, cache_size=max(4096, 2 * E * K * steps))
        self._serials = 0
        ids = self.encoder.observe_reset(np.arange(E), self.obs)
        self._tokens = np.concatenate([ids, self._new_serials(E)[:, None]], axis=1)
        return max(1024, 4 * E * steps)

    def _new_serials(self, m: int) -> np.ndarray:
        out = np.arange(self._serials, self._serials + m, dtype=np.int64)
        self._serials += m
        return out

    def _frame_tokens(self, next_obs: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                      done: np.ndarray, info: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Advance the encoder; return (tokens of next_obs, tokens of the true successors)."""
        final_tokens = None
        ended = np.flatnonzero(done)
        if len(ended):  # observe_final must come before observe_step of the same vector step
            stacks = np.stack([info["final_obs"][e] for e in ended])
            final_tokens = np.concatenate([self.encoder.observe_final(ended, stacks),
                                           self._new_serials(len(ended))[:, None]], axis=1)
            boot = truncated[ended] & ~terminated[ended]  # only a truncated window bootstraps
            self.policy.remember(stacks, final_tokens[:, -1], boot)
        ids = self.encoder.observe_step(next_obs, reset_mask=done)
        tokens = np.concatenate([ids, self._new_serials(len(ids))[:, None]], axis=1)
        true_next = tokens
        if final_tokens is not None:
            true_next = tokens.copy()
            true_next[ended] = final_tokens
        return tokens, true_next

    def _frame_payload(self, batch: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The FramePrioritizedReplay payload of a batch of token transitions, and its priorities."""
        K = self.cfg.env.frame_stack
        s0, s1 = batch["obs"][:, K], batch["next_obs"][:, K]
        if not self.policy.knows(s1):  # successors not acted on yet: the current observations
            self.policy.precompute(self.obs, self._tokens[:, K])
        prios = self.policy.keyed_priorities(s0, batch["action"], batch["reward"], batch["discount"], s1)
        payload = self.encoder.encode(batch["obs"][:, :K], batch["next_obs"][:, :K])
        self.frames_sent += len(payload["frames"])
        for k in ("action", "reward", "discount"):
            payload[k] = batch[k]
        return payload, prios

    # ------------------------------------------------------------------ the loop
    def run(self, num_steps: int, global_env_steps: int | None = None) -> dict[str, Any]:
        """Step every env ``num_steps`` times (``num_steps * envs_per_actor`` env steps); return stats.
        ``global_env_steps``: the run's count over all actors now (for the policy's schedules)."""
        t0, started_at = time.perf_counter(), time.time()
        if global_env_steps is not None:
            self.policy.observe_global_steps(global_env_steps)
        returns: list[float] = []
        lengths: list[int] = []
        levels: list[float] = []
        E = self.cfg.actors.envs_per_actor
        for _ in range(num_steps):
            action = self.policy.act(self.obs, self._tokens[:, -1] if self.frames else None)
            next_obs, reward, terminated, truncated, info = self.envs.step(action)
            bad = first_non_finite(reward, next_obs, self.codec)
            if bad is not None and self.cfg.env.non_finite == "drop":
                self.nonfinite_steps += int(non_finite_rows(reward, next_obs, self.codec).sum())
                bad = None
            if bad is not None:
                what, e, value = bad
                raise NonFiniteEnvError(f"env '{self.cfg.env.id}' returned a non-finite {what} ({value}) in actor "
                                        f"{self.index}, env slot {e}, at the actor's env step {self.env_steps + e:,}")
            done = terminated | truncated
            if self.frames:
                tokens, true_next = self._frame_tokens(next_obs, terminated, truncated, done, info)
                out = self.writer.step(self._tokens, action, reward, true_next, terminated, truncated)
                self._tokens = tokens
            else:
                true_next = next_obs
                if done.any():
                    true_next = next_obs.copy()
                    for e in np.flatnonzero(done):
                        true_next[e] = info["final_obs"][e]
                out = self.writer.step(self.obs, action, reward, true_next, terminated, truncated)
            if out is not None and self.nonfinite_steps and self.cfg.env.non_finite == "drop":
                out = self._finite(out)
            if out is not None:
                self._queue(out, self._item_steps)
            self._ep_return += reward if not self.nonfinite_steps else np.where(np.isfinite(reward), reward, 0.0)
            self._ep_length += 1
            if done.any():
                for e in np.flatnonzero(done):
                    returns.append(float(self._ep_return[e]))
                    lengths.append(int(self._ep_length[e]))
                    levels.append(float(self.policy.exploration[e]))
                self.policy.reset_slots(done)
                self._ep_return[done] = 0.0
                self._ep_length[done] = 0
                self.episodes += int(done.sum())
            self.obs = next_obs
            self.env_steps += E
            self._stepped(E)
        return {
            "actor": self.index,
            "env_steps": num_steps * E,
            "total_env_steps": self.env_steps,
            "episode_returns": returns,
            "episode_lengths": lengths,
            "episode_exploration": levels,
            "exploration": self.policy.exploration.tolist(),
            "exploration_name": self.policy.exploration_name,
            "weights_version": self.weights_version,
            "transitions_sent": self.transitions_sent,
            "frames_sent": self.frames_sent,
            "nonfinite_priorities": self.nonfinite_priorities,
            "nonfinite_steps": self.nonfinite_steps,
            "nonfinite_dropped": self.nonfinite_dropped,
            "time_s": time.perf_counter() - t0,
            "started_at": started_at,  # wall clock: the run's start-up ends at its first actor's first step
        }

    def _finite(self, out: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
        """``out`` without the transitions whose n-step reward or observations are not finite."""
        keep = ~non_finite_items(out, self._obs_shape, self.codec)
        if keep.all():
            return out
        self.nonfinite_dropped += int((~keep).sum())
        return {k: v[keep] for k, v in out.items()} if keep.any() else None

    def _send(self) -> None:
        if not self.frames:
            return super()._send()
        self._deliver(*self._frame_payload(self._take_pending()))

    def close(self) -> None:
        self._flush()
        self.envs.close()
