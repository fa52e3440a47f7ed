"""The driver's work sizes: actor chunks by the speed of the last one, none past the env-step budget."""

from __future__ import annotations

from apexrl.runtime.chunks import first_actor_chunk, next_actor_chunk, within_budget


def test_a_chunk_is_a_quarter_second_of_acting_at_the_last_speed():
    assert first_actor_chunk(16) == 16  # 256 env steps before the speed is known
    # 100 vector steps of 8 envs in 0.05 s: 0.5 ms each -> 0.25 s is 500 vector steps.
    assert next_actor_chunk({"time_s": 0.05, "env_steps": 800}, 8) == 500


def test_no_chunk_runs_past_the_budget():
    # 30,000 budget, 27,000 counted, 2,000 in flight on other actors: 1,000 left = 62.5 -> 63 vector steps of 16.
    assert within_budget(500, 16, 30_000, 27_000, 2_000) == 63
    assert within_budget(10, 16, 30_000, 27_000, 2_000) == 10  # a smaller chunk stays as it is
    assert within_budget(500, 16, 30_000, 28_000, 2_000) == 0  # spoken for: the actor waits for the stop
    assert within_budget(500, 16, None, 10**9, 10**9) == 500  # no budget
