"""When greedy evaluations run, and what their results do: the run's last and best returns, and
``best.pt`` with the weights that played the best one. How an evaluation runs is ``evaluator.py``'s."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from apexrl.evaluation import seat_rates
from apexrl.metrics import seats_text
from apexrl.runtime.checkpointing import Checkpointer
from apexrl.runtime.cluster import cause
from apexrl.runtime.progress import Progress

log = logging.getLogger(__name__)
Meets = Callable[[list[float], dict[str, float]], bool]


class Evaluations:
    """``meets(returns, seats)``: whether an evaluation meets the run's stop target; one that does is played
    again for ``confirm_episodes`` more episodes with the same weights before it counts, so that the run stops
    (and ``best.pt`` is chosen) on all of them together, not on a lucky few."""

    def __init__(self, evaluator: Any, interval_s: float, progress: Progress, checkpointer: Checkpointer,
                 elapsed: Callable[[], float], meets: Meets = lambda returns, seats: False,
                 confirm_episodes: int = 0, say: Callable[[str], None] = log.info) -> None:
        self.evaluator, self.interval_s, self.progress = evaluator, interval_s, progress
        self.checkpointer, self.elapsed = checkpointer, elapsed
        self.meets, self.confirm_episodes, self.say = meets, confirm_episodes, say
        self.future: Any = None  # the evaluation running (a thread's future, or a worker's reference)
        self.pending: dict[str, Any] | None = None  # an evaluation that met the target, its confirmation running
        self.next_at = time.monotonic() + interval_s

    @property
    def running(self) -> bool:
        return self.future is not None

    def poll(self) -> list[float] | None:
        """The returns of an evaluation that has just finished; a new one started when one is due."""
        returns = None
        if self.future is not None and self.future.done():
            res, self.future = self._result(self.future.result, self._take_pending()), None
            if res is not None and self._confirming(res):
                return None
            returns = self.record(res) or None
        now = time.monotonic()
        if self.evaluator is not None and self.future is None and now >= self.next_at and self.progress.updates > 0:
            self.future = self.evaluator.submit()
            self.next_at = now + self.interval_s
        return returns

    def _take_pending(self) -> dict[str, Any] | None:
        pending, self.pending = self.pending, None
        return pending

    def _result(self, result: Callable[[], dict[str, Any]], pending: dict[str, Any] | None = None
                ) -> dict[str, Any] | None:
        """An evaluation's result, pooled with ``pending`` if it confirms that one; None if it failed (logged,
        training goes on)."""
        try:
            res = result()
        except Exception as e:  # noqa: BLE001 - an evaluation error must not cost the run or its checkpoint
            log.warning("evaluation failed: %s", cause(e))
            # the confirmation failed: the first evaluation stands, as without one (not confirmed again)
            return None if pending is None else {**pending, "confirmed": False}
        if pending is None:
            return res
        pooled = pool(pending, res)
        ok = self.meets(pooled["eval_returns"], seat_rates(pooled))
        self.say(f"confirmation: {_summary(pooled)} over {pooled['episodes']} episodes "
                 f"{'still meets' if ok else 'no longer meets'} the target")
        return {**pooled, "confirmed": ok}

    def _confirming(self, res: dict[str, Any]) -> bool:
        """Start a confirmation of ``res`` if it meets the target and has none yet."""
        if (not self.confirm_episodes or "confirmed" in res or not res.get("eval_returns") or "weights" not in res
                or not self.meets(res["eval_returns"], seat_rates(res))):
            return False
        self.say(f"evaluation {_summary(res)} meets the target: playing the same weights "
                 f"{self.confirm_episodes} more episodes to confirm it")
        self.pending = res
        self.future = self.evaluator.submit((res["weights_version"], res["weights"], self.confirm_episodes))
        return True

    def take(self, result: Callable[[], dict[str, Any]]) -> list[float]:
        """The returns of an evaluation run by the caller (ApexTrainer.evaluate), recorded as the last and best
        (empty if it failed)."""
        return self.record(self._result(result))

    def record(self, res: dict[str, Any] | None) -> list[float]:
        if res is None:
            return []
        returns: list[float] = res["eval_returns"]
        self.progress.eval_seats = seat_rates(res)
        self.progress.eval_seats.update({f"eval_policy_{p}_return": v for p, v in res.get("eval_policies", {}).items()})
        before = self.progress.best_eval
        self.progress.on_evaluation(returns)
        if returns and "weights" in res and (before is None or self.progress.last_eval > before):
            try:
                self.checkpointer.best(res, self.elapsed())
            except (OSError, RayActorError, RayTaskError, GetTimeoutError) as e:
                log.warning("could not keep the best evaluation's weights: %s", e)
        return returns

    def final(self, interrupted: bool) -> list[float] | None:
        """At the end: the running evaluation's result (it owns the network), or one now if the run has none
        yet, so a run that ended before its first periodic evaluation still says how its policy plays."""
        if interrupted:
            return None
        out = None
        if self.future is not None:  # a confirmation in flight is pooled with what it confirms
            res = self._result(functools.partial(self.future.result, timeout=300), self._take_pending())
            out, self.future = self.record(res) or None, None
        if self.progress.last_eval is None and self.evaluator is not None and self.progress.updates > 0:
            out = self.take(self.evaluator.evaluate) or None
        return out


def pool(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two evaluations of the same weights as one: returns together, rates weighted by their episodes."""
    na, nb = a.get("episodes", len(a["eval_returns"])), b.get("episodes", len(b["eval_returns"]))

    def mean(x: float, y: float) -> float:
        return (x * na + y * nb) / (na + nb)

    out = {**a, "eval_returns": list(a["eval_returns"]) + list(b["eval_returns"]), "episodes": na + nb,
           "parts": a.get("parts", [(a["seed"], na)]) + [(b["seed"], nb)],
           "eval_time_s": a.get("eval_time_s", 0.0) + b.get("eval_time_s", 0.0)}
    if "eval_seats" in a:
        out["eval_seats"] = {seat: {k: mean(v, b["eval_seats"][seat][k]) for k, v in rates.items()}
                             for seat, rates in a["eval_seats"].items()}
    if "eval_illegal" in a:
        out["eval_illegal"] = a["eval_illegal"] + b.get("eval_illegal", 0)
    if "eval_policies" in a:
        out["eval_policies"] = {p: mean(v, b["eval_policies"][p]) for p, v in a["eval_policies"].items()}
    return out


def _summary(res: dict[str, Any]) -> str:
    return seats_text(seat_rates(res)).strip() or f"mean {float(np.mean(res['eval_returns'])):.4g}"
