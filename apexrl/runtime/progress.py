"""The run's counters: what the report shows, the checkpoint saves and a resume restores."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Progress:
    num_actors: int
    env_steps: int = 0
    episodes: int = 0
    transitions_sent: int = 0  # replay items all actors have sent
    updates: int = 0
    time_offset: float = 0.0  # seconds of earlier runs this one resumes
    reports: int = 0
    best_eval: float | None = None
    last_eval: float | None = None
    eval_seats: dict[str, float] = field(default_factory=dict)  # the last evaluation's eval_seat_<agent>_<outcome>
    evaluations: int = 0
    actor_restarts: int = 0
    learner_restarts: int = 0
    shard_restarts: int = 0
    recent_returns: deque[float] = field(default_factory=lambda: deque(maxlen=100))
    recent_lengths: deque[int] = field(default_factory=lambda: deque(maxlen=100))
    # From the board's last summary (runtime/board.py): rates and totals over all actors, per-actor detail
    # only for small runs.
    env_steps_per_s: float = 0.0
    dropped_sends: int = 0
    nonfinite: tuple[int, int] = (0, 0)  # (env steps with a non-finite value, transitions dropped)
    low_explore: list[float] = field(default_factory=list)
    actor_returns: dict[int, list[float]] = field(default_factory=dict)
    actor_exploration: dict[int, tuple[str, float]] = field(default_factory=dict)
    first_step_at: float | None = None  # wall clock of the run's first env step

    def on_summary(self, s: dict[str, Any]) -> int:
        """Take the board's summary; return the env steps it adds."""
        added = s["env_steps"] - self.env_steps
        self.env_steps, self.episodes, self.transitions_sent = s["env_steps"], s["episodes"], s["transitions_sent"]
        self.recent_returns.extend(s["episode_returns"])
        self.recent_lengths.extend(s["episode_lengths"])
        self.env_steps_per_s, self.dropped_sends = s["env_steps_per_s"], s["dropped_sends"]
        self.nonfinite = (s["nonfinite_steps"], s["nonfinite_dropped"])
        self.low_explore = s["low_exploration_returns"]
        self.first_step_at = self.first_step_at or s["first_step_at"]
        for i, a in s["actors"].items():
            self.actor_returns[i] = a["returns"]
            if a["exploration"] is not None:
                self.actor_exploration[i] = tuple(a["exploration"])  # type: ignore[assignment]
        return added

    def low_exploration_returns(self) -> list[float]:
        """The training returns of the least-exploring third of the env slots (see Board)."""
        return self.low_explore

    def on_evaluation(self, returns: list[float]) -> None:
        if returns:
            self.evaluations += 1
            self.last_eval = float(np.mean(returns))
            self.best_eval = self.last_eval if self.best_eval is None else max(self.best_eval, self.last_eval)

    def counters(self, elapsed: float) -> dict[str, Any]:
        return {"env_steps": self.env_steps, "episodes": self.episodes, "transitions_sent": self.transitions_sent,
                "learner_updates": self.updates,
                "time_s": self.time_offset + elapsed, "reports": self.reports, "best_eval": self.best_eval}

    def restore(self, c: dict[str, Any]) -> None:
        self.env_steps, self.episodes, self.updates = c["env_steps"], c["episodes"], c["learner_updates"]
        self.transitions_sent = int(c.get("transitions_sent", 0))
        self.time_offset, self.reports = c["time_s"], c["reports"]
        self.best_eval = c.get("best_eval")
