"""The DPG learner's math: clipped double-Q n-step targets, IS-weighted critic loss, |TD| priorities,
delayed policy updates that leave the critics alone, Polyak and periodic targets, exact state round trip."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from apexrl.agents import get_builder
from apexrl.agents.dpg.learner import dpg_targets
from apexrl.config import Config

ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
OBS = gym.spaces.Box(-1, 1, (3,), np.float32)


def test_target_takes_the_smaller_critic_and_does_not_bootstrap_a_terminal():
    q_next = torch.tensor([[1.0, 3.0], [2.0, 0.0]])  # [critics, batch]
    y = dpg_targets(q_next, torch.tensor([1.0, 1.0]), torch.tensor([0.5, 0.0]))
    assert y.tolist() == pytest.approx([1.0 + 0.5 * 1.0, 1.0])


def make_learner(**over):
    cfg = Config().replace(**{"agent": "dpg", "learner.batch_size": 8, "replay.capacity": 100,
                              "replay.learning_starts": 10, "network.torso": [16], **over})
    return get_builder("dpg").make_learner(cfg, OBS, ACT)


def batch(B=8, seed=0):
    rng = np.random.default_rng(seed)
    return {"obs": rng.normal(size=(B, 3)).astype(np.float32),
            "action": rng.uniform(ACT.low, ACT.high, size=(B, 2)).astype(np.float32),
            "reward": rng.normal(size=B).astype(np.float32), "discount": np.full(B, 0.97, np.float32),
            "next_obs": rng.normal(size=(B, 3)).astype(np.float32)}


def test_priorities_are_abs_td_of_the_first_critic_on_unit_scaled_actions():
    lr = make_learner(**{"dpg.target_noise": 0.0})
    b = batch()
    unit = (b["action"] - np.array([0.0, 0.5])) / np.array([2.0, 0.5])  # env box -> [-1, 1], by hand
    with torch.no_grad():
        nxt = torch.as_tensor(b["next_obs"])
        y = torch.as_tensor(b["reward"]) + 0.97 * lr.target.q(nxt, lr.target(nxt)).min(0).values
        q1 = lr.net.q(torch.as_tensor(b["obs"]), torch.as_tensor(unit, dtype=torch.float32))[0]
    prios, m = lr.update(b, np.ones(8, np.float32))
    np.testing.assert_allclose(prios, (y - q1).abs().numpy() + lr.cfg.replay.priority_eps, rtol=1e-5)
    assert m["loss"] > 0 and lr.updates == 1


def test_zero_importance_weights_leave_the_critics_unchanged():
    lr = make_learner(**{"dpg.policy_delay": 1000})
    lr.updates = 1  # not a policy-update step
    before = [p.clone() for p in lr.net.critics.parameters()]
    lr.update(batch(), np.zeros(8, np.float32))
    assert all(torch.equal(a, b) for a, b in zip(before, lr.net.critics.parameters()))


def test_the_policy_updates_every_policy_delay_steps_and_its_loss_does_not_move_the_critics():
    lr = make_learner(**{"dpg.policy_delay": 2})
    pi0 = [p.clone() for p in lr.net.pi.parameters()]
    lr.update(batch(seed=0), np.ones(8, np.float32))  # update 0: critic, then policy
    pi1 = [p.clone() for p in lr.net.pi.parameters()]
    assert not all(torch.equal(a, b) for a, b in zip(pi0, pi1))
    lr.update(batch(seed=1), np.ones(8, np.float32))  # update 1: critic only
    assert all(torch.equal(a, b) for a, b in zip(pi1, lr.net.pi.parameters()))

    # A policy step alone (zero IS weights: no critic gradient) must leave the critics as they were.
    lr2 = make_learner(**{"dpg.policy_delay": 1})
    q0 = [p.clone() for p in lr2.net.critics.parameters()]
    lr2.update(batch(), np.zeros(8, np.float32))
    assert all(torch.equal(a, b) for a, b in zip(q0, lr2.net.critics.parameters()))


def test_polyak_target_moves_tau_of_the_way_each_update():
    lr = make_learner(**{"dpg.tau": 0.25})
    t0 = [p.clone() for p in lr.target.parameters()]
    lr.update(batch(), np.ones(8, np.float32))
    for t_before, t_after, online in zip(t0, lr.target.parameters(), lr.net.parameters()):
        torch.testing.assert_close(t_after, 0.75 * t_before + 0.25 * online.detach())


def test_tau_zero_copies_the_target_every_period():
    lr = make_learner(**{"dpg.tau": 0.0, "learner.target_update_period": 2})
    t0 = [p.clone() for p in lr.target.parameters()]
    lr.update(batch(seed=0), np.ones(8, np.float32))
    assert all(torch.equal(a, b) for a, b in zip(t0, lr.target.parameters()))
    lr.update(batch(seed=1), np.ones(8, np.float32))
    assert all(torch.equal(a, b) for a, b in zip(lr.net.parameters(), lr.target.parameters()))


def test_one_critic_without_twin():
    lr = make_learner(**{"dpg.twin_critics": False})
    assert len(lr.net.critics) == 1
    prios, _ = lr.update(batch(), np.ones(8, np.float32))
    assert prios.shape == (8,)


def test_non_finite_batch_is_skipped():
    lr = make_learner()
    b = batch()
    b["reward"][0] = np.nan
    prios, m = lr.update(b, np.ones(8, np.float32))
    assert prios is None and lr.skipped_updates == 1 and lr.updates == 0


def test_state_round_trip_gives_the_same_next_update():
    a = make_learner()
    for i in range(3):
        a.update(batch(seed=i), np.ones(8, np.float32))
    state = a.state_dict()
    b = make_learner(**{"seed": 7})
    b.load_state_dict(state)
    torch.set_rng_state(state["torch_rng"])
    pa, _ = a.update(batch(seed=9), np.ones(8, np.float32))
    torch.set_rng_state(state["torch_rng"])
    pb, _ = b.update(batch(seed=9), np.ones(8, np.float32))
    np.testing.assert_array_equal(pa, pb)
    assert b.updates == a.updates == 4
    assert all(torch.equal(x, y) for x, y in zip(a.net.parameters(), b.net.parameters()))
