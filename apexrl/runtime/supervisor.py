"""Keeps the run's processes alive: a dead or failing actor is replaced (same index, same seed, same
exploration), a crash-looping one stops the run; a dead replay shard is replaced from the last replay
snapshot (or empty) while the survivors carry on."""

from __future__ import annotations

import logging
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from apexrl.metrics import Console
from apexrl.runtime.cluster import cause
from apexrl.runtime.progress import Progress
from apexrl.runtime.topology import Topology

log = logging.getLogger(__name__)

MAX_ACTOR_FAILURES_IN_ROW = 3


class TrainingError(RuntimeError):
    """The run had to stop (e.g. repeated non-finite updates); the message says why."""


class Supervisor:
    def __init__(self, topology: Topology, progress: Progress, console: Console) -> None:
        self.topology, self.progress, self.console = topology, progress, console
        self.fail_streak = [0] * topology.num_actors

    def actor_ok(self, i: int) -> None:
        self.fail_streak[i] = 0

    def restart_actor(self, i: int, err: Exception) -> None:
        """Replace a dead or failing actor with a fresh one of the same index; an actor that fails again
        before finishing any work is a crash loop, and stops the run."""
        self.progress.actor_restarts += 1
        self.fail_streak[i] += 1
        why = cause(err)
        if self.fail_streak[i] > MAX_ACTOR_FAILURES_IN_ROW:
            raise TrainingError(f"actor {i} failed {self.fail_streak[i]} times in a row without completing any "
                                f"work; giving up. Last error: {why}")
        log.warning("actor %d failed (%s); restarting it with the same index and exploration", i, why)
        self.console.message(f"actor {i} failed ({why}); restart #{self.progress.actor_restarts}")
        _kill(self.topology.actors[i])
        self.topology.actors[i] = self.topology.make_actor(i)

    def check_shards(self, snapshot: list[dict[str, Any]] | None) -> None:
        """Replace dead replay shards (from ``snapshot`` when there is one, else empty) and point the
        learner and actors at the new set."""
        shards = list(self.topology.shards)
        refs = [s.stats.remote() for s in shards]
        replaced = False
        for j, ref in enumerate(refs):
            try:
                ray.get(ref, timeout=30.0)
                continue
            except (RayActorError, RayTaskError, GetTimeoutError) as e:
                why = cause(e)
            self.progress.shard_restarts += 1
            new = self.topology.make_shard(j)
            if snapshot is not None and j < len(snapshot):
                ray.get(new.load_state_dict.remote(snapshot[j]))
                how = "restored from the last replay snapshot"
            else:
                how = "empty (no replay snapshot; set checkpoint.replay=true to keep one)"
            log.warning("replay shard %d died (%s); replacement started %s", j, why, how)
            self.console.message(f"replay shard {j} died; replacement started {how}")
            _kill(shards[j])
            shards[j] = new
            replaced = True
        if replaced:
            self.topology.set_shards(shards)


def _kill(handle: Any) -> None:
    try:
        ray.kill(handle)
    except Exception:  # already gone
        pass
