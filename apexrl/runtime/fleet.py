"""Scheduling: every actor's loop started once and left to run; the learner's work in short calls.

The driver is in no actor's loop. It holds one reference per actor — its ``loop`` call, which ends only when
the actor is stopped, its budget is spent or it dies — and looks at them all at once every
``LIVENESS_S``: Ray's own death signal is how a dead actor is noticed. Pause, resume and stop reach every
actor as one broadcast. The learner, a single role, still works in ``LEARNER_CHUNK_S`` calls: their
statistics feed the reports, and a hold is simply not issuing the next one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import ray
from ray.exceptions import ObjectLostError, RayActorError, RayTaskError

from apexrl.envs.contract import EnvContractError
from apexrl.runtime.supervisor import Supervisor
from apexrl.runtime.topology import Topology

log = logging.getLogger(__name__)
# A call whose worker died: its error, or (the worker killed between finishing and handing the result over)
# its result lost with the worker that owned it (OwnerDiedError, an ObjectLostError)
DIED = (RayActorError, RayTaskError, ObjectLostError)

LEARNER_CHUNK_S = 0.25
LIVENESS_S = 0.5  # how often the actors' loop references are looked at
HOLD_TIMEOUT_S = 120.0


class Fleet:
    def __init__(self, topology: Topology, supervisor: Supervisor, learner_chunk_s: float,
                 on_learner: Callable[[dict[str, Any]], None], learner_state: Callable[[], Any]) -> None:
        """``on_learner(stats)``: a learner call's statistics; ``learner_state()``: what a restarted learner
        starts from (the last checkpoint's)."""
        self.topology, self.supervisor = topology, supervisor
        self.learner_chunk_s, self.on_learner, self.learner_state = learner_chunk_s, on_learner, learner_state
        self.runs: dict[Any, int] = {}  # actor i's loop call -> i
        self.learner_ref: Any = None
        self.actors_held = False
        self.learner_held = False
        self.ended: dict[int, str] = {}  # actors whose loop ended on its own ("budget")
        self.env_failure = ""  # an env broke its contract: restarting would only meet it again
        self._next_look = 0.0

    # ------------------------------------------------------------------ starting
    def start(self, held: bool = False) -> None:
        self.actors_held = self.learner_held = held
        for i in range(self.topology.num_actors):
            self._start_actor(i)
        self._start_learner()

    def _start_actor(self, i: int) -> None:
        actor = self.topology.actors[i]
        self.runs[actor.loop.remote()] = i
        if self.actors_held:
            actor.pause.remote()  # kept by the loop if it comes first: the actor starts standing still

    def _start_learner(self) -> None:
        if not self.learner_held and self.learner_ref is None:
            self.learner_ref = self.topology.learner.train.remote(self.learner_chunk_s)

    # ------------------------------------------------------------------ waiting
    def wait(self, timeout: float) -> None:
        """Up to ``timeout`` seconds for the learner's call (reissued as it ends); the actors every LIVENESS_S."""
        if self.learner_ref is not None:
            if ray.wait([self.learner_ref], timeout=max(0.0, timeout))[0]:
                self._learner_done()
        elif timeout > 0:
            time.sleep(min(timeout, LIVENESS_S))
        now = time.monotonic()
        if now >= self._next_look:
            self._next_look = now + LIVENESS_S
            self.look_at_actors()

    def _learner_done(self) -> None:
        ref, self.learner_ref = self.learner_ref, None
        try:
            res = ray.get(ref)
        except DIED as e:
            self.supervisor.restart_learner(e, self.learner_state())
        else:
            self.supervisor.learner_ok()
            self.on_learner(res)
        self._start_learner()

    def look_at_actors(self, timeout: float = 0.0) -> None:
        """Restart the actors whose loop died; note those whose loop ended."""
        refs = list(self.runs)
        if not refs:
            return
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout, fetch_local=True)
        for ref in done:
            i = self.runs.pop(ref)
            try:
                self.ended[i] = ray.get(ref)
            except DIED as e:
                inner = getattr(e, "cause", None)
                if isinstance(inner, EnvContractError):
                    self.env_failure = str(inner)
                    continue
                self.supervisor.restart_actor(i, e)
                self._start_actor(i)

    def all_ended(self) -> bool:
        return not self.runs

    # ------------------------------------------------------------------ broadcasts
    def hold(self) -> None:
        """Every actor stands still with its sends acknowledged and its counters on the board, then the
        learner finishes its call and is given no other: nothing moves until :meth:`release`. Actors first,
        while the learner keeps working: an actor held back by the rate limiter waits for the learner."""
        self.actors_held = True
        refs = [self.topology.actors[i].pause.remote() for i in self.runs.values()]
        deadline = time.monotonic() + HOLD_TIMEOUT_S
        while refs and time.monotonic() < deadline:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            self._settled(ready, "pause")
            refs = [r for r in refs if r not in set(ready)]
            if refs:
                self.wait(min(0.05, deadline - time.monotonic()))
        if refs:
            log.warning("%d actors did not stand still within %.0f s", len(refs), HOLD_TIMEOUT_S)
        self.learner_held = True
        if self.learner_ref is not None:
            ray.wait([self.learner_ref], timeout=HOLD_TIMEOUT_S)
            self._learner_done()

    def release(self) -> None:
        if self.actors_held:
            self.actors_held = False
            self._broadcast("resume")
        self.learner_held = False
        self._start_learner()

    def stop(self, timeout_s: float = 10.0) -> None:
        """End every actor's loop (sends acknowledged, counters on the board) and the learner's call."""
        for shard in self.topology.shards:
            shard.stop_rate_limiting.remote()  # the learner is stopping: let actors settle their sends
        for ref, i in list(self.runs.items()):
            self.topology.actors[i].stop.remote()
        refs = list(self.runs)
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        self.learner_held = True
        if self.learner_ref is not None:
            if ray.wait([self.learner_ref], timeout=timeout_s)[0]:
                try:
                    self.on_learner(ray.get(self.learner_ref))
                except DIED:
                    pass
            self.learner_ref = None

    def _broadcast(self, method: str) -> None:
        """``method`` on every running actor at once; an actor that does not answer is left to the liveness
        look (dead) or logged (stuck)."""
        refs = [getattr(self.topology.actors[i], method).remote() for i in self.runs.values()]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=HOLD_TIMEOUT_S)
        self._settled(ready, method)
        if len(ready) < len(refs):
            log.warning("%d actors did not answer %s within %.0f s", len(refs) - len(ready), method, HOLD_TIMEOUT_S)

    @staticmethod
    def _settled(refs: list[Any], method: str) -> None:
        for ref in refs:
            try:
                if ray.get(ref) is False:
                    log.warning("an actor did not stand still within its pause's timeout")
            except DIED as e:
                log.warning("an actor did not %s: %s", method, type(e).__name__)
