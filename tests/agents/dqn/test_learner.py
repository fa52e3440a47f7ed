"""The DQN learner's math: double-DQN n-step targets, IS-weighted loss, target copies, NaN skipping."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from apexrl.agents import get_builder
from apexrl.agents.dqn.learner import double_dqn_targets
from apexrl.config import Config


def test_double_dqn_target_uses_online_argmax_and_target_values():
    q_online = torch.tensor([[1.0, 5.0, 2.0], [3.0, 0.0, 1.0]])
    q_target = torch.tensor([[10.0, 20.0, 30.0], [7.0, 8.0, 9.0]])
    y = double_dqn_targets(q_online, q_target, torch.tensor([1.0, 2.0]), torch.tensor([0.5, 0.0]))
    # row 0: argmax online = 1 -> target 20 (not max 30);  row 1: terminated, no bootstrap
    assert y.tolist() == pytest.approx([1.0 + 0.5 * 20.0, 2.0])


def make_learner(**over):
    cfg = Config().replace(**{"learner.batch_size": 8, "replay.capacity": 100, "replay.learning_starts": 10, "network.torso": [16], "network.head": 16,
                              **over})
    obs = gym.spaces.Box(-1, 1, (4,), np.float32)
    return get_builder("dqn").make_learner(cfg, obs, gym.spaces.Discrete(2))


def batch(B=8, seed=0):
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(size=(B, 4)).astype(np.float32), "action": rng.integers(2, size=B),
            "reward": rng.normal(size=B).astype(np.float32), "discount": np.full(B, 0.97, np.float32),
            "next_obs": rng.normal(size=(B, 4)).astype(np.float32)}


def test_update_returns_abs_td_plus_eps_as_priorities():
    lr = make_learner()
    b = batch()
    with torch.no_grad():
        obs, nxt = torch.as_tensor(b["obs"]), torch.as_tensor(b["next_obs"])
        y = double_dqn_targets(lr.net(nxt), lr.target(nxt), torch.as_tensor(b["reward"]), torch.as_tensor(b["discount"]))
        q = lr.net(obs).gather(1, torch.as_tensor(b["action"]).view(-1, 1)).squeeze(1)
    prios, m = lr.update(b, np.ones(8, np.float32))
    np.testing.assert_allclose(prios, (y - q).abs().numpy() + lr.cfg.replay.priority_eps, rtol=1e-5)
    assert lr.updates == 1 and m["loss"] > 0


def test_zero_importance_weight_means_no_gradient():
    lr = make_learner()
    before = [p.clone() for p in lr.net.parameters()]
    lr.update(batch(), np.zeros(8, np.float32))
    assert all(torch.equal(a, b) for a, b in zip(before, lr.net.parameters()))


def test_target_network_is_copied_every_period():
    lr = make_learner(**{"learner.target_update_period": 3})
    t0 = [p.clone() for p in lr.target.parameters()]
    for i in range(2):
        lr.update(batch(seed=i), np.ones(8, np.float32))
    assert all(torch.equal(a, b) for a, b in zip(t0, lr.target.parameters()))
    lr.update(batch(seed=5), np.ones(8, np.float32))
    assert all(torch.equal(a, b) for a, b in zip(lr.net.parameters(), lr.target.parameters()))


def test_non_finite_loss_skips_the_update_and_counts_it():
    lr = make_learner()
    b = batch()
    b["reward"][0] = np.nan
    before = [p.clone() for p in lr.net.parameters()]
    prios, m = lr.update(b, np.ones(8, np.float32))
    assert prios is None and lr.skipped_updates == 1 and lr.updates == 0
    assert all(torch.equal(a, b) for a, b in zip(before, lr.net.parameters()))


def test_learning_reduces_td_error_on_a_fixed_batch():
    lr = make_learner(**{"learner.lr": 1e-2})
    b = batch(B=8)
    b["discount"][:] = 0.0
    first, _ = lr.update(b, np.ones(8, np.float32))
    for _ in range(200):
        last, _ = lr.update(b, np.ones(8, np.float32))
    assert last.mean() < 0.2 * first.mean()


def test_state_dict_round_trip_restores_counters_and_weights():
    a = make_learner()
    for i in range(3):
        a.update(batch(seed=i), np.ones(8, np.float32))
    b = make_learner()
    b.load_state_dict(a.state_dict())
    assert b.updates == 3
    assert all(torch.equal(x, y) for x, y in zip(a.net.parameters(), b.net.parameters()))

