"""The learner's side of sharded replay, with a fake transport: requests in flight, priorities riding on
the next request to the same shard, shard choice by priority mass, failed and replaced shards."""

from __future__ import annotations

import numpy as np
import pytest

from apexrl.config import Config
from apexrl.replay.client import LocalShards, ReplayClient, batches_per_request, beta_at


class FakeTransport:
    """Answers every request at once with ``mass`` and ``size`` per shard; records what was sent."""

    def __init__(self, mass: list[float], fail: set[int] | None = None) -> None:
        self.mass, self.fail = mass, fail or set()
        self.sent: list[tuple[int, object, object]] = []

    def request(self, s, indices, priorities, batch_size, beta, num_batches):
        self.sent.append((s, None if indices is None else list(indices), None if priorities is None else list(priorities)))
        return s

    def result(self, s):
        if s in self.fail:
            return None
        return {"mass": self.mass[s], "size": 10, "inserted": 10, "batch": {}, "indices": np.arange(4)}


def test_beta_is_fixed_or_annealed_linearly():
    assert beta_at(Config(), 10_000) == pytest.approx(0.4)
    cfg = Config().replace(**{"replay.beta_final": 1.0, "replay.beta_anneal_updates": 10})
    assert [beta_at(cfg, u) for u in (0, 5, 10, 50)] == pytest.approx([0.4, 0.7, 1.0, 1.0])


@pytest.mark.parametrize("batch, k", [(64, 8), (128, 4), (512, 1), (1024, 1)])
def test_a_request_asks_for_about_512_transitions_unless_told(batch, k):
    assert batches_per_request(Config().replace(**{"learner.batch_size": batch})) == k
    assert batches_per_request(Config().replace(**{"learner.batch_size": batch, "learner.batches_per_request": 3})) == 3


def test_prefetch_requests_stay_in_flight_and_priorities_go_with_the_next_request_to_that_shard():
    t = FakeTransport([1.0])
    c = ReplayClient(t, 1, batch_size=4, prefetch=3, batches_per_request=1, seed=0)
    s, res = c.next(0.4)
    assert len(t.sent) == 3 and len(c.inflight) == 2  # three requested, the oldest answered
    c.write_back(s, np.array([7, 8]), np.array([0.5, 0.25]))
    c.next(0.4)
    assert t.sent[3] == (0, [7, 8], [0.5, 0.25])  # the fourth request carries them
    c.next(0.4)
    assert t.sent[4] == (0, None, None)  # ...once


def test_shards_are_chosen_in_proportion_to_their_priority_mass():
    t = FakeTransport([1.0, 3.0])
    c = ReplayClient(t, 2, batch_size=4, prefetch=1, batches_per_request=1, seed=0)
    for _ in range(4000):
        c.next(0.4)
    share = np.mean([s for s, _, _ in t.sent[100:]])
    assert share == pytest.approx(0.75, abs=0.03)


def test_a_failed_shard_is_left_out_until_it_is_replaced():
    t = FakeTransport([1.0, 1.0], fail={1})
    c = ReplayClient(t, 2, batch_size=4, prefetch=1, batches_per_request=1, seed=0)
    c.pending[1].append((np.array([1]), np.array([1.0])))
    answers = [c.next(0.4) for _ in range(50)]
    assert (1, None) in answers and not c.alive[1] and c.pending[1] == []
    after = [s for s, _ in answers[[a[0] for a in answers].index(1) + 1:]]
    assert after and set(after) == {0}
    t.fail = set()
    c.replaced([1])
    assert c.alive[1] and not c.inflight
    assert 1 in {c.next(0.4)[0] for _ in range(50)}


def test_in_process_requests_run_when_their_answer_is_awaited():
    calls = []

    class Shard:
        def update_and_sample(self, *args):
            calls.append(args)
            return {"mass": 1.0, "size": 0, "inserted": 0}

    t = LocalShards([Shard()])
    handle = t.request(0, None, None, 4, 0.4, 2)
    assert calls == []
    assert t.result(handle)["size"] == 0 and calls == [(None, None, 4, 0.4, 2)]
