"""bench scale on a tiny case: 6 simulated actors in 3 processes under the real driver loop. What it reports
follows from its setup: env steps at about N x rate, pushes at about N / push period, weights reaching the
actors within a publication period, nothing waiting on the board."""

from __future__ import annotations

import argparse

import pytest

from apexrl.bench import scale
from apexrl.runtime.board import push_period

pytestmark = pytest.mark.timeout(300)


def test_a_small_fleet_steps_at_its_rate_pushes_per_period_and_gets_weights_within_a_publication():
    args = argparse.Namespace(rate=20.0, per_host=2, seconds=6.0, warmup=4.0, config="cartpole", send_every=20,
                              poll_every=2, update_ms=20.0, publish_every=5, set=[])
    row = scale.measure(6, args)
    assert row["actors"] == 6 and row["hosts"] == 3
    assert 0.6 * 120 <= row["env_steps_per_s"] <= 1.05 * 120  # 6 actors x 20 steps/s
    expected_pushes = 6 / push_period(6, 2.0)  # the cartpole preset reports every 2 s
    assert 0.5 * expected_pushes <= row["board_pushes_per_s"] <= 1.5 * expected_pushes
    assert row["weight_latency_p99_s"] is not None and row["weight_latency_p99_s"] < 1.0
    assert row["board_wait_share"] < 0.01 and row["learner_updates_per_s"] > 0
    assert 0 < row["driver_calls_per_s"] < 20  # board summaries and liveness, not per-actor chunks
    assert "|" in scale.format_row(row)
