"""Samples-per-insert rate limiting, after Reverb's SampleToInsertRatio (Cassirer et al., 2021).

With ratio r, error buffer b and lead l, the shard keeps its counters inside the band

    r * inserted - b  <=  sampled  <=  r * inserted + l

The learner may sample while ``sampled + batch <= r * inserted + l``; an actor may insert while
``r * inserted - sampled <= b``. Refusing both at once needs r*I - b > sampled > r*I + l - batch, so the
limiter cannot deadlock as long as b + l >= batch (the defaults give b >= 2 * batch, l >= batch); below
``min_size`` sampling is refused and inserting always allowed, so the warm-up cannot deadlock either.
``ratio=None`` disables it. tests/test_rate_limiter.py checks both sides under adversarial schedules.

Why the band is lopsided: b must absorb an actor's whole send (``ratio * send_every`` samples) or actors
stall on their own granularity, but a learner allowed that far ahead spends it the moment replay is warm,
as a burst of updates on the warm-up's few thousand random-policy transitions. On CartPole that burst
(256 updates) cut the seeds solved within 2,250 updates from 23 to 13 of 32 and those never solved in
8,000 from 1 to 7 (docs/design.md).

Why the actors' band is narrower until the learner's first sample (given ``batch_size``): the learner's
process is the last to start (torch, its network) while the actors already act, and the full band lets
them put ``error_buffer / ratio`` transitions of the untrained network (2,048 on CartPole) past
``min_size``, plus a send each, before the first update; that kind of lead cost solves (docs/design.md). Until the first sample the
actors may insert only what the learner's first batch needs, ``max(0, batch_size - lead)`` samples' worth
(0 with the default lead): they stop at ``min_size`` plus the send that crossed it, and leave the cores
to the learner's start-up. The warm-up cannot deadlock: at that point the learner may sample.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RateLimiter:
    ratio: float | None
    min_size: int
    error_buffer: float  # samples the learner may fall behind the ratio (actors keep inserting)
    max_lead: float | None = None  # samples it may run ahead; None = error_buffer (a symmetric band)
    batch_size: int | None = None  # the learner's batch: given, actors wait at min_size for its first sample

    @property
    def lead(self) -> float:
        return self.error_buffer if self.max_lead is None else self.max_lead

    def can_sample(self, size: int, inserted: int, sampled: int, batch: int) -> bool:
        if size < self.min_size:
            return False
        if self.ratio is None:
            return True
        return sampled + batch <= self.ratio * max(0, inserted - self.min_size) + self.lead

    def batches_allowed(self, size: int, inserted: int, sampled: int, batch: int, wanted: int) -> int:
        """How many of ``wanted`` batches may be sampled now (0..wanted); ``can_sample`` applied batch by
        batch, so one request for k batches is never granted more than k single requests would be."""
        if size < self.min_size or wanted < 1:
            return 0
        if self.ratio is None:
            return wanted
        room = self.ratio * max(0, inserted - self.min_size) + self.lead - sampled
        return int(max(0, min(wanted, room // batch)))

    def can_insert(self, size: int, inserted: int, sampled: int) -> bool:
        if self.ratio is None or size < self.min_size:
            return True
        band = self.error_buffer
        if sampled == 0 and self.batch_size is not None:
            band = min(band, max(0.0, self.batch_size - self.lead))
        return self.ratio * max(0, inserted - self.min_size) - sampled <= band


def default_error_buffer(ratio: float, batch_size: int, prefetch: int, send_every: int) -> float:
    """Wide enough that neither side stalls on its own granularity: a learner with ``prefetch`` batches
    in flight, an actor sending ``send_every`` transitions at a time."""
    return 2.0 * max(batch_size * prefetch, ratio * send_every)


def default_max_lead(batch_size: int, batches_per_request: int) -> float:
    """One learner request: enough that a request is granted whole, no more."""
    return float(batch_size * max(1, batches_per_request))
