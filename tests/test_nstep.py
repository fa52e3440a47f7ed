"""n-step returns by hand: windows, episode ends, termination (no bootstrap) vs truncation (bootstrap)."""

import numpy as np
import pytest

from apexrl.replay.nstep import NStepBuilder

G = 0.9


def run(builder, rewards, terminated=None, truncated=None):
    """Drive one env; obs at time t is [t], next_obs [t + 1]. Returns all emitted transitions."""
    T = len(rewards)
    terminated = terminated or [False] * T
    truncated = truncated or [False] * T
    out = []
    for t in range(T):
        tr = builder.step(np.array([[t]], dtype=np.float32), np.array([t % 2]), np.array([rewards[t]]),
                          np.array([[t + 1]], dtype=np.float32), np.array([terminated[t]]), np.array([truncated[t]]))
        if tr is not None:
            out += [{k: v[i] for k, v in tr.items()} for i in range(len(tr["action"]))]
    return out


def test_full_windows_sum_discounted_rewards_and_bootstrap_with_gamma_n():
    out = run(NStepBuilder(1, 3, G), [1.0, 2.0, 3.0, 4.0])
    assert [o["obs"][0] for o in out] == [0, 1]
    assert out[0]["reward"] == pytest.approx(1 + G * 2 + G * G * 3)
    assert out[0]["next_obs"][0] == 3 and out[0]["discount"] == pytest.approx(G ** 3)
    assert out[1]["reward"] == pytest.approx(2 + G * 3 + G * G * 4)
    assert out[1]["next_obs"][0] == 4


def test_termination_flushes_every_pending_window_without_bootstrap():
    out = run(NStepBuilder(1, 3, G), [1.0, 2.0, 3.0, 4.0], terminated=[False, False, False, True])
    assert [o["obs"][0] for o in out] == [0, 1, 2, 3]
    tail = out[1:]
    assert [o["reward"] for o in tail] == pytest.approx([2 + G * 3 + G * G * 4, 3 + G * 4, 4])
    assert all(o["discount"] == 0 for o in tail)
    assert all(o["next_obs"][0] == 4 for o in tail)


def test_truncation_bootstraps_with_gamma_to_the_window_length():
    out = run(NStepBuilder(1, 3, G), [1.0, 2.0], truncated=[False, True])
    assert [o["obs"][0] for o in out] == [0, 1]
    assert out[0]["reward"] == pytest.approx(1 + G * 2) and out[0]["discount"] == pytest.approx(G ** 2)
    assert out[1]["reward"] == pytest.approx(2) and out[1]["discount"] == pytest.approx(G)


def test_windows_never_cross_an_episode_boundary():
    rewards = [1.0] * 6
    term = [False, True, False, False, False, False]
    out = run(NStepBuilder(1, 3, G), rewards, terminated=term)
    first = [o for o in out if o["obs"][0] < 2]
    second = [o for o in out if o["obs"][0] >= 2]
    assert all(o["next_obs"][0] == 2 and o["discount"] == 0 for o in first)
    assert second[0]["obs"][0] == 2 and second[0]["reward"] == pytest.approx(1 + G + G * G)


def test_one_step_is_plain_td():
    out = run(NStepBuilder(1, 1, G), [5.0, 6.0], terminated=[False, True])
    assert [o["reward"] for o in out] == [5.0, 6.0]
    assert [o["discount"] for o in out] == pytest.approx([G, 0.0])


def test_envs_are_independent_and_every_step_is_emitted_once():
    rng = np.random.default_rng(0)
    E, T, n = 3, 200, 3
    b = NStepBuilder(E, n, G)
    count = 0
    for t in range(T):
        done = rng.random(E) < 0.1
        term = done & (rng.random(E) < 0.5)
        trunc = done & ~term
        tr = b.step(np.full((E, 1), t, np.float32), np.zeros(E, int), np.ones(E), np.full((E, 1), t + 1, np.float32),
                    term, trunc)
        if tr is not None:
            count += len(tr["action"])
            assert np.all(tr["reward"] <= (1 - G ** n) / (1 - G) + 1e-6)
    pending = int(b._count.sum())
    assert count + pending == E * T


def test_continuous_action_vectors_keep_their_shape_and_dtype():
    b = NStepBuilder(2, 2, G)
    act = lambda t: np.array([[t, -t], [t + 0.5, 0.0]], dtype=np.float32)  # noqa: E731
    obs = np.zeros((2, 3), np.float32)
    no = np.zeros(2, dtype=bool)
    assert b.step(obs, act(0.25), np.ones(2), obs, no, no) is None
    out = b.step(obs, act(1.0), np.ones(2), obs, no, no)
    assert out["action"].dtype == np.float32 and out["action"].shape == (2, 2)
    np.testing.assert_array_equal(out["action"], act(0.25))  # the window's first action


def test_slots_step_on_their_own_clock_as_agents_of_a_turn_based_game_do():
    # two slots, n=2: slot 0 steps at calls 1, 2, 3; slot 1 only at calls 2 and 4 (terminal)
    b = NStepBuilder(2, 2, G)
    one = lambda v: np.array([[v]], dtype=np.float32)
    assert b.step(one(0), np.array([0]), np.array([1.0]), one(1), np.array([False]), np.array([False]),
                  slots=[0]) is None
    out = b.step(np.array([[1], [10]], np.float32), np.array([0, 1]), np.array([2.0, 5.0]),
                 np.array([[2], [11]], np.float32), np.array([False, False]), np.array([False, False]), slots=[0, 1])
    assert out["obs"][:, 0].tolist() == [0] and out["reward"][0] == pytest.approx(1 + G * 2)
    assert out["next_obs"][0, 0] == 2 and out["discount"][0] == pytest.approx(G ** 2)
    out = b.step(one(2), np.array([0]), np.array([3.0]), one(3), np.array([False]), np.array([False]), slots=[0])
    assert out["obs"][0, 0] == 1 and out["reward"][0] == pytest.approx(2 + G * 3)
    out = b.step(one(11), np.array([1]), np.array([7.0]), one(12), np.array([True]), np.array([False]), slots=[1])
    # slot 1's windows: [10, 11] and [11], both terminal; slot 0's pending step is untouched
    assert out["obs"][:, 0].tolist() == [10, 11]
    assert out["reward"].tolist() == pytest.approx([5 + G * 7, 7]) and out["discount"].tolist() == [0, 0]
    assert b._count.tolist() == [1, 0]
