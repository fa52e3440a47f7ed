"""An actor's life from start to stop, as in the paper and in Acme: act, send, pull weights, and every
``push_period`` seconds push its counters to the board, whose reply brings the global env-step count
(exploration anneals by it) and, under a budget, the steps it may still take. Nothing here waits on the
driver: the push is answered by the board, and is not waited for unless the lease is spent.

Control comes from outside the loop's thread (the Ray shell's other methods): ``pause`` stops at the next
slice boundary with every send acknowledged and the counters pushed, so a checkpoint taken while paused
holds exactly what the counters say; ``stop`` ends the loop the same way.

Ray-free: the board is reached through :class:`Control`; tests drive this with an in-process one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from apexrl.runtime.actor import Actor

SLICE_S = 0.02  # acting between looks at pause/stop and the push clock: the pause's latency
FIRST_LEASE = 256  # env steps asked for before the actor's speed is known


class Control(Protocol):
    """The actor's line to the board."""

    def register(self, want: int) -> None:
        """(Re)start this actor's record; the answer comes as a reply, like a push's."""
        ...

    def push(self, delta: dict[str, Any], want: int) -> None:
        """Send without waiting; a push still unanswered makes this one a no-op (the caller keeps the delta)."""
        ...

    def reply(self, wait: bool = False) -> dict[str, Any] | None:
        """The answer to the last push once it has come (``wait``: until it comes)."""
        ...

    def busy(self) -> bool:
        """A push is in flight."""
        ...


class Delta:
    """What an actor did since its last push, merged from its slices."""

    SUMS = ("env_steps", "time_s")
    LISTS = ("episode_returns", "episode_lengths", "episode_exploration")

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def add(self, res: dict[str, Any]) -> None:
        d = self.data
        for k, v in res.items():
            if k in self.SUMS:
                d[k] = d.get(k, 0) + v
            elif k in self.LISTS:
                d.setdefault(k, []).extend(v)
            elif k == "started_at":
                d.setdefault(k, v)
            else:
                d[k] = v  # totals of this actor's life (sent, dropped...), exploration now

    def take(self) -> dict[str, Any]:
        out, self.data = self.data, {}
        return out

    def __bool__(self) -> bool:
        return bool(self.data)


class ActorLoop:
    def __init__(self, actor: Actor, control: Control, push_period_s: float,
                 stats: Callable[[], dict[str, Any]] | None = None,
                 acknowledge: Callable[[], None] | None = None) -> None:
        """``stats()``: extra counters of the transport (dropped sends); ``acknowledge()``: returns once every
        send so far is stored (called at a pause and at the end)."""
        self.actor, self.control, self.period = actor, control, push_period_s
        self.stats, self.acknowledge = stats or (lambda: {}), acknowledge
        self.E = actor.cfg.actors.envs_per_actor
        self.delta = Delta()
        self.lease: int | None = None
        self.spent = False  # the board said the budget is used up
        self._go = threading.Event()  # clear: stand still
        self._go.set()
        self._paused = threading.Event()
        self._stop = threading.Event()
        self.rate = 0.0  # env steps/s, what the next lease is sized by
        self.waited_s = 0.0  # acting time lost waiting for the board (a spent lease); holds not counted
        self._pushed_at = time.perf_counter()

    # ------------------------------------------------------------------ control (other threads)
    def pause(self, timeout: float | None = None) -> bool:
        """Ask the loop to stand still; return once it does (False: it did not within ``timeout``)."""
        self._go.clear()
        return self._paused.wait(timeout)

    def resume(self) -> None:
        self._paused.clear()
        self._go.set()

    def stop(self) -> None:
        self._stop.set()
        self._go.set()

    # ------------------------------------------------------------------ the loop (its own thread)
    def _want(self) -> int:
        """Steps to hold a lease for: three push periods at the current speed, so a reply always comes
        before the lease runs out."""
        return max(self.E, int(self.rate * 3 * self.period) if self.rate else FIRST_LEASE)

    def _take_reply(self, reply: dict[str, Any] | None) -> None:
        if reply is None:
            return
        self.actor.policy.observe_global_steps(reply["global_env_steps"])
        self.spent = bool(reply.get("spent"))
        self.lease = None if reply["lease"] is None else (self.lease or 0) + reply["lease"]

    def _push(self, wait: bool = False) -> None:
        if not self.control.busy():
            self.delta.add(self.stats())
            now = time.perf_counter()
            # the rate is over wall time: an env paced on a clock catches up inside run() on time lost outside it
            self.delta.data["wall_s"], self._pushed_at = now - self._pushed_at, now
            self.control.push(self.delta.take(), self._want())
        if wait:
            t0 = time.perf_counter()
            self._take_reply(self.control.reply(wait=True))
            self.waited_s += time.perf_counter() - t0

    def run(self) -> str:
        """Act until stopped or the budget is spent; return why it ended ("stopped" or "budget"). A pause
        asked for before the loop began is kept: the loop then starts by standing still."""
        t0 = self._pushed_at = time.perf_counter()
        self.control.register(self._want())
        if self.actor.cfg.stop.max_env_steps is not None:  # no step without a lease
            self._take_reply(self.control.reply(wait=True))
        # else the first steps go on while the board answers: the first start need not wait for the board's
        # process, and a restarted actor acts a slice or two before its exploration hears the global count
        self.waited_s += time.perf_counter() - t0
        next_push = time.monotonic() + min(self.period, 0.1)  # the first push comes soon: start-up is timed by it
        vsteps = 1
        while not self._stop.is_set():
            if not self._go.is_set():
                self._hold()
                continue
            if self.lease is not None and self.lease < self.E:
                self._push(wait=True)  # spent: ask for more, and wait
                if self.lease is not None and self.lease < self.E:
                    if self.spent:
                        return self._end("budget")
                    self._stop.wait(0.1)  # other actors hold the rest of the budget
                    continue
            n = vsteps if self.lease is None else min(vsteps, self.lease // self.E)
            res = self.actor.run(n)
            if self.lease is not None:
                self.lease -= res["env_steps"]
            if res["time_s"] > 0:
                rate = res["env_steps"] / res["time_s"]
                self.rate = 0.8 * self.rate + 0.2 * rate if self.rate else rate
                vsteps = max(1, min(4 * vsteps, int(SLICE_S * rate / self.E)))
            self.delta.add(res)
            self._take_reply(self.control.reply())
            if time.monotonic() >= next_push:
                next_push = time.monotonic() + self.period
                self._push()
        return self._end("stopped")

    def _hold(self) -> None:
        self._settle()
        self._paused.set()
        self._go.wait()

    def _settle(self) -> None:
        """Every send acknowledged and the counters pushed and answered."""
        if self.acknowledge is not None:
            self.acknowledge()
        if self.control.busy():
            self._take_reply(self.control.reply(wait=True))
        self._push(wait=True)

    def _end(self, why: str) -> str:
        self._settle()
        self._paused.set()
        return why
