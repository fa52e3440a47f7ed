"""When a run stops: a target evaluation return, an env-step budget or a time budget (``stop.*``)."""

from __future__ import annotations

import numpy as np

from apexrl.config import StopConfig


class StopConditions:
    def __init__(self, stop: StopConfig) -> None:
        self.stop = stop
        self.time_to_target: float | None = None
        self.steps_to_target: int | None = None

    def target_reached(self, eval_returns: list[float] | None) -> bool:
        t = self.stop.target_return
        return bool(eval_returns) and t is not None and float(np.mean(eval_returns)) >= t  # type: ignore[arg-type]

    def check(self, eval_returns: list[float] | None, time_s: float, env_steps: int, elapsed: float) -> str:
        """After a report: the reason to stop, or "". ``time_s`` includes resumed time, ``elapsed`` not."""
        s = self.stop
        reason = ""
        if self.target_reached(eval_returns):
            self.time_to_target, self.steps_to_target = time_s, env_steps
            reason = f"evaluation mean {np.mean(eval_returns):.1f} >= target {s.target_return}"  # type: ignore[arg-type]
        if s.max_env_steps is not None and env_steps >= s.max_env_steps:
            reason = f"reached {s.max_env_steps:,} env steps"
        if s.max_time_s is not None and elapsed >= s.max_time_s:
            reason = f"reached {s.max_time_s:g} s"
        return reason
