"""The board: actors' counters in one place, env-step leases that never add up to more than the budget."""

import pytest

from apexrl.runtime.board import PER_ACTOR_DETAIL, Board, push_period


def _push(board, i, steps, want=0, **more):
    return board.push(i, {"env_steps": steps, "time_s": 1.0, **more}, want)


def test_without_a_budget_actors_step_freely_and_see_the_global_count():
    b = Board(num_actors=2, envs_per_actor=4)
    assert b.register(0, 256) == {"global_env_steps": 0, "lease": None, "spent": False}
    b.register(1, 256)
    _push(b, 0, 400)
    assert _push(b, 1, 100) == {"global_env_steps": 500, "lease": None, "spent": False}


def test_leases_stop_at_the_budget_overshooting_by_less_than_one_vector_step():
    b = Board(num_actors=2, envs_per_actor=4, budget=10)
    assert b.register(0, want=8)["lease"] == 8
    assert b.register(1, want=8)["lease"] == 4  # 2 steps left, rounded up to a whole vector step
    assert _push(b, 0, 8, want=8)["lease"] == 0  # nothing left to grant
    assert not b.spent()  # actor 1 still holds a lease
    reply = _push(b, 1, 4, want=8)
    assert reply["lease"] == 0 and reply["spent"] and b.env_steps == 12


def test_a_lease_tops_up_to_what_the_actor_wants_not_beyond():
    b = Board(num_actors=1, envs_per_actor=1, budget=1000)
    assert b.register(0, want=100)["lease"] == 100
    assert _push(b, 0, 30, want=100)["lease"] == 30  # holds 70, wants 100
    assert _push(b, 0, 0, want=50)["lease"] == 0


def test_a_restarted_actors_unused_lease_goes_back_to_the_pool():
    b = Board(num_actors=2, envs_per_actor=1, budget=100)
    assert b.register(0, want=60)["lease"] == 60
    assert b.register(1, want=60)["lease"] == 40
    _push(b, 0, 10)  # actor 0 then dies holding 50 steps
    assert b.register(0, want=60)["lease"] == 50
    assert b.outstanding == 90 and b.env_steps == 10


def test_a_crash_loop_is_an_actor_that_has_not_stepped_since_it_restarted():
    b = Board(num_actors=1, envs_per_actor=1)
    b.register(0, 1)
    assert not b.progressed(0)
    _push(b, 0, 5)
    assert b.progressed(0)
    b.register(0, 1)
    assert not b.progressed(0)


def test_a_summary_brings_the_new_episodes_once_and_the_rate_of_every_actor():
    b = Board(num_actors=2, envs_per_actor=1)
    _push(b, 0, 8000, episode_returns=[1.0, 2.0], episode_lengths=[3, 4])
    b.push(1, {"env_steps": 3000, "time_s": 1.0}, 0)
    b.push(0, {"env_steps": 6000, "time_s": 2.0}, 0)  # actor 0's newest rate replaces its older one
    s = b.take()
    assert s["env_steps"] == 17000 and s["episodes"] == 2
    assert s["episode_returns"] == [1.0, 2.0] and s["episode_lengths"] == [3, 4]
    assert s["env_steps_per_s"] == 3000 + 3000
    assert b.take()["episode_returns"] == []


def test_the_training_mean_rllib_reported_is_over_the_least_exploring_third_of_the_slots():
    b = Board(num_actors=2, envs_per_actor=3)
    # six slots; the least-exploring third: levels 0.001 and 0.01 (two slots), level 0.01 shared by two
    b.push(0, {"env_steps": 3, "episode_returns": [10.0, 20.0, 30.0], "episode_exploration": [0.4, 0.01, 0.001],
               "exploration": [0.4, 0.1, 0.01], "exploration_name": "epsilon"}, 0)
    b.push(1, {"env_steps": 2, "episode_returns": [40.0, 50.0], "episode_exploration": [0.2, 0.01],
               "exploration": [0.2, 0.05, 0.001], "exploration_name": "epsilon"}, 0)
    assert b.low_exploration_returns() == [20.0, 30.0, 50.0]
    assert b.low_exploration_returns(window=2) == [30.0, 50.0]
    assert b.take()["actors"][1] == {"exploration": ("epsilon", pytest.approx(0.251 / 3)), "returns": [40.0, 50.0]}


def test_per_actor_detail_only_for_small_runs_so_a_report_does_not_grow_with_the_actors():
    assert len(Board(PER_ACTOR_DETAIL, 1).take()["actors"]) == PER_ACTOR_DETAIL
    assert Board(PER_ACTOR_DETAIL + 1, 1).take()["actors"] == {}


def test_totals_of_each_actors_life_add_up_over_actors():
    b = Board(num_actors=2, envs_per_actor=1)
    _push(b, 0, 1, dropped_sends=2, nonfinite_steps=3, nonfinite_dropped=4)
    _push(b, 0, 1, dropped_sends=5)  # totals of the actor's life: the newest replaces the older
    _push(b, 1, 1, dropped_sends=1, nonfinite_steps=1, nonfinite_dropped=1)
    s = b.take()
    assert (s["dropped_sends"], s["nonfinite_steps"], s["nonfinite_dropped"]) == (6, 4, 5)


def test_the_push_period_keeps_the_board_under_its_call_budget():
    assert push_period(4, report_interval_s=2.0) == 1.0
    assert push_period(4, report_interval_s=0.5) == 0.25
    assert push_period(1000, report_interval_s=2.0) == 4.0  # 1000 actors / 4 s = 250 pushes/s


def test_an_actors_rate_is_over_the_wall_time_between_its_pushes_not_only_the_time_inside_its_env():
    b = Board(num_actors=1, envs_per_actor=1)
    # 70 steps in 1 s of stepping, but 2 s passed since the last push: a paced env caught up on lost time
    b.push(0, {"env_steps": 70, "time_s": 1.0, "wall_s": 2.0}, 0)
    assert b.take()["env_steps_per_s"] == 35
