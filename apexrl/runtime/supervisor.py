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

        self.learner_streak = 0

    def learner_ok(self) -> None:
        self.learner_streak = 0

    def restart_learner(self, err: Exception, state: dict[str, Any] | bytes | None) -> None:
        """Replace a dead or failing learner: the newest published weights, the last checkpoint's
        optimizer/target/counters (``state``), the same shards. One that fails again before finishing a
        chunk is a crash loop, and stops the run."""
        self.progress.learner_restarts += 1
        self.learner_streak += 1
        why = cause(err)
        if self.learner_streak > MAX_ACTOR_FAILURES_IN_ROW:
            raise TrainingError(f"the learner failed {self.learner_streak} times in a row without completing any "
                                f"work; giving up. Last error: {why}")
        log.warning("learner failed (%s); restarting it from the newest weights", why)
        self.console.message(f"learner failed ({why}); restart #{self.progress.learner_restarts} from the newest "
                             "weights" + (" and the last checkpoint" if state is not None else ""))
        _kill(self.topology.learner)
        try:
            got = ray.get(self.topology.ps.get.remote(-1), timeout=60)
        except (RayActorError, GetTimeoutError) as e:  # the run's roles went with it (a driver Ray gave up on)
            raise TrainingError(f"the learner failed ({why}) and the parameter server with it ({cause(e)}); "
                                "the run cannot go on") from None
        weights, version = (None, 0) if got is None else (_weights(got), got[0])
        if weights is None:  # the dead learner owned the published copy: the parameter server's own is next
            weights = _backup(self.topology.ps)
        ev = self.topology.evaluator
        if weights is None and ev is not None and ev.last_weights is not None:
            weights = ev.last_weights[1]
        new = self.topology.make_learner()
        ray.get(new.recover.remote(state, weights, version), timeout=300)
        self.topology.learner = new

    def restart_actor(self, i: int, err: Exception) -> None:
        """Replace a dead or failing actor with a fresh one of the same index; an actor that fails again
        before taking any env step (the board knows) is a crash loop, and stops the run."""
        self.progress.actor_restarts += 1
        try:
            if ray.get(self.topology.board.progressed.remote(i), timeout=30):
                self.fail_streak[i] = 0
        except (RayActorError, GetTimeoutError):
            pass
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


def _weights(got: tuple[int, list[Any]]) -> Any:
    """The published weights, or None when their owner (the dead learner) took them with it."""
    try:
        return ray.get(got[1][0], timeout=60)
    except Exception:  # noqa: BLE001 - owner died: the objects are lost
        return None


def _backup(ps: Any) -> Any:
    try:
        got = ray.get(ps.backup.remote(), timeout=60)
    except Exception:  # noqa: BLE001 - no copy to offer
        return None
    return None if got is None else got[1]


def _kill(handle: Any) -> None:
    try:
        ray.kill(handle)
    except Exception:  # already gone
        pass
