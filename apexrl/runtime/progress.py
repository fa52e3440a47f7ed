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
    updates: int = 0
    time_offset: float = 0.0  # seconds of earlier runs this one resumes
    reports: int = 0
    best_eval: float | None = None
    last_eval: float | None = None
    evaluations: int = 0
    actor_restarts: int = 0
    learner_restarts: int = 0
    shard_restarts: int = 0
    recent_returns: deque[float] = field(default_factory=lambda: deque(maxlen=100))
    recent_lengths: deque[int] = field(default_factory=lambda: deque(maxlen=100))
    actor_returns: dict[int, deque[float]] = field(default_factory=dict)
    actor_exploration: dict[int, tuple[str, float]] = field(default_factory=dict)
    actor_dropped: dict[int, int] = field(default_factory=dict)  # batches lost to a dead shard, per live actor
    actor_rate: dict[int, float] = field(default_factory=dict)  # env steps/s of each actor's last chunk
    actor_nonfinite: dict[int, tuple[int, int]] = field(default_factory=dict)  # (env steps, transitions dropped)
    slot_levels: dict[int, list[float]] = field(default_factory=dict)  # exploration of each actor's env slots
    recent_episodes: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=5000))  # (return,
    #                                                              exploration of the slot that played it)

    def on_actor(self, i: int, res: dict[str, Any]) -> None:
        self.env_steps += res["env_steps"]
        self.episodes += len(res["episode_returns"])
        self.recent_returns.extend(res["episode_returns"])
        self.recent_lengths.extend(res["episode_lengths"])
        self.actor_returns.setdefault(i, deque(maxlen=20)).extend(res["episode_returns"])
        self.actor_exploration[i] = (res["exploration_name"], float(np.mean(res["exploration"])))
        self.actor_dropped[i] = int(res.get("dropped_sends", 0))
        if res.get("time_s"):
            self.actor_rate[i] = res["env_steps"] / res["time_s"]
        self.actor_nonfinite[i] = (int(res.get("nonfinite_steps", 0)), int(res.get("nonfinite_dropped", 0)))
        self.slot_levels[i] = list(res["exploration"])
        self.recent_episodes.extend(zip(res["episode_returns"], res.get("episode_exploration", ()), strict=False))

    def low_exploration_returns(self, window: int = 100) -> list[float]:
        """Returns of the last ``window`` training episodes played by the least-exploring third of the env
        slots (ties included): what RLlib's Ape-X reported as episode_reward_mean, whose metrics came from
        the least-exploring third of its workers, so the figure tracks the policy rather than the exploration."""
        levels = sorted(v for slot in self.slot_levels.values() for v in slot)
        if not levels:
            return []
        cut = levels[-(-len(levels) // 3) - 1]
        return [r for r, level in self.recent_episodes if level <= cut][-window:]

    def on_evaluation(self, returns: list[float]) -> None:
        if returns:
            self.evaluations += 1
            self.last_eval = float(np.mean(returns))
            self.best_eval = self.last_eval if self.best_eval is None else max(self.best_eval, self.last_eval)

    def counters(self, elapsed: float) -> dict[str, Any]:
        return {"env_steps": self.env_steps, "episodes": self.episodes, "learner_updates": self.updates,
                "time_s": self.time_offset + elapsed, "reports": self.reports, "best_eval": self.best_eval}

    def restore(self, c: dict[str, Any]) -> None:
        self.env_steps, self.episodes, self.updates = c["env_steps"], c["episodes"], c["learner_updates"]
        self.time_offset, self.reports = c["time_s"], c["reports"]
        self.best_eval = c.get("best_eval")
