"""Samples-per-insert rate limiter: the ratio holds and neither side can deadlock.

Both sides are simulated in one process with the Ray-free classes, under schedules chosen to be
hostile: one side gets long runs of turns while the other starves, batch sizes jump around, the
learner asks for several batches per request. No wall clock anywhere: a "turn" is one call.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apexrl.replay.rate_limiter import RateLimiter, default_error_buffer, default_max_lead
from apexrl.replay.shard import ReplayShard


def _batch(n: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    return ({"obs": np.zeros((n, 4), np.float32), "action": np.zeros(n, np.int64),
             "reward": np.ones(n, np.float32)}, np.full(n, 0.5))


class _Sim:
    """An actor that obeys the protocol of ``RayReplaySink`` (add, and if refused poll until allowed)
    and a learner that obeys ``LearnerWorker`` (ask for k batches, take what is granted)."""

    def __init__(self, ratio: float, batch: int, min_size: int, buffer: float, capacity: int = 2_000,
                 lead: float | None = None, gated: bool = False) -> None:
        self.shard = ReplayShard(capacity, alpha=0.6, seed=0, min_size=min_size, samples_per_insert=ratio,
                                 error_buffer=buffer, max_lead=lead, batch_size=batch if gated else None)
        self.ratio, self.batch, self.buffer = ratio, batch, buffer
        self.actor_blocked = False
        self.max_send = 0
        self.insert_moves = self.sample_moves = 0

    def actor_turn(self, n: int) -> bool:
        """One actor move; True when it inserted (progress)."""
        if self.actor_blocked:
            self.actor_blocked = not self.shard.insert_allowed()
            return False
        self.max_send = max(self.max_send, n)
        self.actor_blocked = not self.shard.add(*_batch(n))
        self.insert_moves += 1
        return True

    def learner_turn(self, k: int) -> bool:
        """One learner request for ``k`` batches; True when it got at least one."""
        res = self.shard.sample(self.batch, beta=0.4, num_batches=k)
        if "batch" not in res:
            return False
        got = res["num_batches"]
        assert len(res["indices"]) == got * self.batch and 1 <= got <= k
        self.sample_moves += 1
        return True

    def can_progress(self) -> bool:
        s = self.shard
        actor_ok = not self.actor_blocked or s.insert_allowed()
        learner_ok = s.limiter.can_sample(len(s.buffer), s.inserted, s.sampled, self.batch)
        return actor_ok or learner_ok

    def deficit(self) -> float:
        """sampled - ratio * (inserted - min_size): 0 on the target line."""
        s = self.shard
        return s.sampled - self.ratio * max(0, s.inserted - s.min_size)


def _adversarial_run(seed: int, ratio: float, batch: int, buffer: float, turns: int = 4_000,
                     lead: float | None = None, gated: bool = False) -> _Sim:
    rng = np.random.default_rng(seed)
    sim = _Sim(ratio, batch, min_size=200, buffer=buffer, lead=lead, gated=gated)
    side = 0
    for _ in range(turns):
        assert sim.can_progress(), f"deadlock at inserted={sim.shard.inserted} sampled={sim.shard.sampled}"
        if rng.random() < 0.05:  # long runs for one side, then switch
            side = 1 - side
        if side == 0 or rng.random() < 0.02:
            sim.actor_turn(int(rng.choice([1, 7, 64, 256, 300])))
        else:
            sim.learner_turn(int(rng.integers(1, 5)))
        # The band: the learner never gets ahead by more than its lead; the actor can overshoot by at
        # most one send (it checks after adding, as a real actor learns only from the add's answer).
        assert sim.deficit() <= (buffer if lead is None else lead) + 1e-9
        assert sim.deficit() >= -(buffer + ratio * sim.max_send) - 1e-9
    return sim


@pytest.mark.parametrize("ratio,batch", [(8.0, 64), (0.5, 32), (32.0, 64), (1.0, 512)])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("lopsided", [False, True], ids=["symmetric", "default-lead"])
@pytest.mark.parametrize("gated", [False, True], ids=["open-warm-up", "gated-warm-up"])
def test_adversarial_schedule_keeps_ratio_and_progress(ratio: float, batch: int, seed: int, lopsided: bool,
                                                       gated: bool) -> None:
    buffer = default_error_buffer(ratio, batch, prefetch=4, send_every=64)
    lead = default_max_lead(batch, batches_per_request=4) if lopsided else None
    sim = _adversarial_run(seed, ratio, batch, buffer, lead=lead, gated=gated)
    s = sim.shard
    assert sim.insert_moves > 10 and sim.sample_moves > 10
    # Measured samples/insert after warm-up is the target within the band's width.
    inserted = s.inserted - s.min_size
    assert inserted > 0
    measured = s.sampled / inserted
    tolerance = (buffer + ratio * sim.max_send) / inserted
    assert abs(measured - ratio) <= tolerance + 1e-9


def test_long_run_converges_to_ratio() -> None:
    """With many inserts the band becomes small relative to the totals: within 5% of the target."""
    ratio, batch = 4.0, 32
    buffer = default_error_buffer(ratio, batch, prefetch=2, send_every=64)
    sim = _adversarial_run(7, ratio, batch, buffer, turns=20_000)
    inserted = sim.shard.inserted - sim.shard.min_size
    assert inserted * ratio > 20 * (buffer + ratio * sim.max_send)
    assert sim.shard.sampled / inserted == pytest.approx(ratio, rel=0.05)


def test_a_learner_warm_up_grants_only_the_lead_before_actors_insert_more() -> None:
    """The actors' slack (a whole send) is not the learner's: the moment replay is warm, the learner may
    take at most ``max_lead`` samples, not a burst of updates on the warm-up's transitions."""
    ratio, batch, k = 8.0, 64, 8
    buffer = default_error_buffer(ratio, batch, prefetch=4 * k, send_every=1024)
    sim = _Sim(ratio, batch, min_size=2_000, buffer=buffer, capacity=10_000, lead=default_max_lead(batch, k))
    sim.actor_turn(2_000)
    taken = 0
    while sim.learner_turn(k):
        taken = sim.shard.sampled
    assert taken == batch * k  # one request's worth; a symmetric band would grant buffer / batch = 256 batches
    sim.actor_turn(100)  # every inserted transition buys `ratio` samples
    assert sim.learner_turn(2 * k) and sim.shard.sampled - taken == int(ratio * 100 // batch) * batch


@pytest.mark.parametrize("lead", [512.0, 0.0], ids=["default-lead", "no-lead"])
def test_actors_wait_at_min_size_until_the_learners_first_sample(lead: float) -> None:
    """Given the learner's batch, the actors stop at min_size (plus the send that crossed it) until the
    learner has sampled once: not thousands of transitions of the untrained network ahead of the first
    update. With a lead below one batch they may insert exactly what that first batch needs."""
    ratio, batch = 8.0, 64
    buffer = default_error_buffer(ratio, batch, prefetch=32, send_every=1024)
    gated = _Sim(ratio, batch, min_size=2_000, buffer=buffer, capacity=20_000, lead=lead, gated=True)
    open_ = _Sim(ratio, batch, min_size=2_000, buffer=buffer, capacity=20_000, lead=lead)
    for sim in (gated, open_):
        while sim.actor_turn(16) and sim.shard.inserted < 10_000:
            pass
    if lead >= batch:
        assert gated.shard.inserted == 2_016  # the first send past min_size is the last
    else:
        assert gated.shard.inserted - 2_000 == pytest.approx((batch - lead) / ratio, abs=16)
    assert open_.shard.inserted >= 2_000 + buffer / ratio  # the whole band, 2,048 transitions more
    assert gated.learner_turn(1)  # the learner may go, so nothing deadlocks...
    assert gated.shard.insert_allowed()  # ...and after its first sample the actors have their band again
    gated.actor_turn(16)  # the waiting actor's poll
    while gated.actor_turn(16):
        pass
    assert gated.shard.inserted >= open_.shard.inserted


def test_learner_alone_stops_and_actor_alone_stops() -> None:
    """Each side, run alone, is refused after a bounded number of moves; the other side unblocks it."""
    ratio, batch = 8.0, 64
    buffer = default_error_buffer(ratio, batch, 4, 64)
    sim = _Sim(ratio, batch, min_size=100, buffer=buffer)
    moves = 0
    while sim.actor_turn(64):
        moves += 1
        assert moves < 1_000
    assert sim.actor_blocked  # the learner has not sampled: the actor must wait...
    assert sim.learner_turn(4)  # ...and the learner can go
    while sim.learner_turn(4):
        moves += 1
        assert moves < 10_000
    assert not sim.actor_blocked or sim.shard.insert_allowed()  # starved learner: the actor may insert
    assert sim.actor_turn(64) or sim.actor_turn(64)


def test_a_stopped_shard_lets_a_waiting_actor_finish() -> None:
    """At the end of a run the learner is gone: the shard stops rate-limiting so the actor's chunk ends."""
    ratio, batch = 8.0, 64
    sim = _Sim(ratio, batch, min_size=100, buffer=default_error_buffer(ratio, batch, 4, 64))
    while sim.actor_turn(64):
        assert sim.insert_moves < 1_000
    assert not sim.shard.insert_allowed()
    sim.shard.stop_rate_limiting()
    assert sim.shard.insert_allowed() and sim.shard.add(*_batch(64))


def test_warmup_never_refuses_inserts_or_grants_samples() -> None:
    lim = RateLimiter(ratio=8.0, min_size=500, error_buffer=0.0)
    for size in range(0, 500, 37):
        assert lim.can_insert(size, inserted=size, sampled=0)
        assert not lim.can_sample(size, inserted=size, sampled=0, batch=1)
        assert lim.batches_allowed(size, size, 0, 1, 8) == 0


def test_unlimited_ratio_grants_everything_after_warmup() -> None:
    lim = RateLimiter(ratio=None, min_size=10, error_buffer=0.0)
    assert lim.can_insert(10, 10, 10**9) and lim.can_sample(10, 10, 10**9, 512)
    assert lim.batches_allowed(10, 10, 10**9, 512, 6) == 6


@settings(max_examples=300, deadline=None)
@given(ratio=st.floats(0.05, 64.0), batch=st.integers(1, 1024), inserted=st.integers(0, 10**6),
       sampled=st.integers(0, 10**7), slack=st.floats(0.0, 4.0), wanted=st.integers(1, 16),
       lead_share=st.one_of(st.none(), st.floats(0.0, 1.0)), gated=st.booleans(),
       fresh=st.booleans())
def test_no_state_refuses_both_sides(ratio: float, batch: int, inserted: int, sampled: int, slack: float,
                                     wanted: int, lead_share: float | None, gated: bool, fresh: bool) -> None:
    """With error_buffer + lead >= batch there is no state where both the actor and the learner are
    refused (refusing both needs r*I - b > S > r*I + l - batch); the defaults give b >= 2 * batch and
    l >= batch. ``lead_share`` None is the symmetric band (l = b, so b >= batch / 2 suffices). The gated
    warm-up narrows the actors' band to max(0, batch - l) before the first sample: still enough."""
    if lead_share is None:
        buffer, lead = batch / 2 + slack * batch, None
    else:  # any split of at least one batch between the two sides
        total = batch * (1 + slack)
        buffer, lead = total * (1 - lead_share), total * lead_share
    lim = RateLimiter(ratio=ratio, min_size=1, error_buffer=buffer, max_lead=lead,
                      batch_size=batch if gated else None)
    sampled = 0 if fresh else sampled  # before the learner's first sample (the gated warm-up's state)
    size = max(1, inserted)
    assert lim.can_insert(size, inserted, sampled) or lim.can_sample(size, inserted, sampled, batch)
    # Asking for k batches is the same as asking k times in a row.
    n = lim.batches_allowed(size, inserted, sampled, batch, wanted)
    assert n == sum(1 for j in range(1, wanted + 1) if lim.can_sample(size, inserted, sampled + (j - 1) * batch,
                                                                      batch))
    assert default_error_buffer(ratio, batch, 1, 1) >= 2 * batch and default_max_lead(batch, 1) >= batch


def test_a_buffer_below_half_a_batch_can_deadlock() -> None:
    """Why the bound above matters: b = 0 with a batch of 64 has a state refusing both sides."""
    lim = RateLimiter(ratio=1.0, min_size=1, error_buffer=0.0)
    inserted, sampled = 1 + 100, 70  # r*I' - S = 30: actor refused (30 > 0), learner refused (70+64 > 100)
    assert not lim.can_insert(inserted, inserted, sampled)
    assert not lim.can_sample(inserted, inserted, sampled, 64)
