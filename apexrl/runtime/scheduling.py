"""Roles that Ray has not started: reported after a few seconds, and a run that cannot start at all is
stopped with one line. Ray itself waits forever for resources that never come (a node gone, a cluster
smaller than the run's CPU, GPU or custom-resource demand), printing nothing a user would see."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import ray

from apexrl.runtime.supervisor import TrainingError
from apexrl.runtime.topology import Topology

REPORT_AFTER_S = 15.0  # worker processes on a loaded 2-core host take several seconds to start
GIVE_UP_AFTER_S = 120.0


class StartWatch:
    """Pings every role's handle with Ray's built-in ``__ray_ready__`` (answered once the actor runs) and
    tracks, per handle, since when it has waited. Restarted roles get new handles and are watched anew."""

    def __init__(self, topology: Topology, report: Callable[[str], None],
                 report_after_s: float = REPORT_AFTER_S, give_up_after_s: float = GIVE_UP_AFTER_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.topology, self.report = topology, report
        self.report_after_s, self.give_up_after_s, self.clock = report_after_s, give_up_after_s, clock
        self.waiting: dict[Any, tuple[str, float, Any]] = {}  # actor id -> (role, since, ready ref)
        self.started: set[Any] = set()
        self.last_report = -float("inf")

    def roles(self) -> list[tuple[str, Any]]:
        t = self.topology
        return [("learner", t.learner), *((f"replay shard {j}", s) for j, s in enumerate(t.shards)),
                *((f"actor {i}", a) for i, a in enumerate(t.actors))]

    def poll(self) -> list[str]:
        """The roles still waiting to start; reports them (at most every ``report_after_s``) once one has
        waited that long, and raises TrainingError when the learner or every actor waited
        ``give_up_after_s``."""
        now = self.clock()
        roles = self.roles()
        for role, handle in roles:
            key = handle  # an actor handle hashes and compares by its actor's id
            if key not in self.started and key not in self.waiting:
                self.waiting[key] = (role, now, handle.__ray_ready__.remote())
        if self.waiting:
            refs = [ref for _, _, ref in self.waiting.values()]
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            done = set(ready)
            for key in [k for k, (_, _, ref) in self.waiting.items() if ref in done]:
                del self.waiting[key]
                self.started.add(key)
        current = {h for _, h in roles}
        late = [(role, now - since) for key, (role, since, _) in self.waiting.items()
                if key in current and now - since >= self.report_after_s]
        if not late:
            return []
        names = [r for r, _ in late]
        waited = max(w for _, w in late)
        actors = [r for r in names if r.startswith("actor")]
        if waited >= self.give_up_after_s and ("learner" in names or len(actors) == len(self.topology.actors)):
            raise TrainingError(f"Ray has not started {_listing(names)} after {waited:.0f} s; "
                                f"{demand_and_supply(self.topology)}")
        if now - self.last_report >= self.report_after_s:
            self.last_report = now
            self.report(f"waiting {waited:.0f} s for Ray to start {_listing(names)}; "
                        f"{demand_and_supply(self.topology)}")
        return names


def _listing(names: list[str]) -> str:
    actors = [n for n in names if n.startswith("actor")]
    others = [n for n in names if not n.startswith("actor")]
    if len(actors) > 3:
        others.append(f"{len(actors)} actors")
    else:
        others.extend(actors)
    return ", ".join(others)


def demand_and_supply(topology: Topology) -> str:
    """What the run asks of Ray against what the cluster has free, in one clause."""
    cfg = topology.cfg
    cpus = cfg.learner.num_cpus + topology.num_actors * cfg.actors.num_cpus
    total, free = ray.cluster_resources(), ray.available_resources()
    gpu = f", {cfg.learner.num_gpus:g} GPU" if cfg.learner.num_gpus else ""
    return (f"the run asks for {cpus:g} CPU{gpu}; the cluster has {free.get('CPU', 0):g} of "
            f"{total.get('CPU', 0):g} CPU free ({total.get('GPU', 0):g} GPU), {sum(bool(n.get('Alive')) for n in ray.nodes())} node(s) alive")
