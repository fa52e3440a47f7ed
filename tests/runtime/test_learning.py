"""The learner loop, Ray-free, with a fake learner over in-process shards: updates, priorities written
back, weights published every publish_period updates, skipped updates not written back."""

from __future__ import annotations

import numpy as np

from apexrl.config import Config
from apexrl.replay.client import LocalShards, ReplayClient
from apexrl.replay.shard import ReplayShard
from apexrl.runtime.learning import LearnerLoop


class FakeLearner:
    def __init__(self, skip_every: int = 0) -> None:
        self.updates = self.skipped_updates = self.consecutive_skips = 0
        self.skip_every, self.calls = skip_every, 0

    def update(self, batch, weights):
        self.calls += 1
        if self.skip_every and self.calls % self.skip_every == 0:
            self.skipped_updates += 1
            return None, {"skipped": 1.0}
        self.updates += 1
        return np.full(len(weights), 5.0), {"loss": float(self.updates)}

    def weights(self):
        return {"w": np.array([self.updates])}


def _loop(learner, publish_period=3):
    cfg = Config().replace(**{"learner.batch_size": 4, "learner.publish_period": publish_period,
                              "replay.samples_per_insert": None})
    shard = ReplayShard(100, alpha=1.0, seed=0, min_size=8)
    rng = np.random.default_rng(0)
    batch = {"obs": rng.normal(size=(20, 2)).astype(np.float32), "action": np.zeros(20, np.int64),
             "reward": np.ones(20, np.float32), "discount": np.ones(20, np.float32),
             "next_obs": rng.normal(size=(20, 2)).astype(np.float32)}
    shard.add(batch, np.ones(20))
    published = []
    client = ReplayClient(LocalShards([shard]), 1, batch_size=4, prefetch=2, batches_per_request=2, seed=0)
    return LearnerLoop(cfg, learner, client, lambda v, w: published.append(v)), shard, published


def test_updates_write_priorities_back_and_publish_on_the_period():
    learner = FakeLearner()
    loop, shard, published = _loop(learner)
    res = loop.train(60.0, max_updates=9)
    assert res["updates"] == 10 and res["metrics"]["loss"] > 0  # answers of 2 batches are used whole
    assert published == [0, 3, 6, 9]  # the initial weights, then every 3 updates
    loop.train(60.0, max_updates=2)
    # Priorities ride on the next request to the shard and are applied when it is answered: those of the
    # last two answers (2 batches of 4 each) are still on their way.
    assert learner.updates == 12 and shard.priority_updates == (12 - 2 * 2) * 4
    assert shard.buffer.total_priority > 20  # raw priority 5 ** alpha 1 replaced 1 for the written items


def test_a_skipped_update_writes_nothing_back():
    learner = FakeLearner(skip_every=1)
    loop, shard, _ = _loop(learner)
    res = loop.train(0.05)
    assert res["updates"] == 0 and learner.skipped_updates > 0
    loop.train(0.05)
    assert shard.priority_updates == 0


def test_in_process_it_stops_at_the_first_refused_sample():
    loop, shard, _ = _loop(FakeLearner())
    shard.min_size = shard.limiter.min_size = 1000  # warming up: every sample refused
    res = loop.train(60.0, stop_when_refused=True)
    assert res["updates"] == 0


def test_a_run_stops_on_the_training_mean_only_with_ten_episodes_of_those_slots():
    from apexrl.config import StopConfig
    from apexrl.runtime.stopping import StopConditions

    stop = StopConditions(StopConfig(train_return=150.0))
    assert stop.check(None, 1.0, 100, 1.0, [200.0] * 9) == ""
    assert stop.check(None, 1.0, 100, 1.0, [140.0] * 10) == ""
    assert "training mean 160.0" in stop.check(None, 2.0, 200, 2.0, [160.0] * 10)
    assert (stop.time_to_target, stop.steps_to_target) == (2.0, 200)


def test_a_game_stops_when_every_seat_loses_at_most_its_rate():
    from apexrl.config import StopConfig
    from apexrl.runtime.stopping import StopConditions

    stop = StopConditions(StopConfig(loss_rates=(0.01, 0.03)))
    seats = {"eval_seat_p1_win": 0.97, "eval_seat_p1_loss": 0.01, "eval_seat_p2_loss": 0.031}
    assert stop.check([0.9], 1.0, 100, 1.0, None, seats) == ""  # second seat 3.1% > 3%
    seats["eval_seat_p2_loss"] = 0.03
    assert stop.check([0.9], 2.0, 200, 2.0, None, seats) == ("evaluation losses against the opponent p1 1.0% <= 1.0%, "
                                                             "p2 3.0% <= 3.0%")
    assert stop.check(None, 3.0, 300, 3.0, None, seats) == ""  # no fresh evaluation in this report
    one = StopConditions(StopConfig(loss_rates=(0.02,)))  # one rate for every seat
    assert one.check([0.9], 1.0, 1, 1.0, None, {"eval_seat_a_loss": 0.02, "eval_seat_b_loss": 0.021}) == ""
    wins = StopConditions(StopConfig(win_rates=(0.95,)))
    assert wins.check([0.9], 1.0, 1, 1.0, None, {"eval_seat_a_win": 0.96, "eval_seat_b_win": 0.94}) == ""
    assert wins.check([0.9], 1.0, 1, 1.0, None, {"eval_seat_a_win": 0.96, "eval_seat_b_win": 0.95}) == (
        "evaluation wins against the opponent a 96.0% >= 95.0%, b 95.0% >= 95.0%")
