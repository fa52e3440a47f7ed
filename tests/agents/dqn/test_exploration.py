"""Ape-X per-actor exploration: eps_i = 0.4 ** (1 + 7 i / (N - 1))."""

import numpy as np
import pytest

from apexrl.agents.dqn.exploration import actor_epsilons, epsilon_schedule


def test_schedule_matches_the_paper_formula():
    eps = epsilon_schedule(8, 0.4, 7.0)
    expected = [0.4 ** (1 + 7 * i / 7) for i in range(8)]
    np.testing.assert_allclose(eps, expected)
    assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4 ** 8)


def test_single_unit_gets_the_base():
    assert epsilon_schedule(1, 0.4, 7.0).tolist() == [0.4]


def test_per_actor_mode_gives_each_actor_its_paper_epsilon():
    for i in range(4):
        eps = actor_epsilons(i, 4, 3, 0.4, 7.0, per="actor")
        np.testing.assert_allclose(eps, 0.4 ** (1 + 7 * i / 3))


def test_per_env_mode_partitions_the_global_schedule_over_actors():
    all_eps = np.sort(np.concatenate([actor_epsilons(i, 2, 4, 0.4, 7.0, per="env") for i in range(2)]))
    np.testing.assert_allclose(all_eps, np.sort(epsilon_schedule(8, 0.4, 7.0)))
    # each actor holds both explorative and greedy slots
    assert actor_epsilons(0, 2, 4, 0.4, 7.0).max() > 0.1 and actor_epsilons(1, 2, 4, 0.4, 7.0).max() > 0.1


def test_bad_index_is_rejected():
    with pytest.raises(ValueError):
        actor_epsilons(3, 3, 1, 0.4, 7.0)
