"""The run's tally: actors push what they did into one place, the driver reads it once per report.

Ape-X's actors run on their own; the driver must not be in their loop. Each actor pushes its counters here
every ``push_period`` seconds (one call, answered at once) and gets back the run's global env-step count
(what exploration anneals by) and, under an env-step budget, a lease: how many more env steps it may take.
Leases never add up to more than the budget, so ``stop.max_env_steps`` is met without being overshot by
more than one vector step. The driver's cost is one ``take`` per report, whatever the number of actors.

Ray-free: ``runtime/board_worker.py`` is the Ray shell; tests drive this class directly.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

PER_ACTOR_DETAIL = 32  # per-actor keys in a report up to this many actors; beyond, aggregates only
PUSHES_PER_S = 250.0  # the board's budget of calls: the push period grows with the number of actors


def push_period(num_actors: int, report_interval_s: float) -> float:
    """Seconds between an actor's pushes: within a report interval, so each report is current, and slow
    enough that all actors together push at most ``PUSHES_PER_S`` times a second."""
    return max(min(1.0, report_interval_s / 2), num_actors / PUSHES_PER_S)


@dataclass
class _Actor:
    outstanding: int = 0  # env steps leased and not yet reported used
    steps_since_start: int = 0
    rate: float = 0.0
    exploration: tuple[str, float] | None = None
    levels: list[float] = field(default_factory=list)
    returns: deque[float] = field(default_factory=lambda: deque(maxlen=20))
    dropped: int = 0
    sent: int = 0  # replay items this incarnation has sent (its own running total)
    nonfinite: tuple[int, int] = (0, 0)


class Board:
    def __init__(self, num_actors: int, envs_per_actor: int, budget: int | None = None) -> None:
        self.num_actors, self.E, self.budget = num_actors, envs_per_actor, budget
        self.actors = [_Actor() for _ in range(num_actors)]
        self.env_steps = 0
        self.episodes = 0
        self.transitions_sent = 0  # replay items sent by every actor: what replay has inserted, at a hold
        self.outstanding = 0  # leases of all actors not yet used
        self.first_step_at: float | None = None
        self.pushes = 0  # calls this board has answered (the scale benchmark's figure)
        self._new_returns: list[float] = []
        self._new_lengths: list[int] = []
        self.recent_episodes: deque[tuple[float, float]] = deque(maxlen=5000)  # (return, slot exploration)

    # ------------------------------------------------------------------ actors' side
    def register(self, i: int, want: int) -> dict[str, Any]:
        """Actor ``i`` (re)starts: what its predecessor leased and did not report comes back to the pool."""
        a = self.actors[i]
        self.outstanding -= a.outstanding
        self.actors[i] = _Actor(returns=a.returns)
        return self._reply(i, want)

    def push(self, i: int, delta: dict[str, Any], want: int) -> dict[str, Any]:
        """Actor ``i``'s work since its last push; the reply carries the global count and a new lease."""
        a = self.actors[i]
        self.pushes += 1
        steps = int(delta.get("env_steps", 0))
        self.env_steps += steps
        a.steps_since_start += steps
        used = min(steps, a.outstanding)
        a.outstanding -= used
        self.outstanding -= used
        if steps and self.first_step_at is None:
            self.first_step_at = delta.get("started_at")
        returns = delta.get("episode_returns", [])
        self.episodes += len(returns)
        self._new_returns.extend(returns)
        self._new_lengths.extend(delta.get("episode_lengths", []))
        a.returns.extend(returns)
        self.recent_episodes.extend(zip(returns, delta.get("episode_exploration", ()), strict=False))
        span = delta.get("wall_s") or delta.get("time_s")
        if span:
            a.rate = steps / span
        if "exploration" in delta:
            a.levels = list(delta["exploration"])
            a.exploration = (delta["exploration_name"], sum(a.levels) / max(1, len(a.levels)))
        sent = int(delta.get("transitions_sent", a.sent))
        self.transitions_sent += sent - a.sent
        a.sent = sent
        a.dropped = int(delta.get("dropped_sends", a.dropped))
        a.nonfinite = (int(delta.get("nonfinite_steps", a.nonfinite[0])),
                       int(delta.get("nonfinite_dropped", a.nonfinite[1])))
        return self._reply(i, want)

    def _reply(self, i: int, want: int) -> dict[str, Any]:
        lease = self._lease(i, want)
        return {"global_env_steps": self.env_steps, "lease": lease, "spent": self.spent()}

    def _lease(self, i: int, want: int) -> int | None:
        """None: no budget, step freely. Else the env steps granted now (whole vector steps; 0 when the
        budget is spent). A lease is what the actor had plus this grant."""
        if self.budget is None:
            return None
        a = self.actors[i]
        free = self.budget - self.env_steps - self.outstanding
        grant = 0
        if free > 0 and a.outstanding < want:
            need = want - a.outstanding
            grant = self.E * math.ceil(min(need, free) / self.E)
        a.outstanding += grant
        self.outstanding += grant
        return grant

    # ------------------------------------------------------------------ driver's side
    def set_budget(self, budget: int | None) -> None:
        self.budget = budget

    def restore(self, env_steps: int, episodes: int, transitions_sent: int = 0) -> None:
        """A resumed run counts on from its checkpoint."""
        self.env_steps, self.episodes, self.transitions_sent = env_steps, episodes, transitions_sent

    def progressed(self, i: int) -> bool:
        """Has actor ``i`` stepped since it last (re)started (a crash loop has not)."""
        return self.actors[i].steps_since_start > 0

    def pushed(self) -> int:
        return self.pushes

    def spent(self) -> bool:
        """The budget is used up: every lease granted and reported used."""
        return self.budget is not None and self.env_steps >= self.budget and self.outstanding <= 0

    def take(self) -> dict[str, Any]:
        """The summary a report needs, with the episodes finished since the last ``take``."""
        detail = self.num_actors <= PER_ACTOR_DETAIL
        out: dict[str, Any] = {
            "env_steps": self.env_steps, "episodes": self.episodes, "transitions_sent": self.transitions_sent,
            "episode_returns": self._new_returns, "episode_lengths": self._new_lengths,
            "env_steps_per_s": sum(a.rate for a in self.actors),
            "dropped_sends": sum(a.dropped for a in self.actors),
            "nonfinite_steps": sum(a.nonfinite[0] for a in self.actors),
            "nonfinite_dropped": sum(a.nonfinite[1] for a in self.actors),
            "low_exploration_returns": self.low_exploration_returns(),
            "first_step_at": self.first_step_at, "spent": self.spent(), "pushes": self.pushes,
            "actors": {i: {"exploration": a.exploration, "returns": list(a.returns)}
                       for i, a in enumerate(self.actors) if detail},
        }
        self._new_returns, self._new_lengths = [], []
        return out

    def low_exploration_returns(self, window: int = 100) -> list[float]:
        """Returns of the last ``window`` episodes played by the least-exploring third of the env slots (ties
        included): what RLlib's Ape-X reported as episode_reward_mean (its metrics came from the least-exploring
        third of its workers), so the figure tracks the policy rather than the exploration."""
        levels = sorted(v for a in self.actors for v in a.levels)
        if not levels:
            return []
        cut = levels[-(-len(levels) // 3) - 1]
        return [r for r, level in self.recent_episodes if level <= cut][-window:]
