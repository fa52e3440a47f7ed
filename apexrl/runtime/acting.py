"""The acting roles as Ray actors (an Ape-X actor and the evaluator), in a module that does not import
torch: with the built-in MLP network their processes act in numpy (``apexrl.policy``) and start ~1.5 s of
CPU sooner each. A custom ``model_factory`` or the Nature CNN brings torch in, one thread per process.

``apexrl.runtime.workers`` re-exports both classes.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import ray

from apexrl.actor import Actor, actor_q_function
from apexrl.config import Config
from apexrl.evaluation import evaluate
from apexrl.runtime.transport import RayReplaySink, RayWeightSource

ModelFactory = Callable[[gym.Space, gym.Space], Any]


def _quiet_worker() -> None:
    logging.basicConfig(level=os.environ.get("APEXRL_LOG_LEVEL", "WARNING"))


def _one_torch_thread() -> None:
    """Acting is one small forward pass at a time: torch's thread pool would only fight the learner."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


@ray.remote
class ActorWorker:
    def __init__(self, cfg: Config, index: int, num_actors: int, shards: list[Any], ps: Any,
                 model_factory: ModelFactory | None) -> None:
        _quiet_worker()
        self.sink = RayReplaySink(shards, cfg.actors.max_inflight_sends, start=index)
        self.actor = Actor(cfg, index, num_actors, self.sink, RayWeightSource(ps), model_factory)
        _one_torch_thread()

    def run(self, num_steps: int) -> dict[str, Any]:
        stats = self.actor.run(num_steps)
        stats["dropped_sends"] = self.sink.dropped
        stats["blocked_s"] = self.sink.blocked_s
        return stats

    def set_shards(self, shards: list[Any]) -> None:
        self.sink.set_shards(shards)

    def pid(self) -> int:
        return os.getpid()

    def uses_torch(self) -> bool:
        return "torch" in sys.modules

    def close(self) -> None:
        self.actor.close()


@ray.remote(num_cpus=0)
class EvaluatorWorker:
    def __init__(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space, ps: Any,
                 model_factory: ModelFactory | None) -> None:
        _quiet_worker()
        self.cfg = cfg
        self.ps = ps
        self.q = actor_q_function(cfg, observation_space, action_space, cfg.seed, model_factory)
        _one_torch_thread()
        self.round = 0

    def evaluate(self) -> dict[str, Any]:
        got = ray.get(self.ps.get.remote(-1))
        if got is None:
            return {"eval_returns": [], "weights_version": -1}
        version, [ref] = got
        self.q.load(ray.get(ref))
        ev = self.cfg.evaluation
        self.round += 1
        t0 = time.perf_counter()
        returns = evaluate(self.q, self.cfg.env, ev.episodes, seed=self.cfg.seed * 7 + 1_000_000 + self.round,
                           epsilon=ev.epsilon)
        return {"eval_returns": returns, "weights_version": version, "eval_time_s": time.perf_counter() - t0}

    def uses_torch(self) -> bool:
        return "torch" in sys.modules
