"""All Ape-X roles in one process, interleaved: the same Actor, ReplayShard and Learner classes the Ray
runtime wraps, with direct calls for transport. For tests, debugging and profiling without Ray."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import torch

from apexrl.actor import Actor
from apexrl.config import Config
from apexrl.core import Batch, Weights
from apexrl.envs import check_env, is_atari
from apexrl.evaluation import evaluate
from apexrl.learner import Learner
from apexrl.replay.shard import ReplayShard


class LocalSink:
    """Round-robin over in-process shards; the rate limiter's actor side is a no-op here because the
    loop below alternates the roles itself."""

    def __init__(self, shards: list[ReplayShard], start: int = 0) -> None:
        self.shards, self._next = shards, start

    def add(self, batch: Batch, priorities: np.ndarray) -> None:
        self.shards[self._next % len(self.shards)].add(batch, priorities)
        self._next += 1

    def flush(self) -> None:
        pass


class LocalWeights:
    def __init__(self) -> None:
        self.version: int = -1
        self.weights: Weights | None = None

    def publish(self, version: int, weights: Weights) -> None:
        self.version, self.weights = version, weights

    def source(self) -> _Source:
        return _Source(self)


@dataclass
class _Source:
    hub: LocalWeights
    seen: int = -1

    def poll(self) -> tuple[int, Weights] | None:
        if self.hub.weights is None or self.hub.version <= self.seen:
            return None
        self.seen = self.hub.version
        return self.hub.version, self.hub.weights


@dataclass
class LocalResult:
    env_steps: int
    updates: int
    train_returns: list[float] = field(default_factory=list)
    eval_returns: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)


@dataclass
class LocalTopology:
    """Every role built in this process and wired as the Ray runtime wires them."""

    cfg: Config
    shards: list[ReplayShard]
    hub: LocalWeights
    learner: Learner
    actors: list[Actor]

    def learn_once(self, shard: ReplayShard) -> dict[str, float] | None:
        """One learner update from ``shard``, priorities written back, weights published on the learner's
        period; None when the shard refuses to sample (warming up or rate-limited)."""
        res = shard.sample(self.cfg.learner.batch_size, self.learner.beta())
        if "batch" not in res:
            return None
        prios, metrics = self.learner.update(res["batch"], res["weights"])
        if prios is not None:
            shard.update_priorities(res["indices"], prios)
        if self.learner.updates % self.cfg.learner.publish_period == 0:
            self.hub.publish(self.learner.updates, self.learner.weights())
        return metrics

    def close(self) -> None:
        for a in self.actors:
            a.close()


def build_local(cfg: Config, num_actors: int = 1,
                model_factory: Callable[[gym.Space, gym.Space], torch.nn.Module] | None = None) -> LocalTopology:
    obs_space, act_space = check_env(cfg.env)
    r = cfg.replay
    shards = [ReplayShard(r.capacity // r.num_shards, r.alpha, seed=cfg.seed + i,
                          min_size=max(1, r.learning_starts // r.num_shards), frames=is_atari(cfg.env))
              for i in range(r.num_shards)]
    hub = LocalWeights()
    learner = Learner(cfg, obs_space, act_space, model_factory)
    hub.publish(0, learner.weights())
    actors = [Actor(cfg, i, num_actors, LocalSink(shards, i), hub.source(), model_factory) for i in range(num_actors)]
    return LocalTopology(cfg, shards, hub, learner, actors)


def run_local(cfg: Config, env_steps: int, num_actors: int = 1, updates_per_round: int = 4,
              steps_per_round: int = 8, eval_episodes: int = 0,
              model_factory: Callable[[gym.Space, gym.Space], torch.nn.Module] | None = None) -> LocalResult:
    """Alternate ``steps_per_round`` vector steps of every actor with ``updates_per_round`` learner updates
    until ``env_steps`` env steps were taken; optionally evaluate greedily at the end."""
    topo = build_local(cfg, num_actors, model_factory)
    rng = np.random.default_rng(cfg.seed)
    result = LocalResult(0, 0)
    while result.env_steps < env_steps:
        for a in topo.actors:
            stats = a.run(steps_per_round)
            result.env_steps += stats["env_steps"]
            result.train_returns += stats["episode_returns"]
        for _ in range(updates_per_round):
            ready = [s for s in topo.shards if len(s.buffer) >= s.min_size]
            if not ready:
                break
            metrics = topo.learn_once(ready[int(rng.integers(len(ready)))])
            if metrics is None:
                break
            if "loss" in metrics:
                result.losses.append(metrics["loss"])
        result.updates = topo.learner.updates
    topo.close()
    if eval_episodes:
        result.eval_returns = evaluate(topo.learner.net.cpu(), cfg.env, eval_episodes, seed=cfg.seed + 999)
    return result


__all__ = ["LocalResult", "LocalSink", "LocalTopology", "LocalWeights", "build_local", "run_local"]
