"""When greedy evaluations run, and what their results do: the run's last and best returns, and
``best.pt`` with the weights that played the best one. How an evaluation runs is ``evaluator.py``'s."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from apexrl.runtime.checkpointing import Checkpointer
from apexrl.runtime.cluster import cause
from apexrl.runtime.progress import Progress

log = logging.getLogger(__name__)


class Evaluations:
    def __init__(self, evaluator: Any, interval_s: float, progress: Progress, checkpointer: Checkpointer,
                 elapsed: Callable[[], float]) -> None:
        self.evaluator, self.interval_s, self.progress = evaluator, interval_s, progress
        self.checkpointer, self.elapsed = checkpointer, elapsed
        self.future: Any = None  # the evaluation running (a thread's future, or a worker's reference)
        self.next_at = time.monotonic() + interval_s

    @property
    def running(self) -> bool:
        return self.future is not None

    def poll(self) -> list[float] | None:
        """The returns of an evaluation that has just finished; a new one started when one is due."""
        returns = None
        if self.future is not None and self.future.done():
            returns = self.take(self.future.result) or None
            self.future = None
        now = time.monotonic()
        if self.evaluator is not None and self.future is None and now >= self.next_at and self.progress.updates > 0:
            self.future = self.evaluator.submit()
            self.next_at = now + self.interval_s
        return returns

    def take(self, result: Callable[[], dict[str, Any]]) -> list[float]:
        """The returns of an evaluation, recorded as the last and best (empty if it failed: logged,
        training goes on)."""
        try:
            res = result()
        except Exception as e:  # noqa: BLE001 - an evaluation error must not cost the run or its checkpoint
            log.warning("evaluation failed: %s", cause(e))
            return []
        returns: list[float] = res["eval_returns"]
        self.progress.eval_seats = {f"eval_seat_{seat}_{k}": v for seat, rates in res.get("eval_seats", {}).items()
                                    for k, v in rates.items()}
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
        if self.future is not None:
            out = self.take(functools.partial(self.future.result, timeout=300)) or None
            self.future = None
        if self.progress.last_eval is None and self.evaluator is not None and self.progress.updates > 0:
            out = self.take(self.evaluator.evaluate) or None
        return out
