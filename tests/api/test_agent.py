"""``apexrl.ApeX`` in the user's own loop: n-step storage with priorities, updates on schedule with the
user's optimizer, exact save/load, clear errors; the article's program learns (slow)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from apexrl import ApeX, create_env
from apexrl.config import ConfigError


def _model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))


def _play(apex: ApeX, env: gym.Env, steps: int, learn: bool = True) -> list:
    stats = []
    state, _ = env.reset(seed=0)
    for _ in range(steps):
        action = apex.select_action(state)
        next_state, reward, done, truncated, _ = env.step(action)
        apex.store_experience(state, action, reward, next_state, done, truncated)
        if learn:
            stats.append(apex.learn())
        state = next_state if not (done or truncated) else env.reset()[0]
    return stats


def test_storing_builds_n_step_transitions_with_positive_priorities():
    env = create_env("CartPole-v1")
    model = _model()
    apex = ApeX(env, model, torch.optim.Adam(model.parameters(), lr=1e-3), n_step=3, learning_starts=100_000)
    _play(apex, env, 50, learn=False)
    # One transition per step, except the windows still open: the last min(n - 1, steps since the last
    # episode end) steps (CartPole pays 1 per step, so returns are episode lengths).
    open_windows = min(3 - 1, 50 - int(sum(apex.returns)))
    assert len(apex.replay) == 50 - open_windows
    batch, _, _ = apex.replay.sample(16, beta=0.4)
    assert set(batch) == {"obs", "action", "reward", "discount", "next_obs"}
    assert apex.replay.total_priority > 0
    assert apex.get_score() == (np.mean(apex.returns) if apex.returns else 0.0)


def test_updates_start_after_learning_starts_and_run_every_train_freq_steps_with_the_users_optimizer():
    env = create_env("CartPole-v1")
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    apex = ApeX(env, model, opt, learning_starts=100, train_freq=4, batch_size=16)
    stats = _play(apex, env, 300)
    first = next(i for i, s in enumerate(stats) if s is not None)
    assert 97 <= first <= 110  # replay holds learning_starts transitions (n-step lag) on a step that is due
    assert all((s is None) == ((i + 1) % 4 != 0) for i, s in enumerate(stats) if i > first)
    assert apex.learner.updates == sum(s is not None for s in stats) and apex.learner.optimizer is opt


def test_save_and_load_resume_exactly(tmp_path):
    env = create_env("CartPole-v1")
    model = _model()
    apex = ApeX(env, model, torch.optim.Adam(model.parameters(), lr=1e-3), learning_starts=64, seed=3)
    _play(apex, env, 200)
    apex.save(tmp_path / "agent.pt")
    model2 = _model(seed=1)
    twin = ApeX.load(tmp_path / "agent.pt", env, model2, torch.optim.Adam(model2.parameters(), lr=1e-3))
    assert twin.steps == apex.steps and len(twin.replay) == len(apex.replay)
    assert twin.learner.updates == apex.learner.updates and twin.get_score() == apex.get_score()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), model2.parameters()))
    state = np.array([0.01, -0.02, 0.03, 0.0], np.float32)
    assert [apex.select_action(state) for _ in range(20)] == [twin.select_action(state) for _ in range(20)]
    # Both go on for 150 seeded steps with learning: they must stay identical, which counters alone don't show.
    _play(apex, create_env("CartPole-v1"), 150)
    _play(twin, create_env("CartPole-v1"), 150)
    assert twin.learner.updates == apex.learner.updates > 0
    for a, b in zip(model.parameters(), model2.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    opt_a, opt_b = apex.learner.optimizer.state_dict()["state"], twin.learner.optimizer.state_dict()["state"]
    assert opt_a.keys() == opt_b.keys() and opt_a
    for k in opt_a:
        for name, v in opt_a[k].items():
            torch.testing.assert_close(opt_b[k][name], v, rtol=0, atol=0)
    ra, rb = apex.replay.state_dict(), twin.replay.state_dict()
    for k in ra:
        if isinstance(ra[k], np.ndarray):
            np.testing.assert_array_equal(rb[k], ra[k], err_msg=k)


def test_a_bad_key_is_one_clear_error():
    env = create_env("CartPole-v1")
    model = _model()
    with pytest.raises(ConfigError, match="unknown ApeX key 'bach_size'"):
        ApeX(env, model, torch.optim.Adam(model.parameters()), bach_size=32)
    with pytest.raises(ConfigError, match="learner.gamma"):
        ApeX(env, model, torch.optim.Adam(model.parameters()), gamma=2.0)


def test_the_articles_single_machine_program_reaches_195():
    """Seeded (network, env, exploration): reaches a mean of 195 over 100 episodes at episode 330 (~25 s)."""
    path = Path(__file__).resolve().parents[2] / "examples" / "single_machine.py"
    spec = importlib.util.spec_from_file_location("single_machine", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(episodes=1000) >= 195


@pytest.mark.timeout(300)
def test_the_articles_tune_program_runs_a_trial_that_reports_its_score(tmp_path):
    path = Path(__file__).resolve().parents[2] / "examples" / "tune_function.py"
    spec = importlib.util.spec_from_file_location("tune_function", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    results = mod.main(num_episodes=31, storage_path=str(tmp_path / "tune"))
    assert len(results) == 1 and not results.errors
    assert results[0].metrics["training_iteration"] == 4  # episodes 0, 10, 20, 30
    assert results[0].metrics["score"] > 0
