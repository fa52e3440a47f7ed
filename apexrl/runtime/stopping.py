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

    def target_reached(self, eval_returns: list[float] | None, eval_seats: dict[str, float] | None = None) -> bool:
        return bool(self._target(eval_returns, eval_seats))

    def _target(self, eval_returns: list[float] | None, eval_seats: dict[str, float] | None) -> str:
        """Why the evaluation meets ``stop.target_return`` or ``stop.loss_rates``, or ""."""
        t = self.stop.target_return
        if eval_returns and t is not None and float(np.mean(eval_returns)) >= t:
            return f"evaluation mean {float(np.mean(eval_returns)):.4g} >= target {t:g}"
        if not eval_returns:
            return ""
        for outcome, plural, rates, sign in (("loss", "losses", self.stop.loss_rates, -1),
                                             ("win", "wins", self.stop.win_rates, 1)):
            got = {k[len("eval_seat_"):-len(outcome) - 1]: v for k, v in (eval_seats or {}).items()
                   if k.endswith(f"_{outcome}")}
            if rates and got:
                limits = rates * len(got) if len(rates) == 1 else rates
                if all(sign * (v - lim) >= 0 for v, lim in zip(got.values(), limits)):
                    return f"evaluation {plural} against the opponent " + ", ".join(
                        f"{seat} {v:.1%} {'<=' if sign < 0 else '>='} {lim:.1%}"
                        for (seat, v), lim in zip(got.items(), limits))
        return ""

    def check(self, eval_returns: list[float] | None, time_s: float, env_steps: int, elapsed: float,
              train_returns: list[float] | None = None, eval_seats: dict[str, float] | None = None) -> str:
        """After a report: the reason to stop, or "". ``time_s`` includes resumed time, ``elapsed`` not;
        ``train_returns``: recent training episodes of the least-exploring slots (``stop.train_return``);
        ``eval_seats``: the evaluation's ``eval_seat_<agent>_<outcome>`` rates (``stop.loss_rates``)."""
        s = self.stop
        reason = ""
        if s.train_return is not None and train_returns and len(train_returns) >= MIN_TRAIN_EPISODES \
                and float(np.mean(train_returns)) >= s.train_return:
            self.time_to_target, self.steps_to_target = time_s, env_steps
            reason = (f"training mean {np.mean(train_returns):.1f} over the least-exploring slots' last "
                      f"{len(train_returns)} episodes >= target {s.train_return:g}")
        target = self._target(eval_returns, eval_seats)
        if target:
            self.time_to_target, self.steps_to_target = time_s, env_steps
            reason = target
        if s.max_env_steps is not None and env_steps >= s.max_env_steps:
            reason = f"reached {s.max_env_steps:,} env steps"
        if s.max_time_s is not None and elapsed >= s.max_time_s:
            reason = f"reached {s.max_time_s:g} s"
        return reason
