"""The Ray actors of one run, built from the :class:`~apexrl.runtime.assembly.System`:

    actors (N) --batches--> replay shards (S) <--sample/update-- learner --weights--> parameter server
                                                                                  ^-- actors pull

Public: tests reach the handles here (``topology.actors[i]``) to inject faults.
"""

from __future__ import annotations

from typing import Any

import ray

from apexrl.runtime.assembly import System
from apexrl.runtime.evaluator import make_evaluator

LEARNER_RESERVE_S = 30.0  # a GPU learner's reservation: at most this long before the actors are asked for


def _strategy(system: System) -> str:
    return "SPREAD" if system.cfg.actors.placement == "spread" else "DEFAULT"


def _shard_strategy(system: System, i: int) -> Any:
    """Shards take no CPU, and Ray spreads zero-resource actors only best effort (two shards often
    shared a node); under ``spread`` shard i is pinned to the i-th alive node. Hard affinity: a soft one
    still put both shards of a 3-node test cluster on one node in 2 of 4 runs. A shard whose node goes
    is replaced by the supervisor on a node alive then."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if system.cfg.actors.placement != "spread":
        return _strategy(system)
    nodes = sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))
    return NodeAffinitySchedulingStrategy(nodes[i % len(nodes)], soft=False) if nodes else _strategy(system)


def _driver_node() -> dict[str, Any]:
    """Options pinning a role to the driver's node: the board and the parameter server hold the run's
    counters and newest weights, and on a zero-CPU actor Ray may pick any node, one that can die while the
    driver (and so the run) lives on. Hard affinity: the driver's node outlives the run by definition."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(),
                                                                  soft=False)}


def _bundle(group: Any, index: int) -> dict[str, Any]:
    """Options placing a role in bundle ``index`` of ``group`` (a Tune trial's placement group)."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return {"scheduling_strategy": PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index)}


class Topology:
    """Creates and holds the Ray actors of one run. ``group``: a placement group whose bundle 0 holds the
    learner and bundle 1 + i actor i (a Tune trial's, see ``ApexTrainer.default_resource_request``)."""

    def __init__(self, system: System, group: Any = None, on_cluster: bool = False) -> None:
        from apexrl.runtime.transport import ParameterServer

        cfg = system.cfg
        self.system, self.cfg, self.num_actors, self.group = system, cfg, system.num_actors, group
        self.learner_group: Any = None
        from apexrl.runtime.board_worker import BoardWorker

        self.ps = ParameterServer.options(**_driver_node()).remote()
        self.board = BoardWorker.options(**_driver_node()).remote(system.num_actors, cfg.actors.envs_per_actor, cfg.stop.max_env_steps)
        self.shards = [self.make_shard(i) for i in range(system.num_shards)]
        self.learner = self.make_learner()
        self.actors = [self.make_actor(i) for i in range(system.num_actors)]
        self.evaluator = make_evaluator(system, self.ps, on_cluster)

    def make_learner(self) -> Any:
        from apexrl.runtime.workers import LearnerWorker

        cfg = self.cfg
        where = _bundle(self.group, 0) if self.group is not None else self._reserved_learner_bundle()
        return LearnerWorker.options(num_cpus=cfg.learner.num_cpus, num_gpus=cfg.learner.num_gpus, **where).remote(
            self.system, self.shards, self.ps, threads=max(1, int(cfg.learner.num_cpus)))

    def _reserved_learner_bundle(self) -> dict[str, Any]:
        """A GPU learner's CPU and GPU, reserved before any actor asks for CPUs: Ray places actors as their
        requests come, and an actor landing on the GPU node first could leave the learner no CPU there,
        pending forever (seen on a test cluster whose GPU node had room for one actor)."""
        le = self.cfg.learner
        if le.num_gpus <= 0:
            return {}
        if self.learner_group is None:
            from ray.util.placement_group import placement_group

            need = {k: v for k, v in (("CPU", le.num_cpus), ("GPU", le.num_gpus)) if v > 0}
            self.learner_group = placement_group([need])
            ray.wait([self.learner_group.ready()], timeout=LEARNER_RESERVE_S)  # else: StartWatch reports it
        return _bundle(self.learner_group, 0)

    def make_shard(self, i: int) -> Any:
        from apexrl.runtime.workers import ReplayShardWorker

        return ReplayShardWorker.options(scheduling_strategy=_shard_strategy(self.system, i)).remote(
            **self.system.shard_kwargs(i))

    def make_actor(self, i: int) -> Any:
        from apexrl.runtime.workers import ActorWorker

        a = self.cfg.actors
        where = _bundle(self.group, 1 + i) if self.group is not None else {"scheduling_strategy": _strategy(self.system)}
        return ActorWorker.options(num_cpus=a.num_cpus, num_gpus=a.num_gpus, **where).remote(
            self.system, i, self.shards, self.ps, self.board)

    def set_shards(self, shards: list[Any]) -> None:
        """Point the learner and the actors at a new shard set (one was replaced)."""
        self.shards = shards
        self.learner.set_shards.remote(shards)
        for a in self.actors:
            a.set_shards.remote(shards)

    def kill(self) -> None:
        if hasattr(self.evaluator, "kill"):
            self.evaluator.kill()
        for a in [*self.actors, self.learner, *self.shards, self.ps, self.board]:
            if a is not None:
                try:
                    ray.kill(a)
                except Exception:  # pragma: no cover - already gone
                    pass
        if self.learner_group is not None:
            try:
                ray.util.remove_placement_group(self.learner_group)
            except Exception:  # pragma: no cover - Ray already shut down
                pass
