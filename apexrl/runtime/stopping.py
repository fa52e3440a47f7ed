"""When a run stops: a target evaluation return, a target training return, an env-step budget or a time
budget (``stop.*``)."""

from __future__ import annotations

import numpy as np

from apexrl.config import StopConfig

MIN_TRAIN_EPISODES = 10  # so that one lucky first episode does not meet stop.train_return


class StopConditions:
    def __init__(self, stop: StopConfig) -> None:
        self.stop = stop
        self.time_to_target: float | None = None
        self.steps_to_target: int | None = None

    def target_reached(self, eval_returns: list[float] | None) -> bool:
        t = self.stop.target_return
        return bool(eval_returns) and t is not None and float(np.mean(eval_returns)) >= t  # type: ignore[arg-type]

    def check(self, eval_returns: list[float] | None, time_s: float, env_steps: int, elapsed: float,
              train_returns: list[float] | None = None) -> str:
        """After a report: the reason to stop, or "". ``time_s`` includes resumed time, ``elapsed`` not;
        ``train_returns``: recent training episodes of the least-exploring slots (``stop.train_return``)."""
        s = self.stop
        reason = ""
        if s.train_return is not None and train_returns and len(train_returns) >= MIN_TRAIN_EPISODES \
                and float(np.mean(train_returns)) >= s.train_return:
            self.time_to_target, self.steps_to_target = time_s, env_steps
            reason = (f"training mean {np.mean(train_returns):.1f} over the least-exploring slots' last "
                      f"{len(train_returns)} episodes >= target {s.train_return:g}")
        if self.target_reached(eval_returns):
            self.time_to_target, self.steps_to_target = time_s, env_steps
            reason = f"evaluation mean {float(np.mean(eval_returns)):.4g} >= target {s.target_return:g}"  # type: ignore[arg-type]
        if s.max_env_steps is not None and env_steps >= s.max_env_steps:
            reason = f"reached {s.max_env_steps:,} env steps"
        if s.max_time_s is not None and elapsed >= s.max_time_s:
            reason = f"reached {s.max_time_s:g} s"
        return reason
