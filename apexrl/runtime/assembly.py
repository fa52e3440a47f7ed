"""One assembly of the system: every way apexrl runs (the Ray driver, the in-process runner, the
trainer and agent APIs, tests, benchmarks) builds its shards, actors and learner from a :class:`System`,
so they share seeds, the rate limiter, the frame handling and the agent.

    system = assemble(cfg, cluster_cpus=4)        # checks env and agent, before anything starts
    shard = system.make_shard(0)                   # or ReplayShardWorker.remote(**system.shard_kwargs(0))
    actor = system.make_actor(0, sink, weights)
    loop = system.make_learner_loop(transport, publish)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from apexrl.agents import get_builder
from apexrl.agents.base import AgentBuilder, Learner, ModelFactory, Policy
from apexrl.config import Config
from apexrl.core import ReplaySink, WeightSource
from apexrl.envs.factory import check_and_resolve
from apexrl.envs.multiagent.make import is_multiagent
from apexrl.replay.client import ReplayClient, ShardTransport, batches_per_request
from apexrl.replay.rate_limiter import default_error_buffer, default_max_lead
from apexrl.runtime.actor import Actor, EnvFactory, sends_frames
from apexrl.runtime.learning import LearnerLoop, Publish
from apexrl.runtime.sizing import auto_num_actors, logical_cpus

if TYPE_CHECKING:  # a System travels to actors that act without torch
    import torch

__all__ = ["System", "assemble", "auto_num_actors", "fit_to_cluster", "logical_cpus"]


def fit_to_cluster(cfg: Config, cluster_cpus: float, cluster_gpus: float, num_actors: int) -> Config:
    """The config with its ``num_actors`` actors fitted into the CPUs the cluster has: more actors than
    free CPUs share them (fractional ``actors.num_cpus``) instead of waiting forever to be scheduled; on a
    cluster smaller than the learner's CPUs plus one, the learner takes half. A learner that asks for more
    GPUs than exist is a ConfigError naming the key."""
    from apexrl.config import ConfigError

    if cfg.learner.num_gpus > cluster_gpus:
        raise ConfigError(f"config key 'learner.num_gpus' (num_gpus) = {cfg.learner.num_gpus:g} but the Ray "
                          f"cluster has {cluster_gpus:g} GPUs; set it to at most {cluster_gpus:g}")
    actor_gpus = num_actors * cfg.actors.num_gpus
    if actor_gpus and cfg.learner.num_gpus + actor_gpus > cluster_gpus + 1e-9:
        raise ConfigError(f"config key 'actors.num_gpus' = {cfg.actors.num_gpus:g} asks for {actor_gpus:g} GPUs for "
                          f"{num_actors} actors, beside the learner's {cfg.learner.num_gpus:g}, but the Ray cluster "
                          f"has {cluster_gpus:g}; set it to at most "
                          f"{max(0.0, cluster_gpus - cfg.learner.num_gpus) / num_actors:.3g}")
    learner = cfg.learner.num_cpus
    if learner + num_actors * cfg.actors.num_cpus <= cluster_cpus:
        return cfg
    changes: dict[str, float] = {}
    if learner > cluster_cpus / 2 and learner + min(num_actors, 1) > cluster_cpus:
        learner = changes["learner.num_cpus"] = math.floor(100 * cluster_cpus / 2) / 100
    free = cluster_cpus - learner
    if num_actors * cfg.actors.num_cpus > free:
        changes["actors.num_cpus"] = max(0.01, math.floor(100 * free / num_actors) / 100)
    return cfg.replace(**changes)


@dataclass(frozen=True)
class System:
    """What to build for ``cfg``; picklable, so Ray workers build their role from the same object."""

    cfg: Config
    builder: AgentBuilder
    observation_space: gym.Space
    action_space: gym.Space
    num_actors: int
    model_factory: ModelFactory | None = None

    @property
    def frames(self) -> bool:
        return sends_frames(self.cfg, self.builder)

    @property
    def batches_per_request(self) -> int:
        return batches_per_request(self.cfg)

    def shard_kwargs(self, i: int) -> dict[str, Any]:
        """Shard ``i``'s constructor arguments: its share of capacity and of the rate limiter's band.

        The config counts transitions; a shard counts items. A sequence agent's item is a sequence that
        counts for ``insert`` new transitions when stored and ``sample`` trained ones when sampled, so a
        samples-per-insert ratio r of transitions is r * insert / sample of items."""
        cfg, r = self.cfg, self.cfg.replay
        insert, sample = self.builder.replay_units(cfg)
        spi, buffer, lead = r.samples_per_insert, 0.0, None
        if spi is not None:
            spi = spi * insert / sample
            k = self.batches_per_request
            buffer = r.spi_error_buffer / sample if r.spi_error_buffer is not None else default_error_buffer(
                spi, cfg.learner.batch_size, cfg.learner.prefetch * k, -(-cfg.actors.send_every // insert))
            lead = (r.spi_max_lead / sample / r.num_shards if r.spi_max_lead is not None
                    else default_max_lead(cfg.learner.batch_size, k))
        return dict(capacity=max(1, r.capacity // insert // r.num_shards), alpha=r.alpha, seed=cfg.seed * 101 + i,
                    min_size=max(1, r.learning_starts // insert // r.num_shards), frames=self.frames,
                    samples_per_insert=spi, error_buffer=buffer / r.num_shards, max_lead=lead,
                    batch_size=cfg.learner.batch_size)

    def make_shard(self, i: int) -> Any:
        from apexrl.replay.shard import ReplayShard  # numba: only shard processes pay for it

        return ReplayShard(**self.shard_kwargs(i))

    def make_actor(self, i: int, sink: ReplaySink, weights: WeightSource | None = None,
                   env_factory: EnvFactory | None = None) -> Actor:
        if is_multiagent(self.cfg.env):
            from apexrl.runtime.multi_actor import MultiAgentActor

            return MultiAgentActor(self.cfg, self.builder, i, self.num_actors, sink, weights,  # type: ignore[return-value]
                                   self.model_factory)
        return Actor(self.cfg, self.builder, i, self.num_actors, sink, weights, self.model_factory, env_factory)

    def make_learner(self, device: str | None = None) -> Learner:
        return self.builder.make_learner(self.cfg, self.observation_space, self.action_space, self.model_factory,
                                         device)

    def make_learner_loop(self, transport: ShardTransport, publish: Publish, learner: Learner | None = None,
                          device: str | None = None) -> LearnerLoop:
        lc = self.cfg.learner
        client = ReplayClient(transport, self.cfg.replay.num_shards, lc.batch_size, lc.prefetch,
                              self.batches_per_request, seed=self.cfg.seed + 17)
        return LearnerLoop(self.cfg, learner or self.make_learner(device), client, publish)

    def make_network(self) -> torch.nn.Module:
        return self.builder.make_network(self.cfg, self.observation_space, self.action_space, self.model_factory)

    def make_acting_network(self, seed: int, role: str = "actors") -> Any:
        """What a policy acts with (``AgentBuilder.make_acting_network``): torch-free where the agent can."""
        return self.builder.make_acting_network(self.cfg, self.observation_space, self.action_space,
                                                self.model_factory, seed, role)

    def make_eval_policy(self, network: Any, num_envs: int, seed: int,
                         explore: float | None = None) -> Policy:
        return self.builder.make_eval_policy(self.cfg, network, self.action_space, num_envs, seed, explore)


def assemble(cfg: Config, num_actors: int | None = None, cluster_cpus: float | None = None,
             model_factory: ModelFactory | None = None) -> System:
    """Check the env and the agent (one clear error before anything starts) and size the system (its
    ``cfg`` carries the env's creator and mask source as found here):
    ``num_actors`` given, else ``actors.num_actors``, else one per CPU of ``cluster_cpus`` (default 1)."""
    builder = get_builder(cfg.agent)
    env_cfg, obs_space, act_space = check_and_resolve(cfg.env)
    cfg = dataclasses.replace(cfg, env=env_cfg)  # creator and mask source found out once, here
    builder.check_spaces(cfg.env.id, obs_space, act_space)
    if is_multiagent(cfg.env):
        from apexrl.envs.multiagent.opponents import check_opponent

        check_opponent(cfg.multiagent.opponent)
    if is_multiagent(cfg.env) and not builder.acts_by_slot:
        from apexrl.config import AGENTS, ConfigError

        fit = [a for a in AGENTS if get_builder(a).acts_by_slot]
        raise ConfigError(f"config key 'agent' = '{cfg.agent}' cannot train the multi-agent env '{cfg.env.id}' yet; "
                          f"allowed there: {', '.join(fit)}")
    n = num_actors if num_actors is not None else auto_num_actors(cfg, cluster_cpus or 1.0)
    return System(cfg, builder, obs_space, act_space, n, model_factory)
