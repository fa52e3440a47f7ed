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
    # Several policies (``multiagent.policies``, or agents with different spaces): one System per policy,
    # with its own config (``multiagent.policy_id`` its id), agent and spaces; empty for one policy.
    policies: tuple[System, ...] = ()

    @property
    def policy_ids(self) -> tuple[str, ...]:
        return tuple(m.cfg.multiagent.policy_id for m in self.policies) or (self.cfg.multiagent.policy_id,)

    @property
    def trained(self) -> tuple[System, ...]:
        """The policies with shards and learner updates (all of them, or ``multiagent.policies_to_train``)."""
        train = self.cfg.multiagent.policies_to_train
        return tuple(m for m in self.policies if train is None or m.cfg.multiagent.policy_id in train)

    @property
    def num_shards(self) -> int:
        """Every trained policy has ``replay.num_shards`` shards of its own, in consecutive groups."""
        return self.cfg.replay.num_shards * max(1, len(self.trained))

    def member(self, policy_id: str | None = None) -> System:
        """Policy ``policy_id``'s System (None: the only one, or the first)."""
        if not self.policies:
            return self
        for m in self.policies:
            if policy_id is None or m.cfg.multiagent.policy_id == policy_id:
                return m
        raise KeyError(policy_id)

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
        if self.policies:
            per = self.cfg.replay.num_shards
            kw = self.trained[i // per].shard_kwargs(i % per)
            return {**kw, "seed": kw["seed"] + 7_919 * (i // per)}
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

            return MultiAgentActor(self, i, sink, weights)  # type: ignore[return-value]
        return Actor(self.cfg, self.builder, i, self.num_actors, sink, weights, self.model_factory, env_factory)

    def make_learner(self, device: str | None = None) -> Learner:
        if self.policies:
            from apexrl.runtime.policy_set import PolicySetLearner

            return PolicySetLearner({m.cfg.multiagent.policy_id: m.make_learner(device)  # type: ignore[return-value]
                                     for m in self.policies})
        return self.builder.make_learner(self.cfg, self.observation_space, self.action_space, self.model_factory,
                                         device)

    def make_learner_loop(self, transport: ShardTransport, publish: Publish, learner: Learner | None = None,
                          device: str | None = None) -> LearnerLoop:
        if self.policies:
            return self._policy_set_loop(transport, publish, learner, device)  # type: ignore[return-value]
        lc = self.cfg.learner
        client = ReplayClient(transport, self.cfg.replay.num_shards, lc.batch_size, lc.prefetch,
                              self.batches_per_request, seed=self.cfg.seed + 17)
        return LearnerLoop(self.cfg, learner or self.make_learner(device), client, publish)

    def _policy_set_loop(self, transport: ShardTransport, publish: Publish, learner: Learner | None,
                         device: str | None) -> Any:
        import time

        from apexrl.runtime.policy_set import GroupTransport, PolicySetLearner, PolicySetLoop

        learners = learner if isinstance(learner, PolicySetLearner) else self.make_learner(device)
        per = self.cfg.replay.num_shards
        loops = {}
        for g, m in enumerate(self.trained):
            pid = m.cfg.multiagent.policy_id
            loops[pid] = m.make_learner_loop(GroupTransport(transport, g * per), lambda v, w: None,
                                             learners.learners[pid])  # type: ignore[union-attr]
        return PolicySetLoop(loops, learners, publish, time.sleep)  # type: ignore[arg-type]

    def make_network(self) -> torch.nn.Module:
        """The torch network (several policies: ``{policy id: network}``)."""
        if self.policies:
            return {m.cfg.multiagent.policy_id: m.make_network() for m in self.policies}  # type: ignore[return-value]
        return self.builder.make_network(self.cfg, self.observation_space, self.action_space, self.model_factory)

    def make_acting_network(self, seed: int, role: str = "actors") -> Any:
        """What a policy acts with (``AgentBuilder.make_acting_network``): torch-free where the agent can.
        Several policies: ``{policy id: network}``."""
        if self.policies:
            return {m.cfg.multiagent.policy_id: m.make_acting_network(seed, role) for m in self.policies}
        return self.builder.make_acting_network(self.cfg, self.observation_space, self.action_space,
                                                self.model_factory, seed, role)

    def loaded_network(self, net_state: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """A network (or one per policy) with ``net_state`` loaded (a checkpoint's or published weights), and
        those weights as arrays; a state that does not fit raises RuntimeError."""
        from apexrl.core import load_numpy_state_dict

        net = self.make_network()
        if self.policies:
            from apexrl.runtime.policy_set import join, split

            parts = split(net_state)
            for pid, n in net.items():  # type: ignore[attr-defined]
                if pid not in parts:
                    raise RuntimeError(f"no weights for policy '{pid}' (the checkpoint has {', '.join(parts)})")
                load_numpy_state_dict(n, parts[pid])
            return net, join({pid: {k: v.detach().cpu().numpy() for k, v in n.state_dict().items()}
                              for pid, n in net.items()})  # type: ignore[attr-defined]
        load_numpy_state_dict(net, net_state)
        return net, {k: v.detach().cpu().numpy() for k, v in net.state_dict().items()}

    def make_eval_policies(self, network: Any, weights: dict[str, Any], rows: int, seed: int,
                           explore: float | None = None) -> Policy | dict[str, Policy]:
        """``weights`` in the eval policy for batches of up to ``rows``; several policies: ``{agent id: the policy
        that plays it}`` (``network`` and ``weights`` as ``make_acting_network`` / ``loaded_network`` give them)."""
        if not self.policies:
            policy = self.make_eval_policy(network, rows, seed, explore)
            policy.set_weights(weights)
            return policy
        from apexrl.runtime.policy_set import split

        parts, per = split(weights), {}
        for m in self.policies:
            pid = m.cfg.multiagent.policy_id
            per[pid] = m.make_eval_policy(network[pid], rows, seed, explore)
            per[pid].set_weights(parts[pid])
        return {a: per[p] for a, p in self.cfg.multiagent.policy_mapping.items()}

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
    n = num_actors if num_actors is not None else auto_num_actors(cfg, cluster_cpus or 1.0)
    if is_multiagent(cfg.env):
        from apexrl.envs.multiagent.opponents import check_opponent

        check_opponent(cfg.multiagent.opponent)
        return _with_policies(cfg, n, model_factory)
    builder.check_spaces(cfg.env.id, obs_space, act_space)
    return System(cfg, builder, obs_space, act_space, n, model_factory)


def _with_policies(cfg: Config, n: int, model_factory: ModelFactory | None) -> System:
    """A multi-agent run's System: which policy plays each agent (written into the config as a table), one
    member System per policy where there are several."""
    from apexrl.config import AGENTS, ConfigError
    from apexrl.config.policies import policy_config
    from apexrl.envs.factory import EnvSpecError
    from apexrl.envs.multiagent.make import MultiAgentSpecError, game_views
    from apexrl.envs.multiagent.policies import plan_policies

    try:
        plan = plan_policies(game_views(cfg.env), cfg.multiagent, cfg.env.id)
    except MultiAgentSpecError as e:
        raise EnvSpecError(str(e)) from None
    ma = dataclasses.replace(cfg.multiagent, policy_mapping=plan.mapping)
    if len(plan.ids) == 1:
        ma = dataclasses.replace(ma, policy_id=plan.ids[0], policies={}, policies_to_train=None)
    cfg = dataclasses.replace(cfg, multiagent=ma)
    members = []
    for pid in plan.ids:
        mcfg = policy_config(cfg, pid) if len(plan.ids) > 1 else cfg
        mb = get_builder(mcfg.agent)
        obs, act = plan.spaces[pid]
        mb.check_spaces(cfg.env.id if len(plan.ids) == 1 else f"{cfg.env.id}' policy '{pid}", obs, act)
        if not mb.acts_by_slot:
            fit = [a for a in AGENTS if get_builder(a).acts_by_slot]
            key = "agent" if len(plan.ids) == 1 else f"multiagent.policies.{pid}.agent"
            raise ConfigError(f"config key '{key}' = '{mcfg.agent}' cannot train the multi-agent env '{cfg.env.id}' "
                              f"yet; allowed there: {', '.join(fit)}")
        members.append(System(mcfg, mb, obs, act, n, model_factory))
    if len(members) == 1:
        return members[0]
    if cfg.multiagent.self_play.p_latest < 1.0:
        raise ConfigError(f"config key 'multiagent.self_play.p_latest' = {cfg.multiagent.self_play.p_latest:g}: a "
                          f"league trains one shared policy, and this run has {len(members)} "
                          f"({', '.join(plan.ids)}); set it to 1")
    first = members[0]
    return System(cfg, first.builder, first.observation_space, first.action_space, n, model_factory, tuple(members))
