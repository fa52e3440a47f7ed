"""All Ape-X roles in one process, interleaved: the same System, Actor, ReplayShard, replay client and
learner loop as the Ray runtime, with direct calls for transport. For tests, debugging, profiling and
benchmarks of the algorithm without Ray.

The loop alternates the roles the way the shards' rate limiter lets them run side by side: actors act
while the shards accept data, the learner updates while they grant samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from apexrl.agents.base import ModelFactory
from apexrl.config import Config
from apexrl.core import Batch, Weights
from apexrl.evaluation import evaluate
from apexrl.replay.client import LocalShards
from apexrl.replay.shard import ReplayShard
from apexrl.runtime.actor import Actor
from apexrl.runtime.assembly import System, assemble
from apexrl.runtime.learning import LearnerLoop
from apexrl.runtime.policy_set import actor_sink


class LocalSink:
    """Round-robin over in-process shards; the rate limiter's actor side is the runner's loop."""

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
class LocalSystem:
    """Every role built in this process from one System, wired as the Ray runtime wires them."""

    system: System
    shards: list[ReplayShard]
    hub: LocalWeights
    loop: LearnerLoop
    actors: list[Actor]

    def inserting_allowed(self) -> bool:
        return any(s.insert_allowed() for s in self.shards)

    def act(self, steps: int) -> list[dict]:
        return [a.run(steps) for a in self.actors]

    def learn(self, max_updates: int) -> dict:
        """Up to ``max_updates`` updates; stops early when replay refuses a sample."""
        return self.loop.train(float("inf"), max_updates=max_updates, stop_when_refused=True)

    def evaluate(self, episodes: int, seed: int) -> list[float]:
        net = self.system.make_network()
        policy = self.system.make_eval_policy(net, episodes, seed)
        policy.set_weights(self.loop.learner.weights())
        return evaluate(policy, self.system.cfg.env, episodes, seed=seed)

    def close(self) -> None:
        for a in self.actors:
            a.close()


def build_local(cfg: Config, num_actors: int = 1, model_factory: ModelFactory | None = None) -> LocalSystem:
    system = assemble(cfg, num_actors=num_actors, model_factory=model_factory)
    shards = [system.make_shard(i) for i in range(system.num_shards)]
    hub = LocalWeights()
    loop = system.make_learner_loop(LocalShards(shards), hub.publish)
    actors = [system.make_actor(i, actor_sink(system, lambda group, i=i: LocalSink(group, i), shards), hub.source())
              for i in range(num_actors)]
    return LocalSystem(system, shards, hub, loop, actors)


def run_local(cfg: Config, env_steps: int, num_actors: int = 1, updates_per_round: int = 4,
              steps_per_round: int = 8, eval_episodes: int = 0,
              model_factory: ModelFactory | None = None) -> LocalResult:
    """Alternate ``steps_per_round`` vector steps of every actor (while replay accepts data) with up to
    ``updates_per_round`` learner updates until ``env_steps`` env steps were taken; optionally evaluate
    greedily at the end."""
    local = build_local(cfg, num_actors, model_factory)
    result = LocalResult(0, 0)
    while result.env_steps < env_steps:
        if local.inserting_allowed():
            for stats in local.act(steps_per_round):
                result.env_steps += stats["env_steps"]
                result.train_returns += stats["episode_returns"]
        res = local.learn(updates_per_round)
        if "loss" in res["metrics"]:
            result.losses.append(res["metrics"]["loss"])
        result.updates = local.loop.learner.updates
    local.close()
    if eval_episodes:
        result.eval_returns = local.evaluate(eval_episodes, seed=cfg.seed + 999)
    return result


__all__ = ["LocalResult", "LocalSink", "LocalSystem", "LocalWeights", "build_local", "run_local"]
