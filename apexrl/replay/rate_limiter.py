"""Samples-per-insert rate limiting, after Reverb's SampleToInsertRatio (Cassirer et al., 2021).

With ratio r and error buffer b, the shard keeps its counters inside the band

    r * inserted - b  <=  sampled  <=  r * inserted + b

The learner may sample while ``sampled + batch <= r * inserted + b``; an actor may insert while
``r * inserted - sampled <= b``. Refusing both at once needs b < r*I - sampled < batch - b, so the
limiter cannot deadlock as long as b >= batch / 2 (``default_error_buffer`` gives b >= 2 * batch); below
``min_size`` sampling is refused and inserting always allowed, so the warm-up cannot deadlock either.
``ratio=None`` disables it. tests/test_rate_limiter.py checks both sides under adversarial schedules.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RateLimiter:
    ratio: float | None
    min_size: int
    error_buffer: float

    def can_sample(self, size: int, inserted: int, sampled: int, batch: int) -> bool:
        if size < self.min_size:
            return False
        if self.ratio is None:
            return True
        return sampled + batch <= self.ratio * max(0, inserted - self.min_size) + self.error_buffer

    def batches_allowed(self, size: int, inserted: int, sampled: int, batch: int, wanted: int) -> int:
        """How many of ``wanted`` batches may be sampled now (0..wanted); ``can_sample`` applied batch by
        batch, so one request for k batches is never granted more than k single requests would be."""
        if size < self.min_size or wanted < 1:
            return 0
        if self.ratio is None:
            return wanted
        room = self.ratio * max(0, inserted - self.min_size) + self.error_buffer - sampled
        return int(max(0, min(wanted, room // batch)))

    def can_insert(self, size: int, inserted: int, sampled: int) -> bool:
        if self.ratio is None or size < self.min_size:
            return True
        return self.ratio * max(0, inserted - self.min_size) - sampled <= self.error_buffer


def default_error_buffer(ratio: float, batch_size: int, prefetch: int, send_every: int) -> float:
    """Wide enough that neither side stalls on its own granularity: a learner with ``prefetch`` batches
    in flight, an actor sending ``send_every`` transitions at a time."""
    return 2.0 * max(batch_size * prefetch, ratio * send_every)
