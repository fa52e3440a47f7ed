"""A run stops on a target only when the weights that met it meet it again: an evaluation at or above the
target is played for ``stop.confirm_episodes`` more episodes with the same weights, and all of them together
decide (and are what the run records and ``best.pt`` keeps)."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from apexrl.config import StopConfig
from apexrl.runtime.evaluations import Evaluations, pool
from apexrl.runtime.progress import Progress
from apexrl.runtime.stopping import StopConditions


class Evaluator:
    """Answers each evaluation at once with the next of ``answers``; remembers what it was asked to play."""

    def __init__(self, answers: list[list[float]]) -> None:
        self.answers, self.asked = list(answers), []

    def submit(self, again=None) -> Future:
        fut: Future = Future()
        if not self.answers:
            return fut  # never done: nothing more to say
        self.asked.append(again)
        returns = self.answers.pop(0)
        version, weights, episodes = again or (len(self.asked), {"w": len(self.asked)}, len(returns))
        fut.set_result({"eval_returns": returns, "weights": weights, "weights_version": version,
                        "seed": 100 + len(self.asked), "episodes": episodes})
        return fut


class Keeper:
    def __init__(self) -> None:
        self.kept: list[dict] = []

    def best(self, res, elapsed) -> None:
        self.kept.append(res)


def evaluations(answers, confirm_episodes, target=10.0):
    progress = Progress(num_actors=1)
    progress.updates = 1
    stop = StopConditions(StopConfig(target_return=target))
    ev = Evaluations(Evaluator(answers), 0.0, progress, Keeper(), lambda: 1.0, stop.target_reached,
                     confirm_episodes, say=lambda line: None)
    return ev, stop, progress


def polls(ev, n):
    return [ev.poll() for _ in range(n)]


def test_an_evaluation_that_meets_the_target_is_played_again_with_the_same_weights_before_it_counts():
    ev, stop, progress = evaluations([[12.0, 12.0], [11.0, 11.0, 11.0, 11.0]], confirm_episodes=4)
    assert polls(ev, 3) == [None, None, [12.0, 12.0, 11.0, 11.0, 11.0, 11.0]]
    # first poll submits, second finds 12 >= 10 and asks for 4 more episodes of version 1's weights
    assert ev.evaluator.asked == [None, (1, {"w": 1}, 4)]
    assert progress.last_eval == pytest.approx(68 / 6) and stop.target_reached([12, 12, 11, 11, 11, 11])
    kept = ev.checkpointer.kept[0]
    assert kept["episodes"] == 6 and kept["parts"] == [(101, 2), (102, 4)] and kept["confirmed"]


def test_a_lucky_evaluation_that_its_confirmation_brings_under_the_target_does_not_stop_the_run():
    ev, stop, progress = evaluations([[12.0, 12.0], [8.0, 8.0, 8.0, 8.0], [9.0, 9.0]], confirm_episodes=4)
    pooled = polls(ev, 3)[2]
    assert pooled == [12.0, 12.0, 8.0, 8.0, 8.0, 8.0] and not stop.target_reached(pooled)  # mean 9.33
    assert progress.last_eval == pytest.approx(56 / 6)
    assert ev.poll() == [9.0, 9.0]  # training goes on: the next evaluation (asked for with the pooled one) is ordinary
    assert ev.evaluator.asked == [None, (1, {"w": 1}, 4), None]


def test_without_confirmation_the_first_evaluation_that_meets_the_target_counts():
    ev, _, progress = evaluations([[12.0, 12.0]], confirm_episodes=0)
    assert polls(ev, 2) == [None, [12.0, 12.0]] and ev.evaluator.asked == [None]


def test_an_evaluation_under_the_target_is_not_confirmed():
    ev, _, _ = evaluations([[3.0, 4.0]], confirm_episodes=4)
    assert polls(ev, 2) == [None, [3.0, 4.0]] and ev.evaluator.asked == [None]


def test_pooled_game_rates_are_weighted_by_episodes():
    a = {"eval_returns": [1.0] * 4, "episodes": 4, "seed": 1, "eval_illegal": 1,
         "eval_seats": {"p0": {"win": 1.0, "draw": 0.0, "loss": 0.0}}}
    b = {"eval_returns": [1.0] * 6 + [-1.0] * 6, "episodes": 12, "seed": 2, "eval_illegal": 0,
         "eval_seats": {"p0": {"win": 0.5, "draw": 0.0, "loss": 0.5}}}
    p = pool(a, b)
    assert p["eval_seats"]["p0"] == {"win": (4 + 6) / 16, "draw": 0.0, "loss": 6 / 16}
    assert p["episodes"] == 16 and p["eval_illegal"] == 1 and p["parts"] == [(1, 4), (2, 12)]


def test_a_negative_confirmation_is_one_line():
    from apexrl.config import ConfigError, from_dict

    with pytest.raises(ConfigError, match="stop.confirm_episodes"):
        from_dict({"stop": {"confirm_episodes": -1}})


def test_a_confirmation_that_fails_leaves_the_first_evaluation_standing_and_is_not_asked_again():
    ev, _, progress = evaluations([[12.0, 12.0]], confirm_episodes=4)
    broken: Future = Future()
    broken.set_exception(RuntimeError("evaluation worker lost"))
    ev.evaluator.submit = lambda again=None, first=ev.evaluator.submit: broken if again else first(again)
    assert polls(ev, 3) == [None, None, [12.0, 12.0]]
    assert progress.last_eval == 12.0 and ev.checkpointer.kept[0]["confirmed"] is False
